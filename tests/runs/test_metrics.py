"""One set of curves for every library: each run's `rlrun/*` TensorBoard scalars are its metrics.csv rows."""

from __future__ import annotations

import csv
import threading

import pytest

import rlrun
from rlrun.libraries import LIBRARIES
from rlrun.runs.metrics import CURVES, FILE_SUFFIX
from support import SHORT_RUNS, scalars

TASK = "rlrun/Pendulum-v1"
SHORT_EPISODES = ("env.max_episode_steps=8",)
"""Episodes of 8 steps, so that a run of two short iterations has finished some."""


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
