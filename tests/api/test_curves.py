"""One set of curves for every library: each run's `rlrun/*` TensorBoard scalars are its metrics.csv rows."""

from __future__ import annotations

import csv
import threading

import pytest

import rlrun
from rlrun.api.curves import CURVES, FILE_SUFFIX
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


def test_a_running_curve_is_flushed_at_once_then_at_most_every_second(tmp_path, monkeypatch):
    """The first point reaches the file at once, later ones within FLUSH_INTERVAL_S: a killed run keeps its
    curve up to the last second, and a short iteration does not wait for the writer's thread every time."""
    from rlrun.api import curves as module
    from rlrun.api.iterations import IterationRow

    now = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])

    def row(steps):
        return IterationRow(
            iteration=steps,
            env_steps=steps,
            wall_s=1.0,
            steps_per_s=1.0,
            mean_return=float(steps),
            mean_length=1.0,
            episodes=1,
        )

    writer = module.Curves()
    writer.open(tmp_path)
    try:
        writer.add(row(1))
        assert [step for step, _ in scalars(tmp_path)["rlrun/mean_return"]] == [1]
        now[0] += module.FLUSH_INTERVAL_S / 2
        writer.add(row(2))
        now[0] += module.FLUSH_INTERVAL_S / 2
        writer.add(row(3))
        assert [step for step, _ in scalars(tmp_path)["rlrun/mean_return"]] == [1, 2, 3]
        writer.add(row(4))
    finally:
        writer.close()
    assert [step for step, _ in scalars(tmp_path)["rlrun/mean_return"]] == [1, 2, 3, 4]
