"""The recipe "add a native task" (ARCHITECTURE.md), followed here: a 1-D point mass that must reach 0.

1. Subclass `BatchedVectorEnv` and write the physics only: `state_size`, `initial_state`, `advance`,
   `observe`, the spaces passed to `super().__init__`.
2. Register a `NativeTask` record whose entry point names the class ("module:Class").
3. Build it with `rlrun.envs.make_env`; every rlrun call (here `rlrun.random_agent`) can run it.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from env_contract import check_contract
from gymnasium import spaces

import rlrun
from rlrun.envs import NATIVE_TASKS, BatchedVectorEnv, NativeTask, env_config, make_env, register

TASK = "rlrun_test/PointMass-v0"


class PointMassVectorEnv(BatchedVectorEnv):
    """A unit mass on a line, pushed by a force in [-1, 1] for `dt` seconds a step.

    State: position and velocity; the episode starts at rest at a position in [-1, 1) and ends
    (terminated) once the mass is within `tolerance` of 0. Reward: -|position| after the step.
    """

    state_size = 2

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int = 100,
        device: str | torch.device = "cpu",
        render_mode: str | None = None,
        dt: float = 0.1,
        tolerance: float = 0.05,
    ):
        self.dt, self.tolerance = dt, tolerance
        super().__init__(
            num_envs,
            max_episode_steps=max_episode_steps,
            device=device,
            render_mode=render_mode,
            single_observation_space=spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32),
            single_action_space=spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32),
        )

    def initial_state(self, n: int, options: dict[str, Any] | None) -> torch.Tensor:
        position = torch.rand(n, generator=self.generator, dtype=torch.float64, device=self.device) * 2 - 1
        return torch.stack((position, torch.zeros_like(position)))

    def advance(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        position, velocity = self.components
        force = actions[:, 0].to(torch.float64).clamp(-1.0, 1.0)
        velocity += force * self.dt
        position += velocity * self.dt
        return -position.abs().to(torch.float32), position.abs() < self.tolerance

    def observe(self, components: torch.Tensor) -> torch.Tensor:
        return components.T.to(torch.float32, memory_format=torch.contiguous_format)


POINT_MASS = NativeTask(TASK, f"{__name__}:PointMassVectorEnv", max_episode_steps=100, default_library="rsl_rl")


@pytest.fixture
def point_mass():
    """The point mass, registered for one test (and taken out of both registries after it)."""
    register(POINT_MASS)
    yield TASK
    NATIVE_TASKS.pop(TASK, None)
    gymnasium.registry.pop(TASK, None)


def test_the_point_mass_is_built_by_make_env_and_keeps_the_step_contract(point_mass):
    env = make_env(point_mass, 3, env_kwargs={"tolerance": 0.1})
    assert isinstance(env, PointMassVectorEnv) and env.tolerance == 0.1 and env.max_episode_steps == 100
    env.close()
    assert env_config(point_mass) == {"max_episode_steps": 100, "dt": 0.1, "tolerance": 0.05}
    check_contract(point_mass)


def test_pushing_towards_zero_reaches_it_and_ends_the_episode(point_mass):
    env = make_env(point_mass, 64)
    obs, _ = env.reset(seed=0)
    reached = torch.zeros(64, dtype=torch.bool)
    for _ in range(60):  # a PD controller: force towards 0, damped
        actions = (-2.0 * obs[:, :1] - 1.5 * obs[:, 1:]).clamp(-1, 1)
        obs, reward, terminated, truncated, info = env.step(actions)
        assert (reward <= 0).all()
        reached |= terminated
        assert (info["final_obs"][terminated, 0].abs() < 0.05).all()
    assert reached.all() and not truncated.any()

    start, _ = env.reset(seed=0)
    obs = start
    for _ in range(100):  # at rest nothing moves: only the envs that start near 0 end, at once
        previous = obs
        obs, _, terminated, truncated, info = env.step(torch.zeros(64, 1))
        torch.testing.assert_close(info["final_obs"], previous, rtol=0, atol=0)
        assert torch.equal(terminated, previous[:, 0].abs() < 0.05)
    assert torch.equal(truncated, start[:, 0].abs() >= 0.05)  # the others reach the time limit
    assert truncated.sum() > 50
    env.close()


def test_the_random_agent_runs_the_point_mass(point_mass, tmp_path):
    result = rlrun.random_agent(
        rlrun.AgentRequest(task=point_mass, num_envs=8, num_episodes=8, seed=3, log_root=str(tmp_path))
    )
    assert result.task == point_mass and result.library == "random"
    assert len(result.returns) >= 8 and len(result.lengths) == len(result.returns)
    assert all(1 <= length <= 100 for length in result.lengths)
    assert all(value <= 0.0 for value in result.returns)  # every reward is -|position|
