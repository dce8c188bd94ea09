"""A checkpoint copied away from its run (no run.json beside it) still plays on its own task, and is refused
in one line on a task whose sizes it does not fit: by `play` before anything is written; by `train --resume`
once the library loads it (the run folder of that attempt exists by then: no plan-time fit check yet)."""

from __future__ import annotations

import shutil

import pytest

import rlrun
from rlrun.errors import UserError


def copied_checkpoint(tmp_path, framework: str):
    trained = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/CartPoleContinuous-v1",
            library="skrl",
            ml_framework=framework,
            num_envs=4,
            max_iterations=1,
            seed=1,
            device="cpu",
            log_root=str(tmp_path / "trained"),
        )
    )
    copy = tmp_path / "elsewhere" / trained.checkpoint.name
    copy.parent.mkdir()
    shutil.copy(trained.checkpoint, copy)
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_a_copied_skrl_checkpoint_plays_on_its_task_and_is_refused_in_one_line_on_another(framework, tmp_path):
    if framework == "jax":
        pytest.importorskip("jax")
    copy = copied_checkpoint(tmp_path, framework)
    common = {"library": "skrl", "ml_framework": framework, "checkpoint": str(copy), "device": "cpu"}
    played = rlrun.play(rlrun.PlayRequest(task="rlrun/CartPoleContinuous-v1", num_episodes=1, max_steps=50, **common))
    assert played.checkpoint == copy and played.run_dir is None and played.env_steps > 0
    log_root = tmp_path / "other"
    for request in (
        rlrun.PlayRequest(task="rlrun/Pendulum-v1", num_episodes=1, log_root=str(log_root), **common),
        rlrun.TrainRequest(
            task="rlrun/Pendulum-v1", resume=True, max_iterations=1, num_envs=4, log_root=str(log_root), **common
        ),
    ):
        call = rlrun.play if isinstance(request, rlrun.PlayRequest) else rlrun.train
        with pytest.raises(UserError) as caught:
            call(request)
        message = str(caught.value)
        assert str(copy) in message and "does not fit this task" in message and "\n" not in message
        assert "--task" in message
        if call is rlrun.play:
            assert not log_root.exists()
