"""Running a policy for episodes, and the zero and random agents."""

from __future__ import annotations

import pytest
import torch

import rlrun
from rlrun import rollout
from rlrun.envs import make_env


def test_every_env_contributes_its_first_episodes_so_short_ones_are_not_favoured():
    env = make_env("rlrun/CartPole-v1", 4, env_kwargs={"max_episode_steps": 50})

    # env 0 always pushes left and falls fast; the others balance until the time limit
    def policy(observations):
        balance = (observations[:, 2] + 0.5 * observations[:, 3] > 0).long()
        balance[0] = 0
        return balance

    episodes = rollout.evaluate(env, policy, num_episodes=4, max_steps=1000, seed=0)
    assert sorted(episodes.lengths)[1:] == [50, 50, 50] and min(episodes.lengths) < 20
    assert episodes.mean_return == pytest.approx(sum(episodes.returns) / 4)
    env.close()


def test_max_steps_bounds_a_rollout_and_unfinished_episodes_do_not_count():
    env = make_env("rlrun/Pendulum-v1", 3)
    episodes = rollout.evaluate(env, rollout.zero_policy(env), num_episodes=None, max_steps=150, seed=0)
    assert episodes.returns == () and episodes.env_steps == 450 and episodes.mean_return is None
    env.close()


@pytest.mark.parametrize("task", ["rlrun/CartPole-v1", "rlrun/Pendulum-v1", "MountainCarContinuous-v0"])
def test_random_actions_cover_the_action_space_and_zero_actions_are_in_it(task):
    env = make_env(task, 64)
    space = env.single_action_space
    actions = torch.stack([rollout.random_policy(env, seed=0)(None) for _ in range(20)])
    zero = rollout.zero_policy(env)(None)
    if hasattr(space, "n"):
        assert set(actions.flatten().tolist()) == set(range(space.n)) and set(zero.tolist()) == {0}
    else:
        low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
        assert (
            bool(((actions >= low) & (actions <= high)).all()) and actions.std() > 0.25 * (high - low).min()
        )  # a uniform has std 0.29 x its range
        assert bool((zero == 0).all())
    env.close()


def test_random_agent_is_reproducible_from_its_seed():
    request = rlrun.AgentRequest(task="rlrun/Pendulum-v1", num_episodes=2, seed=3)
    assert rlrun.random_agent(request).returns == rlrun.random_agent(request).returns
    other = rlrun.random_agent(rlrun.AgentRequest(task="rlrun/Pendulum-v1", num_episodes=2, seed=4))
    assert other.returns != rlrun.random_agent(request).returns


def test_cli_zero_and_random(capsys):
    assert rlrun.main(["zero", "--task", "rlrun/CartPole-v1", "--num_episodes", "3"]) == 0
    assert "ran 3 episodes of rlrun/CartPole-v1 with the zero agent" in capsys.readouterr().out
    assert rlrun.main(["random", "--task", "rlrun/Pendulum-v1", "--max_steps", "5", "--json"]) == 0
    assert '"env_steps": 20' in capsys.readouterr().out
    assert rlrun.main(["random", "--task", "rlrun/Pendulum-v1", "agent.lr=1"]) == 2
    assert "no agent configuration" in capsys.readouterr().err
