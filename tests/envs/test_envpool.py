"""EnvPoolTorchVectorEnv: EnvPool's pool behind the torch contract, its dynamics against Gymnasium's own envs,
rlrun's table of covered ids against both packages, and the pool's native threads gone after `close`."""

from __future__ import annotations

import inspect
import os
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from env_contract import check_contract
from gymnasium.envs.registration import load_env_creator

from rlrun.envs import make_env
from rlrun.envs.envpool import ENVPOOL_TASKS, EnvPoolTorchVectorEnv, check_envpool, envpool_usable
from rlrun.envs.gymnasium_torch import GymnasiumTorchVectorEnv
from rlrun.errors import InvalidArgument, UnsupportedTask

envpool = pytest.importorskip("envpool")

TASKS = list(ENVPOOL_TASKS)

EQUAL_STEPS = 40
"""Steps compared with Gymnasium's env. Both run MuJoCo in float64 from the same model: their observations differ
by about 1e-13 after a step (another MuJoCo build, other rounding), a gap that chaotic dynamics grow by about
10x per 5 steps (HalfCheetah-v5: 5e-9 after 50 steps, O(1) after 200), so the comparison stops at 40 steps."""
ATOL = RTOL = 1e-5
"""float32 observations and rewards of magnitude up to ~10 carry rounding of ~1e-6; the dynamics' own gap over
`EQUAL_STEPS` stays below 1e-8. A wrong model, frame skip, reward weight or reset state is off by far more."""


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path, monkeypatch):
    """Gymnasium's HalfCheetah-v5 model makes MuJoCo warn, and MuJoCo writes its warnings to MUJOCO_LOG.TXT in the
    working directory: here, the test's own folder."""
    monkeypatch.chdir(tmp_path)


def native_threads() -> set[str]:
    return set(os.listdir("/proc/self/task"))


@pytest.mark.parametrize("task", TASKS)
def test_covered_ids_keep_the_step_contract(task):
    check_contract(task, vectorization="envpool")


@pytest.mark.parametrize("task", TASKS)
def test_dynamics_match_gymnasiums_own_env_step_for_step(task):
    """With no reset noise both start in the model's initial state; then the same actions must give the same
    observations, rewards, terminations, truncations and final observations (restarts included)."""
    kwargs = {"reset_noise_scale": 0.0, "max_episode_steps": 25}
    ours = make_env(task, 4, vectorization="envpool", env_kwargs=kwargs)
    theirs = make_env(task, 4, vectorization="sync", env_kwargs=kwargs)
    assert isinstance(ours, EnvPoolTorchVectorEnv) and isinstance(theirs, GymnasiumTorchVectorEnv)
    assert ours.single_observation_space == theirs.single_observation_space
    assert ours.single_action_space == theirs.single_action_space
    close = {"atol": ATOL, "rtol": RTOL}
    torch.testing.assert_close(ours.reset(seed=1)[0], theirs.reset(seed=1)[0], **close)
    generator = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(EQUAL_STEPS):
        actions = torch.rand(ours.action_space.shape, generator=generator) * 2 - 1
        got, want = ours.step(actions), theirs.step(actions)
        for a, b in zip(got[:4], want[:4], strict=True):
            torch.testing.assert_close(a, b, **close)
        torch.testing.assert_close(got[4]["final_obs"], want[4]["final_obs"], **close)
        assert torch.equal(got[4]["_final_obs"], want[4]["_final_obs"])
        ended += int(got[4]["_final_obs"].sum())
    ours.close()
    theirs.close()
    assert ended >= 4  # the time limit (25) restarted every env at least once


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_reset_noise_has_gymnasiums_spread(task):
    """The reset noise streams differ (EnvPool draws from its own generator), so its spread is compared: each
    observation dimension's standard deviation over 256 starts within 25% of Gymnasium's. Each estimate is off by
    about 4.4% at 256 samples, their ratio by about 6%, so 25% is 4 of those; a wrong noise scale is off by 2x or
    more. The seeds are fixed, so the outcome does not vary from run to run."""
    starts = []
    for vectorization in ("envpool", "sync"):
        env = make_env(task, 256, vectorization=vectorization)
        starts.append(env.reset(seed=3)[0].std(dim=0))
        env.close()
    ours, theirs = starts
    noisy = theirs > 1e-6
    assert noisy.any()
    assert torch.equal(ours > 1e-6, noisy)
    ratio = ours[noisy] / theirs[noisy]
    assert ((ratio > 0.75) & (ratio < 1.25)).all(), ratio


@pytest.mark.parametrize("task", TASKS)
def test_the_table_matches_both_packages(task):
    """Every keyword argument rlrun passes to EnvPool exists in both envs with the same default, and the time
    limits agree: the table is data, so this is what keeps it true when either package changes."""
    spec = gymnasium.spec(task)
    creator = load_env_creator(spec.entry_point)
    theirs = {name: p.default for name, p in inspect.signature(creator).parameters.items()} | spec.kwargs
    ours = dict(envpool.make_spec(task).config._asdict())
    assert ours["max_episode_steps"] == spec.max_episode_steps
    for key in ENVPOOL_TASKS[task]:
        assert key in theirs and key in ours, key
        assert theirs[key] == ours[key], key


