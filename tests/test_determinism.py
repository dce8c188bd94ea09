"""Order independence: a run gives the same result alone in a fresh process and after other runs in this one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import rlrun

SMALL = ("agent.num_steps_per_env=16", "agent.actor.hidden_dims=[32,32]", "agent.critic.hidden_dims=[32,32]")
A = {"task": "rlrun/CartPoleContinuous-v1", "seed": 1, "num_envs": 64, "max_iterations": 6, "overrides": SMALL}
B = {"task": "rlrun/Pendulum-v1", "seed": 2, "num_envs": 32, "max_iterations": 4, "overrides": SMALL}

SUBPROCESS = """
import sys
import rlrun
result = rlrun.train(rlrun.TrainRequest(library="rsl_rl", log_root=sys.argv[1], **{a!r}))
print(result.checkpoint)
print(repr(result.mean_return))
"""


def train(log_root, spec):
    return rlrun.train(rlrun.TrainRequest(library="rsl_rl", log_root=str(log_root), **spec))


def weights(checkpoint):
    state = torch.load(checkpoint, weights_only=True)
    return {
        f"{part}.{key}": value
        for part in ("actor_state_dict", "critic_state_dict")
        for key, value in state[part].items()
    }


def assert_bitwise_equal(first, second):
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), f"{key} differs"


@pytest.mark.slow
def test_a_run_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path):
    first = train(tmp_path / "first", A)
    train(tmp_path / "between", B)
    again = train(tmp_path / "again", A)
    assert first.mean_return == again.mean_return and first.env_steps == again.env_steps
    assert_bitwise_equal(weights(first.checkpoint), weights(again.checkpoint))

    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    output = subprocess.run(
        [sys.executable, "-c", SUBPROCESS.format(a=A), str(tmp_path / "fresh")],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        timeout=300,
    ).stdout.splitlines()
    assert float(output[-1]) == first.mean_return
    assert_bitwise_equal(weights(first.checkpoint), weights(Path(output[-2])))
