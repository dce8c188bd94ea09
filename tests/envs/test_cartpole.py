"""CartPoleVectorEnv against Gymnasium 1.4.0's CartPoleEnv, step by step."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from rlrun.envs.cartpole import CartPoleVectorEnv
from rlrun.errors import InvalidArgument

NUM_ENVS = 8
STEPS = 1_000


def make_reference(num_envs: int) -> gymnasium.vector.SyncVectorEnv:
    """Gymnasium's CartPole-v1 (TimeLimit 500 from the registry), SAME_STEP autoreset."""
    return gymnasium.make_vec(
        "CartPole-v1",
        num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )


def choose_actions(obs: torch.Tensor, rng: np.random.Generator, continuous: bool) -> torch.Tensor:
    """Envs 0, 1 (mod 4) balance the pole over the cart until the time limit; env 2 balances it at a
    small lean, so the cart runs off the track; env 3 acts randomly, so the pole falls."""
    x, x_dot, theta, theta_dot = obs.numpy().T.astype(np.float64)
    group = np.arange(len(x)) % 4
    centered = theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot
    leaning = theta + 0.5 * theta_dot - 0.05
    lean = np.where(group == 2, leaning, centered)
    if continuous:  # random actions reach beyond [-1, 1] to exercise the clipping
        actions = np.where(group < 3, np.clip(10.0 * lean, -1.0, 1.0), rng.uniform(-1.5, 1.5, len(x)))
        return torch.as_tensor(actions, dtype=torch.float32).unsqueeze(1)
    return torch.as_tensor(np.where(group < 3, lean > 0, rng.integers(0, 2, len(x))), dtype=torch.int64)


def reference_actions(reference: gymnasium.vector.SyncVectorEnv, actions: torch.Tensor, continuous: bool):
    """Discrete: the same actions. Continuous: Gymnasium's own CartPoleEnv.step, driven with force
    clip(a, -1, 1) * 10 by setting each sub-env's `force_mag` to |force| and pushing in its direction."""
    if not continuous:
        return actions.numpy()
    force = np.clip(actions.numpy()[:, 0].astype(np.float64), -1.0, 1.0) * 10.0
    for sub_env, f in zip(reference.envs, force, strict=True):
        sub_env.unwrapped.force_mag = abs(f)
    return (force >= 0).astype(np.int64)


def copy_state(env, reference: gymnasium.vector.SyncVectorEnv) -> None:
    """Put the native env's float64 physics state into every reference sub-env."""
    for sub_env, state in zip(reference.envs, env.state.numpy(), strict=True):
        sub_env.unwrapped.state = state.copy()


def assert_same_step(env, reference, native: tuple, expected: tuple) -> None:
    """Compare one SAME_STEP transition of the native env with the reference's."""
    obs, reward, terminated, truncated, info = native
    ref_obs, ref_reward, ref_terminated, ref_truncated, ref_info = expected
    np.testing.assert_array_equal(terminated.numpy(), ref_terminated)
    np.testing.assert_array_equal(truncated.numpy(), ref_truncated)
    np.testing.assert_allclose(reward.numpy(), ref_reward, rtol=0, atol=1e-5)

    ended = ref_terminated | ref_truncated
    ref_final_obs = ref_obs.copy()
    for i in np.flatnonzero(ended):
        ref_final_obs[i] = ref_info["final_obs"][i]
    np.testing.assert_array_equal(info["_final_obs"].numpy(), ended)
    np.testing.assert_allclose(info["final_obs"].numpy(), ref_final_obs, rtol=0, atol=1e-5)

    # Continuing envs: same observation and same float64 state. Restarted envs: the obs is the new state.
    np.testing.assert_allclose(obs.numpy()[~ended], ref_obs[~ended], rtol=0, atol=1e-5)
    ref_state = np.stack([sub_env.unwrapped.state for sub_env in reference.envs])
    np.testing.assert_allclose(env.state.numpy()[~ended], ref_state[~ended], rtol=0, atol=1e-12)
    torch.testing.assert_close(obs[ended], env.state[ended].float(), rtol=0, atol=0)


# Restarting ended envs by indexing (the CPU way) or by torch.where (the accelerator way, no host sync).
RESTARTS = pytest.mark.parametrize("draw_for_ended_only", [True, False], ids=["indexed", "sync-free"])
# The eager step and the compiled one (rlrun.envs.kernels): both are held to Gymnasium.
KERNELS = pytest.mark.parametrize("kernel", ["eager", "compiled"])


