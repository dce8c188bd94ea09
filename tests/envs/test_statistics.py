"""EpisodeStatistics: returns and lengths of finished episodes of a torch vector env."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from hypothesis import given
from hypothesis import strategies as st

from rlrun.envs import EpisodeStatistics, make_env
from rlrun.envs.batched import BatchedVectorEnv
from rlrun.envs.statistics import _Log


class ScriptedEnv(VectorEnv):
    """Plays back given rewards, terminations and truncations, one row per step."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, rewards, terminated, truncated):
        self.rewards = torch.tensor(rewards, dtype=torch.float32)
        self.terminated = torch.tensor(terminated, dtype=torch.bool)
        self.truncated = torch.tensor(truncated, dtype=torch.bool)
        self.num_envs = self.rewards.shape[1]
        self.device = torch.device("cpu")
        self.single_observation_space = spaces.Box(-1.0, 1.0, (1,))
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        return torch.zeros(self.num_envs, 1), {}

    def step(self, actions):
        t, self.t = self.t, self.t + 1
        obs = torch.zeros(self.num_envs, 1)
        done = self.terminated[t] | self.truncated[t]
        info = {"final_obs": obs.clone(), "_final_obs": done}
        return obs, self.rewards[t], self.terminated[t], self.truncated[t], info


class PythonCount:
    """Every finished episode's return and length, counted env by env in Python: what the wrapper must report."""

    def __init__(self, num_envs: int) -> None:
        self.running_returns, self.running_lengths = [0.0] * num_envs, [0] * num_envs
        self.returns: list[float] = []
        self.lengths: list[int] = []

    def add(self, reward, terminated, truncated) -> None:
        for i in range(len(self.running_returns)):
            self.running_returns[i] += float(reward[i])
            self.running_lengths[i] += 1
            if terminated[i] or truncated[i]:
                self.returns.append(self.running_returns[i])
                self.lengths.append(self.running_lengths[i])
                self.running_returns[i], self.running_lengths[i] = 0.0, 0


def test_records_finished_episodes_in_env_index_order():
    env = EpisodeStatistics(
        ScriptedEnv(
            rewards=[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]],
            terminated=[[0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0]],
            truncated=[[0, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]],
        )
    )
    env.reset(seed=0)
    assert env.mean_return() is None
    ended_per_step = []
    for _ in range(4):
        before = len(env.episode_returns)
        env.step(torch.zeros(3, dtype=torch.int64))
        ended_per_step.append(len(env.episode_returns) - before)
    assert ended_per_step == [1, 1, 2, 0]
    assert env.episode_returns == [3.0, 4.0, 3.0, 6.0]  # env 2, env 1, then env 0 before env 2
    assert env.episode_lengths == [1, 2, 3, 2]
    assert env.env_steps == 12
    assert env.mean_return() == 4.0
    assert env.mean_return(last=2) == 4.5


def test_matches_a_per_env_python_count_on_cartpole():
    env = EpisodeStatistics(make_env("rlrun/CartPole-v1", 16))
    env.reset(seed=0)
    expected = PythonCount(16)
    actions_rng = torch.Generator().manual_seed(0)
    for _ in range(300):
        expected.add(*env.step(torch.randint(0, 2, (16,), generator=actions_rng))[1:4])
    assert len(expected.returns) > 50
    assert env.episode_returns == expected.returns
    assert env.episode_lengths == expected.lengths
    assert env.env_steps == 300 * 16
    assert env.device == torch.device("cpu")
    assert env.num_envs == 16


class SteppedItsOwnWay(BatchedVectorEnv):
    """A native task that overrides `step` (and so may not keep `ended_envs`): the wrapper must search itself."""

    def __init__(self, inner):
        self.inner = inner
        self.num_envs, self.device = inner.num_envs, inner.device
        self.observation_space, self.action_space = inner.observation_space, inner.action_space
        self.single_observation_space, self.single_action_space = (
            inner.single_observation_space,
            inner.single_action_space,
        )

    state_size = initial_state = advance = observe = None

    def reset(self, *, seed=None, options=None):
        return self.inner.reset(seed=seed, options=options)

    def step(self, actions):
        return self.inner.step(actions)


