"""One set of curves for every library: each run's `rlrun/*` TensorBoard scalars are its metrics.csv rows."""

from __future__ import annotations

import csv
import threading

import pytest

import rlrun
from rlrun.api.metrics import CURVES, FILE_SUFFIX
from rlrun.libraries import LIBRARIES
from support import SHORT_RUNS

TASK = "rlrun/Pendulum-v1"
SHORT_EPISODES = ("env.max_episode_steps=8",)
"""Episodes of 8 steps, so that a run of two short iterations has finished some."""


def scalars(run_dir):
    """Tag -> [(step, value)] of the run folder's event files, read the way TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
    }


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_every_library_writes_the_same_scalars_against_env_steps_as_its_metrics_rows(library, log_root):
    row = LIBRARIES[library]
    if not row.installed:
        pytest.skip(f"{library} is not installed")
    threads = threading.active_count()
    result = rlrun.train(
        rlrun.TrainRequest(
            task=TASK,
            library=library,
            num_envs=4,
            max_iterations=2,
            seed=0,
            device="cpu",
            log_root=str(log_root),
            overrides=(*SHORT_RUNS.get(library, ()), *SHORT_EPISODES),
        )
    )
    assert threading.active_count() == threads  # the event writer's thread was joined
    assert len(list(result.run_dir.glob(f"events.out.tfevents.*{FILE_SUFFIX}"))) == 1
    with open(result.run_dir / "metrics.csv", encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    assert rows and result.episodes > 0
    found = scalars(result.run_dir)
    for tag, column in CURVES.items():
        expected = [(int(row["env_steps"]), float(row[column])) for row in rows if row[column] != ""]
        assert expected, f"no {column} in metrics.csv"
        assert [step for step, _ in found[tag]] == [step for step, _ in expected], tag
        assert [value for _, value in found[tag]] == pytest.approx([value for _, value in expected], rel=1e-6)


def test_the_curves_leave_out_what_is_not_known_yet(log_root):
    """Before the first episode ends there is no return and no length: those points are left out, not zero."""
    pytest.importorskip("rsl_rl")
    result = rlrun.train(
        rlrun.TrainRequest(
            task=TASK,
            library="rsl_rl",
            num_envs=2,
            max_iterations=1,
            device="cpu",
            log_root=str(log_root),
            overrides=SHORT_RUNS["rsl_rl"],
        )
    )
    assert result.episodes == 0
    found = scalars(result.run_dir)
    assert "rlrun/mean_return" not in found and "rlrun/mean_length" not in found
    assert [step for step, _ in found["rlrun/steps_per_s"]] == [16]


def test_train_ends_by_naming_the_run_and_the_command_that_shows_its_curves(log_root, capsys, monkeypatch):
    pytest.importorskip("rsl_rl")
    monkeypatch.chdir(log_root.parent)
    words = ["--num_envs", "2", "--max_iterations", "1", "--device", "cpu", "--log_root", "logs"]
    code = rlrun.main(["train", "--task", TASK, "--library", "rsl_rl", *words, *SHORT_RUNS["rsl_rl"]])
    assert code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    (run_dir,) = (log_root / "rsl_rl" / "rlrun_Pendulum-v1").iterdir()
    assert last == f"curves: tensorboard --logdir logs/rsl_rl  (this run: rlrun_Pendulum-v1/{run_dir.name})"


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