@KERNELS
@RESTARTS
@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_matches_gymnasium_cartpole_for_1000_steps(continuous, draw_for_ended_only, kernel):
    """Same states and actions give the same observations, rewards, terminations and truncations.

    Before every step the native state is copied into the reference: torch's sin/cos differ from
    NumPy's by one ulp on a few inputs, and the unstable open-loop dynamics would grow that to more
    than 1e-5 within a 500-step episode. The float64 states are compared after every step (1e-12), so
    the copy only removes rounding, never a wrong transition.
    """
    env = CartPoleVectorEnv(NUM_ENVS, continuous=continuous, kernel=kernel)
    assert env.kernel == kernel
    env._draw_for_ended_only = draw_for_ended_only
    reference = make_reference(NUM_ENVS)
    obs, _ = env.reset(seed=0)
    reference.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = {"pole fell": 0, "cart left the track": 0, "time limit": 0}
    for _ in range(STEPS):
        copy_state(env, reference)
        actions = choose_actions(obs, rng, continuous)
        expected = reference.step(reference_actions(reference, actions, continuous))
        native = env.step(actions)
        assert_same_step(env, reference, native, expected)
        obs, _, terminated, truncated, info = native
        off_track = info["final_obs"][:, 0].abs() > 2.4
        ends["pole fell"] += int((terminated & ~off_track).sum())
        ends["cart left the track"] += int((terminated & off_track).sum())
        ends["time limit"] += int(truncated.sum())
    reference.close()
    env.close()
    # Random envs fall within a few dozen steps, leaning ones leave the track, balanced ones reach
    # the 500-step limit twice.
    assert ends["pole fell"] > 50
    assert ends["cart left the track"] > 5
    assert ends["time limit"] == 2 * (NUM_ENVS // 2)


def test_terminated_and_truncated_can_both_be_true():
    """As with Gymnasium's TimeLimit: an episode that ends on its last allowed step is both."""
    env = CartPoleVectorEnv(2, max_episode_steps=500)
    env.reset(seed=0)
    env.state[:, 2] = 0.2094  # pole just inside the 12 degree limit, falling
    env.state[:, 3] = 1.0
    env.steps[:] = torch.tensor([499, 10])
    reference = gymnasium.make("CartPole-v1")
    reference.reset(seed=0)
    reference.unwrapped.state = env.state[0].numpy().copy()
    reference._elapsed_steps = 499  # TimeLimit's step counter
    _, _, ref_terminated, ref_truncated, _ = reference.step(1)
    assert (ref_terminated, ref_truncated) == (True, True)
    reference.close()

    _, reward, terminated, truncated, info = env.step(torch.tensor([1, 1]))
    assert terminated.tolist() == [True, True]
    assert truncated.tolist() == [True, False]
    assert reward.tolist() == [1.0, 1.0]  # the terminating step is rewarded, as in Gymnasium
    assert info["_final_obs"].tolist() == [True, True]
    assert (info["final_obs"][:, 2] > 0.2094).all()
    assert env.steps.tolist() == [0, 0]


def test_reset_draws_states_in_bounds_and_accepts_gymnasium_options():
    env = CartPoleVectorEnv(1000)
    obs, info = env.reset(seed=3)
    assert info == {}
    assert obs.abs().max() < 0.05
    torch.testing.assert_close(obs, env.state.float(), rtol=0, atol=0)
    obs, _ = env.reset(options={"low": -0.2, "high": 0.2})
    assert 0.05 < obs.abs().max() < 0.2


def test_spaces_match_gymnasium():
    reference = gymnasium.make("CartPole-v1")
    discrete = CartPoleVectorEnv(3)
    continuous = CartPoleVectorEnv(3, continuous=True)
    assert discrete.single_observation_space == reference.observation_space
    assert continuous.single_observation_space == reference.observation_space
    assert discrete.single_action_space == reference.action_space
    assert continuous.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert discrete.observation_space.shape == (3, 4)
    assert continuous.action_space.shape == (3, 1)
    assert discrete.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    reference.close()


@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_step_returns_tensors_of_the_contract(continuous):
    env = CartPoleVectorEnv(5, continuous=continuous)
    obs, _ = env.reset(seed=0)
    actions = torch.zeros((5, 1) if continuous else (5,), dtype=torch.float32 if continuous else torch.int64)
    obs, reward, terminated, truncated, info = env.step(actions)
    assert obs.shape == (5, 4) and obs.dtype == torch.float32
    assert reward.shape == (5,) and reward.dtype == torch.float32
    assert terminated.dtype == truncated.dtype == info["_final_obs"].dtype == torch.bool
    assert info["final_obs"].shape == (5, 4) and info["final_obs"].dtype == torch.float32
    assert {t.device for t in (obs, reward, terminated, truncated, *info.values())} == {env.device}


def test_discrete_actions_may_be_numpy_or_a_column():
    results = []
    for actions in (torch.tensor([0, 1, 1]), np.array([0, 1, 1]), torch.tensor([[0], [1], [1]])):
        env = CartPoleVectorEnv(3)
        env.reset(seed=0)
        results.append(env.step(actions)[0])
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)
    torch.testing.assert_close(results[0], results[2], rtol=0, atol=0)


