"""A checkpoint copied away from its run (no run.json beside it) still plays on its own task, and is refused
in one line on a task whose sizes it does not fit, before anything is written: by `play`, and by
`train --resume`, which rebuilds the policy from it before the run folder exists (`check_resume_fit`)."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest
import torch

import rlrun
from rlrun.errors import UserError
from support import CONTRACT_CASES

FAST = {"rsl_rl"}
"""The cases the default suite runs; the others are `slow`."""


def copied_checkpoint(tmp_path, spec):
    trained = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/CartPoleContinuous-v1",
            **{**spec, "max_iterations": 1},
            seed=1,
            device="cpu",
            log_root=str(tmp_path / "trained"),
        )
    )
    copy = tmp_path / "elsewhere" / trained.checkpoint.name
    copy.parent.mkdir()
    shutil.copy(trained.checkpoint, copy)
    return copy


@pytest.mark.parametrize(
    "case", [case if case in FAST else pytest.param(case, marks=pytest.mark.slow) for case in CONTRACT_CASES]
)
def test_a_copied_checkpoint_plays_on_its_task_and_is_refused_in_one_line_on_another(case, tmp_path):
    spec = dict(CONTRACT_CASES[case][0])
    if spec.get("ml_framework") == "jax":
        pytest.importorskip("jax")
    copy = copied_checkpoint(tmp_path, spec)
    common = {
        "library": spec["library"],
        "ml_framework": spec.get("ml_framework"),
        "algorithm": spec.get("algorithm"),
        "checkpoint": str(copy),
        "device": "cpu",
        "overrides": spec["overrides"],
    }
    played = rlrun.play(rlrun.PlayRequest(task="rlrun/CartPoleContinuous-v1", num_episodes=1, max_steps=50, **common))
    assert played.checkpoint == copy and played.run_dir is None and played.env_steps > 0
    log_root = tmp_path / "other"
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    expected = (random.random(), np.random.random(), torch.rand(1))
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    for request in (
        rlrun.PlayRequest(task="rlrun/Pendulum-v1", num_episodes=1, log_root=str(log_root), **common),
        rlrun.TrainRequest(
            task="rlrun/Pendulum-v1",
            resume=True,
            max_iterations=1,
            num_envs=spec["num_envs"],
            log_root=str(log_root),
            **common,
        ),
    ):
        call = rlrun.play if isinstance(request, rlrun.PlayRequest) else rlrun.train
        with pytest.raises(UserError) as caught:
            call(request)
        message = str(caught.value)
        assert str(copy) in message and "does not fit" in message and "\n" not in message
        assert "--task" in message
        assert not log_root.exists(), f"{call.__name__} left {sorted(log_root.rglob('*'))}"
    assert (random.random(), np.random.random(), torch.rand(1)) == expected
