"""The iteration clock: metrics.csv for every library, stop on request, Ctrl-C and SIGTERM as stop requests."""

from __future__ import annotations

import csv

import pytest

import rlrun
from rlrun.api.metrics import METRICS_COLUMNS, METRICS_FILE
from support import SMALL_RSL_RL

SHORT = {
    "rsl_rl": ("rlrun/Pendulum-v1", SMALL_RSL_RL),
    "sb3": ("rlrun/CartPole-v1", ("agent.n_steps=8", "agent.batch_size=16")),
}


def rows_of(run_dir):
    with open(run_dir / METRICS_FILE, newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


@pytest.mark.parametrize("library", list(SHORT))
def test_every_training_writes_one_metrics_row_per_iteration(library, log_root):
    task, overrides = SHORT[library]
    result = rlrun.train(
        rlrun.TrainRequest(
            task=task, library=library, num_envs=2, max_iterations=3, overrides=overrides, log_root=str(log_root)
        )
    )
    rows = rows_of(result.run_dir)
    assert list(rows[0]) == list(METRICS_COLUMNS)
    assert [int(row["iteration"]) for row in rows] == [1, 2, 3]
    steps = [int(row["env_steps"]) for row in rows]
    assert steps == sorted(steps) and steps[-1] == result.env_steps
    assert all(float(row["steps_per_s"]) > 0 for row in rows)


def test_on_iteration_can_stop_a_training_which_then_reports_stopped(log_root):
    seen = []

    def prune(row):
        seen.append(row)
        return row.iteration >= 2

    task, overrides = SHORT["rsl_rl"]
    result = rlrun.train(
        rlrun.TrainRequest(
            task=task, library="rsl_rl", num_envs=2, max_iterations=50, overrides=overrides, log_root=str(log_root)
        ),
        on_iteration=prune,
    )
    assert result.status == "stopped"
    assert [row.iteration for row in seen] == [1, 2]
    assert len(rows_of(result.run_dir)) == 2
    manifest = (result.run_dir / "run.json").read_text(encoding="utf-8")
    assert '"status": "stopped"' in manifest
