"""BatchedVectorEnv: the plumbing every native task shares, checked on a walk whose every step is known."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from rlrun.envs.batched import BatchedVectorEnv, any_beyond, beyond
from rlrun.errors import InvalidArgument


class Walk(BatchedVectorEnv):
    """x starts uniform in [0, 1) and moves by the action each step; the episode ends once x > 3.

    Reward x after the step; observation x (float32)."""

    state_size = 1

    def __init__(self, num_envs: int, max_episode_steps: int = 100, device: str = "cpu", render_mode=None):
        box = spaces.Box(-10.0, 10.0, shape=(1,), dtype=np.float32)
        super().__init__(
            num_envs,
            max_episode_steps=max_episode_steps,
            device=device,
            render_mode=render_mode,
            single_observation_space=box,
            single_action_space=spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32),
        )

    def initial_state(self, n: int, options: dict[str, Any] | None) -> torch.Tensor:
        return torch.rand(1, n, generator=self.generator, dtype=torch.float64, device=self.device)

    def advance(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.components[0] += actions[:, 0]
        return self.components[0].to(torch.float32), self.components[0] > 3

    def observe(self, components: torch.Tensor) -> torch.Tensor:
        return components.T.to(torch.float32, memory_format=torch.contiguous_format)


# Restarting ended envs by indexing (the CPU way) or by torch.where (the accelerator way, no host sync).
RESTARTS = pytest.mark.parametrize("draw_for_ended_only", [True, False], ids=["indexed", "sync-free"])


def walk(num_envs: int, draw_for_ended_only: bool, **kwargs: Any) -> Walk:
    env = Walk(num_envs, **kwargs)
    env._draw_for_ended_only = draw_for_ended_only
    return env


@RESTARTS
def test_ended_envs_restart_in_the_same_step_and_report_their_final_observation(draw_for_ended_only):
    env = walk(4, draw_for_ended_only)
    start, _ = env.reset(seed=0)
    assert ((start >= 0) & (start < 1)).all()
    forward = torch.tensor([[1.0], [1.0], [0.0], [0.0]])
    for _ in range(2):
        obs, reward, terminated, truncated, info = env.step(forward)
    torch.testing.assert_close(obs, start + forward * 2, rtol=0, atol=1e-6)
    obs, reward, terminated, truncated, info = env.step(forward)  # envs 0 and 1 pass x = 3
    assert terminated.tolist() == [True, True, False, False] and not truncated.any()
    assert info["_final_obs"].tolist() == [True, True, False, False]
    torch.testing.assert_close(info["final_obs"], start + forward * 3, rtol=0, atol=1e-6)
    torch.testing.assert_close(reward, info["final_obs"][:, 0], rtol=0, atol=0)  # the step's reward
    assert ((obs[:2] >= 0) & (obs[:2] < 1)).all()  # a new start...
    torch.testing.assert_close(obs[:2], env.state[:2].float(), rtol=0, atol=0)  # ...which is the state
    torch.testing.assert_close(obs[2:], start[2:], rtol=0, atol=0)
    assert env.steps.tolist() == [0, 0, 3, 3]


def test_ended_envs_and_their_lengths_are_those_of_the_last_step_on_the_cpu():
    env = walk(4, True, max_episode_steps=3)
    env.reset(seed=0)
    assert env.ended_envs.tolist() == [] and env.ended_lengths.tolist() == []
    forward = torch.tensor([[1.5], [0.0], [1.5], [0.0]])
    seen, lengths = [], []
    for _ in range(3):
        _, _, terminated, truncated, _ = env.step(forward)
        seen.append(env.ended_envs.tolist())
        lengths.append(env.ended_lengths.tolist())
        assert seen[-1] == torch.nonzero(terminated | truncated)[:, 0].tolist()
    assert seen == [[], [0, 2], [1, 3]]  # envs 0 and 2 pass x = 3 on the 2nd step; 1 and 3 reach the limit
    assert lengths == [[], [2, 2], [3, 3]]
    env.steps[1] = 2  # the counters are the env's (written in place, they are what the time limit counts)
    env.step(torch.zeros(4, 1))
    assert env.ended_envs.tolist() == [1] and env.ended_lengths.tolist() == [3]
    for member in ("ended_envs", "ended_lengths"):
        with pytest.raises(AttributeError, match="CPU only"):
            getattr(walk(2, False), member)


@RESTARTS
def test_the_time_limit_truncates_and_may_coincide_with_termination(draw_for_ended_only):
    env = walk(3, draw_for_ended_only, max_episode_steps=3)
    env.reset(seed=1)
    actions = torch.tensor([[1.0], [0.0], [0.5]])
    ends = [env.step(actions)[2:4] for _ in range(7)]
    terminated = torch.stack([t for t, _ in ends]).T.tolist()
    truncated = torch.stack([t for _, t in ends]).T.tolist()
    assert truncated == [[False, False, True] * 2 + [False]] * 3
    assert terminated[0] == [False, False, True] * 2 + [False]  # x passes 3 on the 3rd step: both at once
    assert terminated[1] == terminated[2] == [False] * 7


@RESTARTS
def test_seeded_resets_and_restarts_reproduce_and_leave_the_global_rng_alone(draw_for_ended_only):
    def run(seed: int) -> list[torch.Tensor]:
        env = walk(5, draw_for_ended_only, max_episode_steps=2)
        out = [env.reset(seed=seed)[0]]
        for _ in range(6):
            out.append(env.step(torch.ones(5, 1))[0])
        return out

    torch_state = torch.get_rng_state()
    first, again, other = run(3), run(3), run(4)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])
    assert not torch.equal(first[2], first[4])  # restarts draw new states


def test_state_is_a_writable_view_of_the_component_rows():
    env = Walk(3)
    env.reset(seed=0)
    components = env.components
    env.state[1, 0] = 2.5  # in place, through the view
    assert env.components[0, 1] == 2.5
    env.state = torch.tensor([[0.25], [0.5], [0.75]], dtype=torch.float64)  # assignment copies
    assert env.components is components and env.components[0].tolist() == [0.25, 0.5, 0.75]
    env.step(torch.zeros(3, 1))
    env.reset(seed=1)
    assert env.components is components  # never rebound: tasks keep views of its rows


def test_actions_may_be_numpy_arrays_or_flat():
    results = []
    for actions in (torch.full((2, 1), 0.5), np.full((2, 1), 0.5, dtype=np.float32), torch.full((2,), 0.5)):
        env = Walk(2)
        env.reset(seed=0)
        results.append(env.step(actions)[0])
    assert all(torch.equal(results[0], other) for other in results[1:])


def test_spaces_are_batched_and_the_autoreset_mode_is_same_step():
    env = Walk(6)
    assert env.observation_space.shape == (6, 1) and env.action_space.shape == (6, 1)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.device == torch.device("cpu")

    class NextStep(Walk):
        metadata = {**Walk.metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}

    with pytest.raises(TypeError, match="SAME_STEP"):
        NextStep(1)


def test_render_modes_are_checked_against_the_metadata():
    with pytest.raises(InvalidArgument, match="Walk cannot render, not 'rgb_array'"):
        Walk(1, render_mode="rgb_array")

    class Drawn(Walk):
        metadata = {**Walk.metadata, "render_modes": ["rgb_array"]}

        def draw(self, index: int) -> np.ndarray:
            return np.full((2, 2, 3), index, dtype=np.uint8)

    with pytest.raises(InvalidArgument, match="Drawn renders rgb_array images only, not 'human'"):
        Drawn(1, render_mode="human")
    env = Drawn(3, render_mode="rgb_array")
    frames = env.render()
    assert len(frames) == 3 and frames[2][0, 0, 0] == 2
    assert Drawn(1).render() is None


@pytest.mark.parametrize("member", ["state_size", "initial_state", "advance", "observe"])
def test_a_task_missing_a_member_fails_when_it_is_built(member):
    incomplete = type("Incomplete", (Walk,), {member: BatchedVectorEnv.__dict__[member]})
    with pytest.raises(TypeError, match=f"abstract.*{member}"):
        incomplete(1)


def test_the_helpers_agree_with_the_torch_ops_they_replace_on_the_cpu():
    edges = [-np.inf, -2.4, -2.4000000000000004, -0.0, 0.0, 2.4, 2.4000000000000004, np.inf, np.nan]
    values = torch.cat([torch.tensor(edges, dtype=torch.float64), torch.randn(1000, dtype=torch.float64) * 3])
    rows = torch.stack([values, values.roll(1) / 10])[:, ::2]  # [2, n], strided like cart-pole's positions
    gymnasium_test = (rows[0] < -2.4) | (rows[0] > 2.4) | (rows[1] < -0.2) | (rows[1] > 0.2)
    assert torch.equal(beyond(rows, (2.4, 0.2)), gymnasium_test)
    assert torch.equal(any_beyond(rows, (2.4, 0.2)), gymnasium_test)  # the torch way (accelerators)
