"""Task registry, make_env and env_config."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import rlrun.envs
from rlrun.envs import BUILTIN_TASKS, NATIVE_TASKS, NativeTask, env_config, make_env, register_task
from rlrun.envs.cartpole import CartPoleVectorEnv
from rlrun.envs.gymnasium_torch import GymnasiumTorchVectorEnv
from rlrun.envs.pendulum import PendulumVectorEnv
from rlrun.errors import InvalidArgument, UnknownTask

NATIVE = {
    "rlrun/CartPole-v1": (CartPoleVectorEnv, (4,), "sb3"),
    "rlrun/CartPoleContinuous-v1": (CartPoleVectorEnv, (4,), "rsl_rl"),
    "rlrun/Pendulum-v1": (PendulumVectorEnv, (3,), "rsl_rl"),
}
ALL_TASKS = [*NATIVE, "CartPole-v1", "Pendulum-v1"]


def sample_actions(env, generator: torch.Generator) -> torch.Tensor:
    if isinstance(env.single_action_space, gymnasium.spaces.Discrete):
        return torch.randint(0, 2, (env.num_envs,), generator=generator)
    return torch.rand(env.num_envs, *env.single_action_space.shape, generator=generator) * 2 - 1


def global_rng_states() -> tuple:
    """The states of the global RNGs of random, numpy and torch, comparable with ==."""
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    numpy_state = (kind, key.tobytes(), pos, has_gauss, gauss)
    return random.getstate(), numpy_state, torch.get_rng_state().numpy().tobytes()


def test_native_tasks_are_registered_with_gymnasium():
    assert list(NATIVE_TASKS)[: len(NATIVE)] == list(NATIVE)  # the suite registers a test task after them
    for task_id, (cls, _, library) in NATIVE.items():
        task = NATIVE_TASKS[task_id]
        spec = gymnasium.spec(task_id)
        assert isinstance(task, NativeTask) and task.default_library == library
        assert spec.vector_entry_point == task.vector_entry_point == f"{cls.__module__}:{cls.__name__}"
        assert spec.entry_point is None
        assert spec.max_episode_steps == task.max_episode_steps
        assert spec.kwargs == task.kwargs
    assert NATIVE_TASKS["rlrun/CartPoleContinuous-v1"].kwargs == {"continuous": True}
    assert NATIVE_TASKS["rlrun/CartPole-v1"].reward_threshold == 475.0


def test_the_builtin_records_come_first_and_name_their_classes():
    assert list(NATIVE_TASKS)[: len(BUILTIN_TASKS)] == [task.id for task in BUILTIN_TASKS]
    assert all(NATIVE_TASKS[task.id] is task for task in BUILTIN_TASKS)
    assert [task.load() for task in BUILTIN_TASKS] == [CartPoleVectorEnv, CartPoleVectorEnv, PendulumVectorEnv]


@pytest.mark.parametrize("task_id", list(NATIVE))
def test_make_vec_builds_native_tasks_from_their_vector_entry_point(task_id):
    cls, obs_shape, _ = NATIVE[task_id]
    env = gymnasium.make_vec(task_id, 3, vectorization_mode="vector_entry_point")
    assert type(env) is cls
    assert env.num_envs == 3 and env.device == torch.device("cpu")
    assert env.max_episode_steps == gymnasium.spec(task_id).max_episode_steps
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.spec.id == task_id
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, *obs_shape)
    obs, *_ = env.step(sample_actions(env, torch.Generator().manual_seed(0)))
    assert obs.shape == (3, *obs_shape)
    env.close()


def test_continuous_cartpole_has_a_box_action_space():
    assert make_env("rlrun/CartPoleContinuous-v1", 2).single_action_space.shape == (1,)
    assert make_env("rlrun/CartPole-v1", 2).single_action_space == gymnasium.spaces.Discrete(2)


def test_make_env_passes_device_and_env_kwargs_to_native_tasks():
    env = make_env("rlrun/CartPole-v1", 2, device=torch.device("cpu"), env_kwargs={"max_episode_steps": 7})
    assert env.device == torch.device("cpu") and env.max_episode_steps == 7
    env = make_env("rlrun/Pendulum-v1", 2, env_kwargs={"g": 9.81})
    assert env.g == 9.81


@pytest.mark.parametrize("task_id", ["CartPole-v1", "Pendulum-v1"])
def test_make_env_wraps_gymnasium_ids_and_applies_max_episode_steps(task_id):
    env = make_env(task_id, 2, env_kwargs={"max_episode_steps": 3})
    assert isinstance(env, GymnasiumTorchVectorEnv)
    assert env.num_envs == 2 and env.device == torch.device("cpu")
    env.reset(seed=0)
    env.action_space.seed(0)
    truncated = [env.step(torch.as_tensor(env.action_space.sample()))[3] for _ in range(3)]
    assert truncated[-1].all()
    env.close()


def test_env_config_lists_the_keyword_arguments_of_each_task():
    assert env_config("rlrun/CartPole-v1") == {
        "max_episode_steps": 500,
        "continuous": False,
        "force_mag": 10.0,
        "kernel": "auto",
    }
    assert env_config("rlrun/CartPoleContinuous-v1") == {
        "max_episode_steps": 500,
        "continuous": True,
        "force_mag": 10.0,
        "kernel": "auto",
    }
    assert env_config("rlrun/Pendulum-v1") == {"max_episode_steps": 200, "g": 10.0}
    assert env_config("CartPole-v1") == {"max_episode_steps": 500, "sutton_barto_reward": False}
    assert env_config("Pendulum-v1") == {"max_episode_steps": 200, "g": 10.0}


@pytest.mark.parametrize("task_id", ALL_TASKS)
def test_env_config_is_accepted_by_make_env(task_id):
    env = make_env(task_id, 2, env_kwargs=env_config(task_id))
    env.reset(seed=0)
    env.close()


def test_unknown_tasks_and_bad_arguments_are_user_errors():
    with pytest.raises(UnknownTask, match="Did you mean 'rlrun/CartPole-v1'"):
        make_env("rlrun/CartPole-v2", 2)
    with pytest.raises(UnknownTask):
        env_config("NoSuchTask-v0")
    with pytest.raises(InvalidArgument, match="num_envs"):
        make_env("rlrun/CartPole-v1", 0)
    with pytest.raises(InvalidArgument, match="vectorization"):
        make_env("CartPole-v1", 2, vectorization="threads")


def test_registering_again_is_harmless():
    specs = {task_id: gymnasium.registry[task_id] for task_id in NATIVE}
    tasks = dict(NATIVE_TASKS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for task in tasks.values():
            register_task(
                task.id,
                task.vector_entry_point,
                max_episode_steps=task.max_episode_steps,
                default_library=task.default_library,
                reward_threshold=task.reward_threshold,
                kwargs=task.kwargs,
            )
    assert tasks == NATIVE_TASKS
    assert all(gymnasium.registry[task_id] is spec for task_id, spec in specs.items())


def test_make_env_registers_again_after_the_gymnasium_registry_was_restored(monkeypatch):
    monkeypatch.delitem(gymnasium.registry, "rlrun/Pendulum-v1")
    env = make_env("rlrun/Pendulum-v1", 2)
    assert isinstance(env, PendulumVectorEnv)
    assert gymnasium.spec("rlrun/Pendulum-v1").max_episode_steps == 200


@pytest.mark.parametrize("task_id", ALL_TASKS)
def test_global_rngs_are_left_alone(task_id):
    before = global_rng_states()
    env = make_env(task_id, 4)
    generator = torch.Generator().manual_seed(0)
    env.reset()
    env.reset(seed=1)
    for _ in range(50):
        env.step(sample_actions(env, generator))
    env.close()
    assert global_rng_states() == before


@pytest.mark.slow
def test_import_is_light_and_idempotent():
    """`import rlrun.envs` loads no torch, and registering again (even by a reload) warns about nothing."""
    code = (
        "import importlib, sys, warnings\n"
        "warnings.simplefilter('error')\n"
        "import rlrun.envs, rlrun.envs.tasks\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "importlib.reload(rlrun.envs.tasks)\n"
        "assert list(rlrun.envs.tasks.NATIVE_TASKS) == "
        "['rlrun/CartPole-v1', 'rlrun/CartPoleContinuous-v1', 'rlrun/Pendulum-v1']\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    src = Path(rlrun.envs.__file__).parents[2]
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
