"""The `bench_out` fixture: a bench --out folder made from data/results.jsonl (see report_data.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from report_data import CARTPOLE, CONFIG_SOURCES, DATA, NO_CURVE, fixture_rows, write_manifest, write_metrics


@pytest.fixture
def bench_out(tmp_path) -> Path:
    """A bench --out folder: results.jsonl copied from data/, metrics.csv written under runs/<key>/."""
    out = tmp_path / "bench"
    out.mkdir()
    shutil.copyfile(DATA / "results.jsonl", out / "results.jsonl")
    for row in fixture_rows():
        if row["key"] == NO_CURVE or not row.get("run_dir"):
            continue
        if row["status"] == "completed":
            write_metrics(out / row["run_dir"], row["final_return"], row["steps_per_s"])
            if row["task"] == CARTPOLE:  # what training writes as run.json's agent_config
                write_manifest(out / row["run_dir"], CONFIG_SOURCES[row["run"]])
        elif row["status"] == "failed":  # a run killed after two iterations, its last row torn
            write_metrics(out / row["run_dir"], -1000.0, 1000.0, iterations=2)
            with (out / row["run_dir"] / "metrics.csv").open("a", encoding="utf-8") as handle:
                handle.write("3,6144,6.1")
    return out
