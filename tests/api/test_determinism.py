"""Order independence: a run gives the same result alone in a fresh process and after other runs in this one."""

from __future__ import annotations

import pytest
import torch

from support import assert_order_independent

SMALL = ("agent.num_steps_per_env=16", "agent.actor.hidden_dims=[32,32]", "agent.critic.hidden_dims=[32,32]")
A = {"task": "rlrun/CartPoleContinuous-v1", "seed": 1, "num_envs": 64, "max_iterations": 6, "overrides": SMALL}
B = {"task": "rlrun/Pendulum-v1", "seed": 2, "num_envs": 32, "max_iterations": 4, "overrides": SMALL}


def weights(checkpoint):
    state = torch.load(checkpoint, weights_only=True)
    return {
        f"{part}.{key}": value
        for part in ("actor_state_dict", "critic_state_dict")
        for key, value in state[part].items()
    }


@pytest.mark.slow
def test_a_run_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path):
    assert_order_independent(tmp_path, {"library": "rsl_rl", **A}, {"library": "rsl_rl", **B}, weights)


@pytest.mark.slow
def test_a_run_on_the_compiled_env_step_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path):
    """The same with `env.kernel=compiled` (rlrun.envs.kernels): loading the kernel changes nothing either."""
    compiled = {**A, "overrides": ("env.kernel=compiled", *SMALL)}
    assert_order_independent(tmp_path, {"library": "rsl_rl", **compiled}, {"library": "rsl_rl", **B}, weights)