def test_force_mag_scales_the_push():
    weak, strong = CartPoleVectorEnv(1, force_mag=5.0), CartPoleVectorEnv(1, force_mag=20.0)
    for env in (weak, strong):
        env.reset(seed=0)
        env.state.zero_()
        env.step(torch.tensor([1]))
    assert strong.state[0, 1] == pytest.approx(4 * weak.state[0, 1])


@KERNELS
@RESTARTS
@pytest.mark.parametrize("continuous", [False, True], ids=["discrete", "continuous"])
def test_same_seed_same_actions_give_identical_tensors(continuous, draw_for_ended_only, kernel):
    def rollout(seed: int) -> list[torch.Tensor]:
        env = CartPoleVectorEnv(16, continuous=continuous, kernel=kernel)
        env._draw_for_ended_only = draw_for_ended_only
        actions_rng = torch.Generator().manual_seed(1)
        out = list(env.reset(seed=seed)[:1])
        for _ in range(200):  # random actions: many episodes end and restart
            if continuous:
                actions = torch.rand(16, 1, generator=actions_rng) * 2 - 1
            else:
                actions = torch.randint(0, 2, (16,), generator=actions_rng)
            obs, reward, terminated, truncated, info = env.step(actions)
            out += [obs, reward, terminated, truncated, info["final_obs"]]
        return out

    first, again, other = rollout(7), rollout(7), rollout(8)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


def test_only_rgb_array_rendering_is_offered():
    with pytest.raises(InvalidArgument, match="renders rgb_array images only"):
        CartPoleVectorEnv(1, render_mode="human")
    env = CartPoleVectorEnv(3, render_mode="rgb_array")
    env.reset(seed=0)
    frames = env.render()
    assert len(frames) == 3 and frames[2].shape == (400, 600, 3)
    assert CartPoleVectorEnv(1).render() is None
    env.close()


@KERNELS
def test_constants_changed_after_construction_take_effect_like_in_gymnasium(kernel):
    """The step reads the physical constants from the attributes, as Gymnasium's does, even when set later."""
    env = CartPoleVectorEnv(2, kernel=kernel)
    env.reset(seed=0)
    env.step(torch.tensor([0, 0]))  # with the constructor's constants
    reference = gymnasium.make("CartPole-v1").unwrapped
    reference.reset(seed=0)
    for target in (env, reference):
        target.gravity, target.force_mag, target.tau = 3.0, 4.0, 0.05
    for _ in range(3):
        reference.state = env.state[0].numpy().copy()
        env.step(torch.tensor([1, 1]))
        reference.step(1)
        np.testing.assert_allclose(env.state[0].numpy(), reference.state, rtol=0, atol=1e-12)
    for target in (env, reference):  # the thresholds too
        target.x_threshold = 1e-3
    reference.state = env.state[0].numpy().copy()
    assert bool(env.step(torch.tensor([1, 1]))[2][0]) and reference.step(1)[2]
    reference.close()


def test_discrete_actions_outside_the_space_raise():
    env = CartPoleVectorEnv(2)
    env.reset(seed=0)
    with pytest.raises(IndexError):
        env.step(torch.tensor([0, 2]))