def test_seeds_are_per_env_and_reproduce():
    env = make_env("Hopper-v5", 3, vectorization="envpool")
    first = env.reset(seed=5)[0]
    again = env.reset(seed=5)[0]
    shifted = env.reset(seed=6)[0]
    unseeded = env.reset()[0]  # the same pool, reset again: new starts
    env.close()
    assert torch.equal(first, again)
    assert torch.equal(shifted[:2], first[1:])  # env i is seeded seed + i
    assert not torch.equal(unseeded, shifted)


def test_kwargs_are_passed_to_envpool():
    env = make_env("HalfCheetah-v5", 2, vectorization="envpool", env_kwargs={"frame_skip": 1, "max_episode_steps": 3})
    env.reset(seed=0)
    steps = [env.step(torch.zeros(2, 6))[3] for _ in range(3)]
    assert [bool(truncated.all()) for truncated in steps] == [False, False, True]
    env.close()
    assert env._pool is None


def test_defaults_of_keys_envpool_lacks_are_accepted_and_other_values_refused():
    defaults = {"xml_file": "half_cheetah.xml", "default_camera_config": {"distance": 4.0}}
    assert envpool_usable("HalfCheetah-v5", defaults)
    with pytest.raises(InvalidArgument, match=r"does not take env.xml_file='mine.xml'.*env.frame_skip"):
        check_envpool("HalfCheetah-v5", {"xml_file": "mine.xml"})
    assert not envpool_usable("HalfCheetah-v5", {"xml_file": "mine.xml"})


def test_uncovered_ids_are_refused_naming_the_nearest_covered_id():
    with pytest.raises(UnsupportedTask, match=r"'Hopper-v4'.*Did you mean 'Hopper-v5'.*HalfCheetah-v5") as error:
        make_env("Hopper-v4", 2, vectorization="envpool")
    assert "\n" not in str(error.value)
    assert isinstance(make_env("Hopper-v4", 2, vectorization="auto"), GymnasiumTorchVectorEnv)


def test_auto_picks_envpool_for_a_covered_id_and_sync_when_rendering():
    env = make_env("Hopper-v5", 2, vectorization="auto")
    assert isinstance(env, EnvPoolTorchVectorEnv)
    env.close()
    env = make_env("Hopper-v5", 2, vectorization="auto", render_mode="rgb_array")
    assert isinstance(env, GymnasiumTorchVectorEnv)
    env.close()


def test_close_stops_the_pools_native_threads():
    """EnvPool's `close()` alone leaves its worker threads running; they stop when the pool is destroyed, which
    `EnvPoolTorchVectorEnv.close` makes happen by dropping its only reference."""
    before = native_threads()
    pool = envpool.make_gymnasium("Hopper-v5", num_envs=4, seed=0, num_threads=2)
    pool.close()
    assert len(native_threads() - before) >= 2  # the fact the wrapper works around
    del pool
    assert native_threads() == before

    env = make_env("Hopper-v5", 4, vectorization="envpool")
    env.reset(seed=0)
    env.reset(seed=1)  # a new pool: the old one's threads go
    assert len(native_threads() - before) >= 1
    env.step(np.zeros((4, 3), dtype=np.float32))
    env.close()
    assert native_threads() == before


def test_rows_come_back_in_env_order_whatever_order_envpool_returns():
    from rlrun.envs.envpool import _by_env_id

    obs, reward = np.array([[2.0], [0.0], [1.0]]), np.array([20.0, 0.0, 10.0])
    ordered_obs, ordered_reward = _by_env_id(np.array([2, 0, 1]), obs, reward)
    assert ordered_obs.tolist() == [[0.0], [1.0], [2.0]] and ordered_reward.tolist() == [0.0, 10.0, 20.0]
    assert _by_env_id(np.arange(3), obs)[0] is obs


def test_actions_of_any_array_type_are_clipped_to_the_box_and_not_kept():
    def first_step(actions) -> torch.Tensor:  # observations and rewards (the control cost sees the clipped actions)
        env = make_env("Hopper-v5", 2, vectorization="envpool")
        try:
            env.reset(seed=3)
            obs, reward, *_ = env.step(actions)
            return torch.cat([obs, reward[:, None]], dim=1)
        finally:
            env.close()

    at_bounds = first_step(torch.tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 0.5]]))
    beyond = torch.tensor([[7.0, -3.0, 2.0], [-9.0, 1.5, 0.5]])
    assert torch.equal(first_step(beyond), at_bounds)
    assert torch.equal(first_step(beyond.numpy()), at_bounds)
    assert torch.equal(first_step(beyond.tolist()), at_bounds)
    assert torch.equal(first_step(beyond.double()), at_bounds)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a read-only array (a broadcast) is taken without a warning
        assert torch.equal(
            first_step(np.broadcast_to(beyond.numpy()[:1], (2, 3))), first_step(torch.tensor([[1.0, -1.0, 1.0]] * 2))
        )
    assert beyond[0, 0] == 7.0  # the caller's actions are left as they were