@pytest.mark.parametrize("reads", [1, 7], ids=["read-once", "read-while-stepping"])
@pytest.mark.parametrize("own_step", [False, True], ids=["ended_envs", "searched"])
def test_long_runs_match_a_per_env_python_count_however_often_they_are_read(reads, own_step):
    inner = make_env("rlrun/CartPole-v1", 5)
    env = EpisodeStatistics(SteppedItsOwnWay(inner) if own_step else inner)
    assert (env._native is None) == own_step
    env.reset(seed=3)
    expected = PythonCount(5)
    steps_with_ends = 0
    actions_rng = torch.Generator().manual_seed(1)
    for step in range(1, 1401):
        _, reward, terminated, truncated, _ = env.step(torch.randint(0, 2, (5,), generator=actions_rng))
        expected.add(reward, terminated, truncated)
        steps_with_ends += bool((terminated | truncated).any())
        if step % (1400 // reads) == 0:
            assert env.episodes == len(expected.returns)
            assert env.mean_return(last=3) == pytest.approx(sum(expected.returns[-3:]) / 3)
            assert env.mean_length(last=10**6) == pytest.approx(sum(expected.lengths) / len(expected.lengths))
    assert steps_with_ends > 256  # more pieces than the log keeps apart: they also settled on their own
    assert env.episode_returns == expected.returns
    assert env.episode_lengths == expected.lengths


def test_pendulum_episodes_last_200_steps_through_the_gymnasium_adapter():
    env = EpisodeStatistics(make_env("Pendulum-v1", 2))
    env.reset(seed=0)
    for _ in range(400):
        env.step(torch.zeros(2, 1))
    assert env.episode_lengths == [200, 200, 200, 200]
    assert all(r < 0 for r in env.episode_returns)
    env.close()


def test_reset_drops_episodes_in_progress():
    env = EpisodeStatistics(make_env("rlrun/Pendulum-v1", 2, env_kwargs={"max_episode_steps": 5}))
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.zeros(2, 1))
    env.reset()
    for _ in range(5):
        env.step(torch.zeros(2, 1))
    assert env.episode_lengths == [5, 5]
    assert env.env_steps == 16


def test_on_step_is_called_after_every_step_with_the_wrapper():
    seen = []
    env = EpisodeStatistics(make_env("rlrun/CartPole-v1", 4), on_step=lambda stats: seen.append(stats.env_steps))
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.zeros(4, dtype=torch.int64))
    assert seen == [4, 8, 12]


def test_mean_return_rejects_an_empty_window():
    env = EpisodeStatistics(make_env("rlrun/CartPole-v1", 1))
    with pytest.raises(ValueError, match="at least 1"):
        env.mean_return(last=0)


@given(
    script=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(1, 40)),
            st.tuples(st.just("tail"), st.integers(1, 120)),
            st.tuples(st.just("all"), st.just(0)),
        ),
        max_size=200,
    ),
    join=st.integers(1, 8),
)
def test_the_episode_log_reads_what_a_plain_list_would_however_its_pieces_are_joined(script, join):
    """`_Log` keeps each step's values as a piece and joins every `JOIN` pieces into a chunk: any mix of appends
    and reads gives what a list of every value gives (`JOIN` shrunk so that reads span pieces and chunks)."""
    log = _Log()
    log.JOIN = join
    everything: list[float] = []
    for action, size in script:
        if action == "append":
            values = np.arange(len(everything), len(everything) + size, dtype=np.float64)
            log.append(values[::-1].copy())
            everything.extend(values[::-1].tolist())
        elif action == "tail":
            assert log.tail(size) == everything[-size:]
        else:
            assert log.tolist() == everything
        assert len(log) == len(everything)
    assert log.tolist() == everything
