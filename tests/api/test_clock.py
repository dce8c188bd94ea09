"""The iteration clock: metrics.csv for every library, stop on request, Ctrl-C and SIGTERM as stop requests."""

from __future__ import annotations

import csv

import pytest

import rlrun
from rlrun.runs.metrics import METRICS_COLUMNS, METRICS_FILE
from support import SMALL_RSL_RL, scalars

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


def test_rows_reach_metrics_csv_and_the_curves_at_once_then_at_most_every_second_and_every_one_at_close(
    tmp_path, monkeypatch
):
    """The first row is written at once, later ones within WRITE_INTERVAL_S, the rest when the clock closes: a
    killed run keeps its rows up to the last second, and both files hold the same rows. A row written late keeps
    the time it was made."""
    from rlrun.api import clock as module

    now = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(module.time, "time", lambda: 1e9 + now[0])

    class Stats:
        env_steps = 0
        episodes = 1

        def mean_return(self):
            return float(self.env_steps)

        def mean_length(self):
            return 1.0

    stats = Stats()
    clock = module.IterationClock(10)

    def iteration(seconds):
        now[0] += seconds
        stats.env_steps += 10
        clock(stats)

    def written():
        with open(tmp_path / module.METRICS_FILE, newline="", encoding="utf-8") as stream:
            rows = [int(row["env_steps"]) for row in csv.DictReader(stream)]
        return rows, [step for step, _ in scalars(tmp_path).get("rlrun/mean_return", [])]

    clock.open(tmp_path)
    try:
        iteration(0.0)
        assert written() == ([10], [10])
        iteration(module.WRITE_INTERVAL_S / 2)
        assert written() == ([10], [10])
        iteration(module.WRITE_INTERVAL_S / 2)
        assert written() == ([10, 20, 30], [10, 20, 30])
        iteration(0.1)
        assert written() == ([10, 20, 30], [10, 20, 30])
    finally:
        clock.close()
    assert written() == ([10, 20, 30, 40], [10, 20, 30, 40])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    interval = module.WRITE_INTERVAL_S
    made = [1e9 + 100.0 + offset for offset in (0.0, interval / 2, interval, interval + 0.1)]
    assert [event.wall_time for event in accumulator.Scalars("rlrun/mean_return")] == pytest.approx(made)
