"""PendulumVectorEnv against Gymnasium 1.4.0's PendulumEnv, step by step."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from rlrun.envs.pendulum import PendulumVectorEnv, angle_normalize
from rlrun.errors import InvalidArgument

NUM_ENVS = 8
STEPS = 1_000


def make_reference(num_envs: int) -> gymnasium.vector.SyncVectorEnv:
    """Gymnasium's Pendulum-v1 (TimeLimit 200 from the registry), SAME_STEP autoreset."""
    return gymnasium.make_vec(
        "Pendulum-v1",
        num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )


def choose_actions(obs: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """A PD controller (saturating) in the first half of the envs, random torques in [-3, 3] in the rest."""
    cos, sin, thdot = obs.numpy().T.astype(np.float64)
    pd = -(3.0 * np.arctan2(sin, cos) + 0.5 * thdot)
    actions = np.where(np.arange(len(pd)) < len(pd) // 2, pd, rng.uniform(-3.0, 3.0, len(pd)))
    return torch.as_tensor(actions, dtype=torch.float32).unsqueeze(1)


def copy_state(env: PendulumVectorEnv, reference: gymnasium.vector.SyncVectorEnv) -> None:
    """Put the native env's float64 physics state into every reference sub-env."""
    for sub_env, state in zip(reference.envs, env.state.numpy(), strict=True):
        sub_env.unwrapped.state = state.copy()


# Restarting ended envs by indexing (the CPU way) or by torch.where (the accelerator way, no host sync).
RESTARTS = pytest.mark.parametrize("draw_for_ended_only", [True, False], ids=["indexed", "sync-free"])


@RESTARTS
def test_matches_gymnasium_pendulum_for_1000_steps(draw_for_ended_only):
    """Same states and torques give the same observations, rewards and truncations (every 200 steps).

    As for CartPole, the native state is copied into the reference before every step (one-ulp
    differences between torch's and NumPy's sin would otherwise grow), and the float64 states are
    compared after every step.
    """
    env = PendulumVectorEnv(NUM_ENVS)
    env._draw_for_ended_only = draw_for_ended_only
    reference = make_reference(NUM_ENVS)
    obs, _ = env.reset(seed=0)
    reference.reset(seed=0)
    rng = np.random.default_rng(0)
    truncations = []
    for step in range(1, STEPS + 1):
        copy_state(env, reference)
        actions = choose_actions(obs, rng)
        ref_obs, ref_reward, ref_terminated, ref_truncated, ref_info = reference.step(actions.numpy())
        obs, reward, terminated, truncated, info = env.step(actions)

        assert not terminated.any() and not ref_terminated.any()
        np.testing.assert_array_equal(truncated.numpy(), ref_truncated)
        np.testing.assert_allclose(reward.numpy(), ref_reward, rtol=0, atol=1e-5)
        ref_final_obs = ref_obs.copy()
        for i in np.flatnonzero(ref_truncated):
            ref_final_obs[i] = ref_info["final_obs"][i]
        np.testing.assert_array_equal(info["_final_obs"].numpy(), ref_truncated)
        np.testing.assert_allclose(info["final_obs"].numpy(), ref_final_obs, rtol=0, atol=1e-5)
        if not ref_truncated.any():
            np.testing.assert_allclose(obs.numpy(), ref_obs, rtol=0, atol=1e-5)
            ref_state = np.stack([sub_env.unwrapped.state for sub_env in reference.envs])
            np.testing.assert_allclose(env.state.numpy(), ref_state, rtol=0, atol=1e-12)
        if truncated.any():
            assert truncated.all()
            truncations.append(step)
    reference.close()
    env.close()
    assert truncations == [200, 400, 600, 800, 1000]


@RESTARTS
def test_restarted_envs_observe_their_new_state(draw_for_ended_only):
    env = PendulumVectorEnv(4, max_episode_steps=3)
    env._draw_for_ended_only = draw_for_ended_only
    env.reset(seed=0)
    for _ in range(3):
        obs, _, _, truncated, info = env.step(torch.zeros(4, 1))
    assert truncated.all()
    th, thdot = env.state.unbind(1)
    expected = torch.stack((th.cos(), th.sin(), thdot), dim=1).float()
    torch.testing.assert_close(obs, expected, rtol=0, atol=0)
    assert not torch.equal(obs, info["final_obs"])
    assert (th.abs() <= math.pi).all() and (thdot.abs() <= 1.0).all()


def test_torque_is_clipped_to_max_torque():
    results = []
    for torque in (2.0, 5.0):
        env = PendulumVectorEnv(3)
        env.reset(seed=1)
        results.append(env.step(torch.full((3, 1), torque)))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=0, atol=0)  # same dynamics
    torch.testing.assert_close(results[0][1], results[1][1], rtol=0, atol=0)  # same cost


def test_angle_normalize_wraps_like_gymnasium():
    angles = torch.linspace(-20, 20, 1001, dtype=torch.float64)
    expected = ((angles.numpy() + np.pi) % (2 * np.pi)) - np.pi
    np.testing.assert_allclose(angle_normalize(angles).numpy(), expected, rtol=0, atol=1e-12)


def test_spaces_and_reset_options_match_gymnasium():
    reference = gymnasium.make("Pendulum-v1")
    env = PendulumVectorEnv(6)
    assert env.single_observation_space == reference.observation_space
    assert env.single_action_space == reference.action_space
    assert env.action_space.shape == (6, 1)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    reference.close()
    obs, _ = env.reset(seed=0, options={"x_init": 0.1, "y_init": 0.2})
    assert (env.state[:, 0].abs() <= 0.1).all() and (env.state[:, 1].abs() <= 0.2).all()
    assert obs.shape == (6, 3) and obs.dtype == torch.float32


def test_g_changes_the_dynamics():
    light, heavy = PendulumVectorEnv(1, g=2.0), PendulumVectorEnv(1)
    for env in (light, heavy):
        env.reset(seed=0)
        env.state[:] = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
        env.step(torch.zeros(1, 1))
    assert heavy.state[0, 1] == pytest.approx(5 * light.state[0, 1])


@RESTARTS
def test_same_seed_same_actions_give_identical_tensors(draw_for_ended_only):
    def rollout(seed: int) -> list[torch.Tensor]:
        env = PendulumVectorEnv(8, max_episode_steps=50)
        env._draw_for_ended_only = draw_for_ended_only
        actions_rng = torch.Generator().manual_seed(1)
        out = list(env.reset(seed=seed)[:1])
        for _ in range(120):
            torques = torch.rand(8, 1, generator=actions_rng) * 4 - 2
            obs, reward, terminated, truncated, info = env.step(torques)
            out += [obs, reward, terminated, truncated, info["final_obs"]]
        return out

    first, again, other = rollout(7), rollout(7), rollout(8)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


def test_only_rgb_array_rendering_is_offered():
    with pytest.raises(InvalidArgument, match="renders rgb_array images only"):
        PendulumVectorEnv(1, render_mode="human")
    env = PendulumVectorEnv(2, render_mode="rgb_array")
    env.reset(seed=0)
    assert env.render()[1].shape == (500, 500, 3)
    env.close()
