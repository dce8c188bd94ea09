"""GymnasiumTorchVectorEnv: NumPy Gymnasium vector envs behind the torch contract."""

from __future__ import annotations

import multiprocessing

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlrun.envs import make_env
from rlrun.envs.gymnasium_torch import GymnasiumTorchVectorEnv
from rlrun.errors import UnsupportedTask

SAME_STEP = {"autoreset_mode": AutoresetMode.SAME_STEP}


def make_reference(task: str, num_envs: int) -> gymnasium.vector.VectorEnv:
    return gymnasium.make_vec(task, num_envs, vectorization_mode="sync", vector_kwargs=SAME_STEP)


def assert_contract(env, obs, reward, terminated, truncated, info, obs_shape) -> None:
    n = env.num_envs
    assert obs.shape == (n, *obs_shape) and obs.dtype == torch.float32
    assert reward.shape == (n,) and reward.dtype == torch.float32
    assert terminated.shape == truncated.shape == (n,)
    assert terminated.dtype == truncated.dtype == info["_final_obs"].dtype == torch.bool
    assert info["final_obs"].shape == obs.shape and info["final_obs"].dtype == torch.float32
    tensors = (obs, reward, terminated, truncated, info["final_obs"], info["_final_obs"])
    assert {t.device for t in tensors} == {env.device}


def test_cartpole_matches_the_numpy_vector_env_and_stacks_final_obs():
    env = make_env("CartPole-v1", 4)
    reference = make_reference("CartPole-v1", 4)
    assert isinstance(env, GymnasiumTorchVectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, _ = env.reset(seed=0)
    ref_obs, _ = reference.reset(seed=0)
    np.testing.assert_array_equal(obs.numpy(), ref_obs)
    actions_rng = torch.Generator().manual_seed(0)
    ended = 0
    for _ in range(100):
        actions = torch.randint(0, 2, (4,), generator=actions_rng)
        obs, reward, terminated, truncated, info = env.step(actions)
        ref_obs, ref_reward, ref_terminated, ref_truncated, ref_info = reference.step(actions.numpy())
        assert_contract(env, obs, reward, terminated, truncated, info, (4,))
        np.testing.assert_array_equal(obs.numpy(), ref_obs)
        np.testing.assert_array_equal(reward.numpy(), ref_reward)
        np.testing.assert_array_equal(terminated.numpy(), ref_terminated)
        np.testing.assert_array_equal(truncated.numpy(), ref_truncated)
        done = ref_terminated | ref_truncated
        np.testing.assert_array_equal(info["_final_obs"].numpy(), done)
        for i in range(4):  # final_obs: the last observation where an episode ended, obs elsewhere
            expected = ref_info["final_obs"][i] if done[i] else ref_obs[i]
            np.testing.assert_array_equal(info["final_obs"][i].numpy(), expected)
        assert ("final_info" in info) == done.any()  # Gymnasium's other infos pass through
        ended += int(done.sum())
    assert ended > 10
    env.close()
    reference.close()


def test_pendulum_takes_clipped_float32_torques_from_torch_or_numpy():
    env = make_env("Pendulum-v1", 3)
    reference = make_reference("Pendulum-v1", 3)
    env.reset(seed=1)
    reference.reset(seed=1)
    for step in range(210):  # crosses the 200-step truncation
        torques = np.array([[5.0], [-0.5], [-9.0]], dtype=np.float64)
        obs, reward, terminated, truncated, info = env.step(torques if step % 2 else torch.as_tensor(torques))
        ref_obs, ref_reward, _, ref_truncated, _ = reference.step(np.clip(torques, -2, 2).astype(np.float32))
        assert_contract(env, obs, reward, terminated, truncated, info, (3,))
        np.testing.assert_array_equal(obs.numpy(), ref_obs)
        np.testing.assert_array_equal(reward.numpy(), ref_reward.astype(np.float32))
        np.testing.assert_array_equal(truncated.numpy(), ref_truncated)
        assert truncated.all() == (step == 199)
    env.close()
    reference.close()


@pytest.mark.slow
def test_async_runs_in_subprocesses_and_closes_them():
    before = set(multiprocessing.active_children())
    env = make_env("CartPole-v1", 2, vectorization="async")
    assert isinstance(env.unwrapped, gymnasium.vector.AsyncVectorEnv)
    obs, _ = env.reset(seed=0)
    assert len(set(multiprocessing.active_children()) - before) == 2
    for _ in range(100):  # always pushing right topples the pole within a few dozen steps
        obs, reward, terminated, truncated, info = env.step(torch.ones(2, dtype=torch.int64))
        assert_contract(env, obs, reward, terminated, truncated, info, (4,))
        if terminated.any():
            break
    assert terminated.any()
    i = int(terminated.nonzero()[0])
    assert abs(info["final_obs"][i, 2]) > 0.2094  # the pole angle that ended the episode
    assert abs(obs[i]).max() < 0.05  # the first observation of the next one
    env.close()
    assert set(multiprocessing.active_children()) - before == set()


class _TinyEnv(gymnasium.Env):
    """One-step env with configurable spaces and float64 observations."""

    def __init__(self, action_space=None):
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float64)
        self.action_space = action_space if action_space is not None else spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2), {}

    def step(self, action):
        return np.full(2, 0.5), 1.0, True, False, {}


def test_float64_observations_become_float32_and_the_space_says_so():
    env = GymnasiumTorchVectorEnv(SyncVectorEnv([_TinyEnv, _TinyEnv], **SAME_STEP))
    assert env.single_observation_space == spaces.Box(-1.0, 1.0, (2,), np.float32)
    assert env.observation_space.shape == (2, 2) and env.observation_space.dtype == np.float32
    assert env.single_action_space == spaces.Discrete(3)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == torch.float32
    obs, _, terminated, _, info = env.step(torch.tensor([2, 0]))
    assert terminated.all()
    torch.testing.assert_close(info["final_obs"], torch.full((2, 2), 0.5))
    torch.testing.assert_close(obs, torch.zeros(2, 2))
    env.close()


def test_unsupported_action_space_is_rejected_in_one_line():
    space = spaces.MultiDiscrete([2, 3])
    vector_env = SyncVectorEnv([lambda: _TinyEnv(space)], **SAME_STEP)
    with pytest.raises(UnsupportedTask, match=r"action space MultiDiscrete\(\[2 3\]\)") as error:
        GymnasiumTorchVectorEnv(vector_env)
    assert "\n" not in str(error.value)
    vector_env.close()


def test_unsupported_observation_space_is_rejected_by_make_env():
    with pytest.raises(UnsupportedTask, match=r"'Blackjack-v1' has the observation space Tuple") as error:
        make_env("Blackjack-v1", 2)
    assert "\n" not in str(error.value)


def test_next_step_autoreset_is_rejected():
    vector_env = SyncVectorEnv([_TinyEnv], autoreset_mode=AutoresetMode.NEXT_STEP)
    with pytest.raises(ValueError, match="SAME_STEP"):
        GymnasiumTorchVectorEnv(vector_env)
    vector_env.close()


FIRST_ASYNC_CALL = """
import rlrun
result = rlrun.random_agent(
    rlrun.AgentRequest(task="CartPole-v1", num_envs=2, num_episodes=2, vectorization="async"), check_leaks=True
)
print(result.env_steps)
"""


def test_the_first_async_call_of_a_process_leaves_no_shared_memory_file_open():
    """The async env's observations live in a `multiprocessing` heap arena with a /dev/shm file; the env drops
    them on close and the shared-memory guard drops the arena, so the leak detector (on here) finds nothing."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FIRST_ASYNC_CALL], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 0
