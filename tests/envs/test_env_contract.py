"""Every task rlrun builds keeps the step contract (`env_contract.check_contract`), each native task as
its `NativeTask` record says; the native tasks are all those registered when the tests are collected."""

from __future__ import annotations

import pytest
from env_contract import check_contract

from rlrun.envs import NATIVE_TASKS, BatchedVectorEnv, make_env
from rlrun.errors import InvalidArgument


@pytest.mark.parametrize("task", list(NATIVE_TASKS))
def test_native_tasks_keep_the_step_contract(task):
    check_contract(task)


@pytest.mark.parametrize("task", ["CartPole-v1", "Pendulum-v1"])
def test_gymnasium_tasks_keep_the_step_contract(task):
    check_contract(task)


@pytest.mark.parametrize("task", list(NATIVE_TASKS))
def test_native_tasks_are_built_as_their_record_says(task):
    record = NATIVE_TASKS[task]
    env = make_env(task, 3)
    assert isinstance(env, BatchedVectorEnv)
    assert type(env) is record.load()
    assert env.spec is not None and env.spec.id == task
    assert env.max_episode_steps == record.max_episode_steps
    for name, value in record.kwargs.items():
        assert getattr(env, name) == value
    assert env.components.shape == (env.state_size, 3)
    assert env.state.shape == (3, env.state_size) and env.state.data_ptr() == env.components.data_ptr()
    assert env.render() is None  # no render mode asked
    env.close()


@pytest.mark.parametrize("task", list(NATIVE_TASKS))
def test_native_tasks_reject_render_modes_they_do_not_offer(task):
    with pytest.raises(InvalidArgument, match=r"render.*not 'human'"):
        make_env(task, 1, render_mode="human")
