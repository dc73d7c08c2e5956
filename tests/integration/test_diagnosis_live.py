"""Diagnosis on REAL servers: the KV-starved preset under load is KV-bound, the roomy one is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from presets.catalog import load_catalog
from presets.process import free_port
from presets.results import SessionStore
from presets.runner import PhaseSpec, PlanRunner
from presets.vllm_env import tiny_model_path
from probes.gpu import open_gpu_source
from probes.host import HostProbe
from probes.monitor import Monitor
from probes.replay import sample_to_dict

pytestmark = pytest.mark.integration


def test_kv_bound_fires_on_starved_not_on_roomy(vllm_ready: Path, tmp_path: Path) -> None:
    catalog = load_catalog(tiny_model=str(tiny_model_path()), use_default_user_dir=False)
    # Long enough (~25 s of traffic) for a finding to hold through its hysteresis at 1 Hz.
    traffic = catalog.get_traffic("cpu-random").replace(num_prompts=400)
    phases = [
        PhaseSpec(catalog.get_server(name).model_copy(update={"port": free_port()}), traffic, name)
        for name in ("cpu-starved", "cpu-roomy")
    ]
    store = SessionStore(tmp_path)
    store.new_session({})
    monitor = Monitor(None, open_gpu_source(), HostProbe())
    monitor.on_sample = lambda sample: store.append_sample(sample_to_dict(sample))
    runner = PlanRunner(vllm_exe=vllm_ready, store=store, on_event=lambda e: None, monitor=monitor)
    starved, roomy = runner.run(phases)
    monitor.close()
    assert starved.status == roomy.status == "ok"
    starved_ids = {f["id"] for f in starved.findings}
    roomy_ids = {f["id"] for f in roomy.findings}
    assert "kv_bound" in starved_ids, starved.findings
    assert "kv_bound" not in roomy_ids, roomy.findings
    # The log says 3.00x for 256-token requests while the client sends 8 at once.
    assert "concurrency_ceiling" in starved_ids
    assert "concurrency_ceiling" not in roomy_ids
    # --ignore-eos traffic: 100 % length finishes is expected, never a "cut off" alarm.
    assert "length_finishes" not in starved_ids | roomy_ids
    assert (starved.window.get("preemptions") or 0) > 0 and (roomy.window.get("preemptions") or 0) == 0
    # Between the phases, the causal chain with the measured numbers.
    chain = [f for f in roomy.findings if f["id"].startswith("change_")]
    assert chain and "768 → 2,097,152" in chain[0]["title"] + " ".join(chain[0]["evidence"]), chain
