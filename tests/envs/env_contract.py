"""The step contract every task `make_env` returns must keep, as checks that tests run over tasks.

Gymnasium's `VectorEnv` API in SAME_STEP autoreset mode with torch tensors `[num_envs, ...]` on the
env's device: terminated and truncated apart, the last observation of every env in
`info["final_obs"]` and the mask of the envs that ended in `info["_final_obs"]`, the time limit of
`max_episode_steps`, seeding that reproduces, and no use of the global RNGs.
"""

from __future__ import annotations

import random

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from rlrun.envs import make_env
from rlrun.envs.contract import is_image


def random_actions(env, generator: torch.Generator) -> torch.Tensor:
    """Uniform actions in `env`'s action space (Box: within 1.5x its bounds, so clipping is exercised)."""
    space = env.single_action_space
    if isinstance(space, gymnasium.spaces.Discrete):
        return torch.randint(int(space.start), int(space.start + space.n), (env.num_envs,), generator=generator)
    high = torch.as_tensor(space.high, dtype=torch.float32)
    low = torch.as_tensor(space.low, dtype=torch.float32)
    u = torch.rand(env.num_envs, *space.shape, generator=generator)
    return (low + (high - low) * u) * 1.5 - (high + low) * 0.25


def global_rng_states() -> tuple:
    """The states of the global RNGs of random, numpy and torch, comparable with ==."""
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    return random.getstate(), (kind, key.tobytes(), pos, has_gauss, gauss), torch.get_rng_state().numpy().tobytes()


def rollout(
    task: str,
    num_envs: int,
    steps: int,
    seed: int,
    max_episode_steps: int,
    numpy_actions: bool = False,
    vectorization: str = "sync",
):
    """Reset with `seed`, step with seeded random actions; return every tensor the env returned."""
    env = make_env(task, num_envs, vectorization=vectorization, env_kwargs={"max_episode_steps": max_episode_steps})
    generator = torch.Generator().manual_seed(1)
    out = list(env.reset(seed=seed)[:1])
    for _ in range(steps):
        actions = random_actions(env, generator)
        obs, reward, terminated, truncated, info = env.step(actions.numpy() if numpy_actions else actions)
        out += [obs, reward, terminated, truncated, info["final_obs"], info["_final_obs"]]
    env.close()
    return out


def in_bounds(obs: torch.Tensor, space: gymnasium.spaces.Box) -> bool:
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
    return bool(((obs >= low) & (obs <= high)).all())


def check_contract(
    task: str,
    num_envs: int = 16,
    max_episode_steps: int = 6,
    steps: int = 30,
    vectorization: str = "sync",
    *,
    seed_moves_reset: bool = True,
) -> None:
    """Build `task` with `make_env`, step it with random actions and check every clause of the contract.
    `seed_moves_reset=False` for tasks whose first observation is the same from every seed (an Atari game's
    start screen: its randomness is in the no-ops and sticky actions that follow)."""
    rngs = global_rng_states()
    env = make_env(task, num_envs, vectorization=vectorization, env_kwargs={"max_episode_steps": max_episode_steps})
    assert isinstance(env, gymnasium.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.num_envs == num_envs and env.device == torch.device("cpu")
    obs_space = env.single_observation_space
    dtype = torch.uint8 if is_image(obs_space) else torch.float32  # images stay uint8
    assert isinstance(obs_space, gymnasium.spaces.Box)
    assert obs_space.dtype == (np.uint8 if dtype == torch.uint8 else np.float32)
    assert isinstance(env.single_action_space, (gymnasium.spaces.Box, gymnasium.spaces.Discrete))
    assert env.observation_space.shape == (num_envs, *obs_space.shape)
    assert env.action_space.shape == (num_envs, *env.single_action_space.shape)

    obs, info = env.reset(seed=0)
    assert isinstance(info, dict)
    assert obs.shape == (num_envs, *obs_space.shape) and obs.dtype == dtype
    assert obs.is_contiguous() and in_bounds(obs, obs_space)

    generator = torch.Generator().manual_seed(0)
    lengths = torch.zeros(num_envs, dtype=torch.int64)
    ended_episodes = truncations = 0
    for _ in range(steps):
        previous = obs
        obs, reward, terminated, truncated, info = env.step(random_actions(env, generator))
        lengths += 1
        assert obs.shape == previous.shape and obs.dtype == dtype and obs.is_contiguous()
        assert reward.shape == (num_envs,) and reward.dtype == torch.float32
        assert terminated.shape == truncated.shape == (num_envs,)
        assert terminated.dtype == truncated.dtype == torch.bool
        final_obs, ended = info["final_obs"], info["_final_obs"]
        assert final_obs.shape == obs.shape and final_obs.dtype == dtype
        assert final_obs.data_ptr() != obs.data_ptr()
        assert torch.equal(ended, terminated | truncated)
        assert {t.device for t in (obs, reward, terminated, truncated, final_obs, ended)} == {env.device}
        # Envs that go on observe where they are; ended ones start again and observe their new start.
        torch.testing.assert_close(obs[~ended], final_obs[~ended], rtol=0, atol=0)
        assert not torch.equal(obs[ended], final_obs[ended]) or not ended.any()
        assert in_bounds(obs, obs_space) and torch.isfinite(reward).all()
        # The time limit: truncated exactly when an episode reaches max_episode_steps.
        assert torch.equal(truncated, lengths == max_episode_steps)
        assert (lengths <= max_episode_steps).all()
        ended_episodes += int(ended.sum())
        truncations += int(truncated.sum())
        lengths[ended] = 0
    env.close()
    assert ended_episodes >= num_envs and truncations > 0  # `steps` is several time limits
    assert global_rng_states() == rngs

    # Seeding reproduces, bit for bit; another seed starts elsewhere; NumPy actions act as tensors do.
    first = rollout(task, 4, 12, seed=7, max_episode_steps=max_episode_steps, vectorization=vectorization)
    again = rollout(
        task, 4, 12, seed=7, max_episode_steps=max_episode_steps, numpy_actions=True, vectorization=vectorization
    )
    other = rollout(task, 4, 12, seed=8, max_episode_steps=max_episode_steps, vectorization=vectorization)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0]) or not seed_moves_reset
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))
