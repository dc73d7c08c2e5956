"""`llmopt-tui compare` (the table from sessions or bench JSONs) and `llmopt-tui presets` (what exists)."""

from __future__ import annotations

from pathlib import Path

from presets.catalog import load_catalog
from presets.results import compare_paths
from presets.vllm_env import tiny_model_path


def run_compare(paths: list[str], fmt: str) -> int:
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"no such file or folder: {', '.join(missing)}")
    table = compare_paths([Path(p) for p in paths])
    print({"md": table.to_markdown, "csv": table.to_csv, "json": table.to_json}[fmt]())
    return 0


def run_list_presets(user_dirs: list[str]) -> int:
    catalog = load_catalog([Path(p) for p in user_dirs], tiny_model=str(tiny_model_path()))
    print("servers:")
    for s in catalog.servers.values():
        print(f"  {s.name:14} {s.device:3} {s.role:12} {s.model}  {' '.join(s.args)}")
    print("traffic:")
    for t in catalog.traffic.values():
        rate = t.request_rate
        print(
            f"  {t.name:14} {t.dataset:17} {t.num_prompts:5} prompts  rate {rate}  conc {t.max_concurrency}"
        )
    print("plans:")
    for p in catalog.plans.values():
        print(f"  {p.name:14} " + ", ".join(ph.name for ph in p.phases))
    return 0
