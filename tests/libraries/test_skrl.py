"""The SKRL adapter on PyTorch and on JAX: it learns, plays back, leaves nothing behind, and its guards restore."""

from __future__ import annotations

import atexit
import collections
import gc
import importlib
import importlib.util
import json
import logging
import os
import pickle
import re
import subprocess
import sys
import threading
import types
import weakref
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch
import tqdm

import rlrun
from rlrun import runs
from rlrun.api import CORE_IMPORTS
from rlrun.configs import library_config, load_agent_config
from rlrun.envs import make_env
from rlrun.errors import CorruptCheckpoint, InvalidArgument, MissingDependency, UnsupportedTask
from rlrun.hermetic import GUARDS, census, hermetic_call
from rlrun.libraries import rsl_rl, skrl_jax_cache
from rlrun.libraries import skrl as adapter
from rlrun.libraries.skrl_checkpoints import checkpoint_framework
from rlrun.libraries.skrl_env import jax_device
from support import MUTATIONS as SUPPORT_MUTATIONS
from support import assert_order_independent, needs_jax

pytest.importorskip("skrl")

CARTPOLE = "rlrun/CartPole-v1"
PENDULUM = "rlrun/Pendulum-v1"
SMALL = ("agent.agent.rollouts=8", "agent.agent.learning_epochs=2", "agent.agent.mini_batches=2")
"""Short rollouts and few updates, so that a test's few iterations stay short."""


def train(log_root, task=CARTPOLE, overrides=SMALL, **kwargs):
    arguments = {"library": "skrl", "num_envs": 8, "max_iterations": 3, "seed": 1, **kwargs}
    return rlrun.train(rlrun.TrainRequest(task=task, log_root=str(log_root), overrides=overrides, **arguments))


def checkpoint_entries(result):
    return json.loads((result.run_dir / "run.json").read_text())["checkpoints"]


def weights(checkpoint):
    state = torch.load(checkpoint, weights_only=True)
    return {f"{part}.{key}": value for part in ("policy", "value") for key, value in state[part].items()}


# --- learning -----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_torch_learns_cartpole_and_plays_it_back(log_root):
    trained = rlrun.train(rlrun.TrainRequest(task=CARTPOLE, library="skrl", seed=1, log_root=str(log_root)))
    assert trained.mean_return >= 400, f"mean return {trained.mean_return} after {trained.env_steps} steps"

    played = rlrun.play(rlrun.PlayRequest(task=CARTPOLE, library="skrl", num_episodes=16, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint
    assert played.mean_return >= 400, f"played returns {played.returns}"


@needs_jax
@pytest.mark.slow
def test_jax_improves_on_cartpole_and_plays_it_back(log_root):
    trained = rlrun.train(
        rlrun.TrainRequest(
            task=CARTPOLE, library="skrl", ml_framework="jax", max_iterations=6, seed=1, log_root=str(log_root)
        )
    )
    curve = [entry["mean_return"] for entry in checkpoint_entries(trained) if "best" not in entry["file"]]
    assert trained.checkpoint.suffix == ".pickle"
    assert curve[-1] >= 2 * curve[0], f"mean returns at the checkpoints: {curve}"

    played = rlrun.play(rlrun.PlayRequest(task=CARTPOLE, library="skrl", num_episodes=8, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint  # the run's framework (JAX) is taken from its manifest
    assert played.mean_return >= curve[0], f"played returns {played.returns}"
    with pytest.raises(InvalidArgument, match="--ml_framework jax"):
        rlrun.play(
            rlrun.PlayRequest(task=CARTPOLE, library="skrl", checkpoint=str(played.checkpoint), ml_framework="torch")
        )


# --- order independence and per-call residue ----------------------------------------------------------------

A = {"task": CARTPOLE, "seed": 1, "num_envs": 16, "max_iterations": 4}
B = {"task": PENDULUM, "seed": 2, "num_envs": 8, "max_iterations": 3}


@pytest.mark.slow
def test_a_run_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path):
    spec = {"library": "skrl", "overrides": SMALL}
    assert_order_independent(tmp_path, {**spec, **A}, {**spec, **B}, weights)


def jax_weights(checkpoint):
    """Each module's serialized state (flax msgpack) in a JAX checkpoint, as bytes to compare bit for bit."""
    modules = pickle.loads(checkpoint.read_bytes())
    return {name: torch.frombuffer(bytearray(blob), dtype=torch.uint8) for name, blob in modules.items()}


@needs_jax
@pytest.mark.slow
def test_a_jax_run_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path, monkeypatch):
    """On JAX too: the first run compiles SKRL's executables into an empty cache, the others load them."""
    monkeypatch.setenv("RLRUN_CACHE_DIR", str(tmp_path / "cache"))  # the fresh process inherits it
    spec = {"library": "skrl", "ml_framework": "jax", "overrides": SMALL}
    a, b = {**spec, **A, "max_iterations": 2}, {**spec, **B, "max_iterations": 1}
    assert_order_independent(tmp_path, a, b, jax_weights)


@needs_jax
@pytest.mark.slow
def test_skrl_on_torch_and_jax_then_rsl_rl_leave_no_thread_descriptor_or_exit_hook(log_root, monkeypatch):
    registered = []
    register = atexit.register

    def spy(function, *args, **kwargs):
        registered.append(function)
        return register(function, *args, **kwargs)

    monkeypatch.setattr(atexit, "register", spy)
    for name in (*CORE_IMPORTS, *adapter.IMPORTS["torch"], *adapter.IMPORTS["jax"], *rsl_rl.IMPORTS["torch"]):
        importlib.import_module(name)  # import effects (jax's exit hooks, ...) are not per-call growth
    initialise_jax()
    watched = ("threads", "open file descriptors", "atexit callbacks")
    before = census.snapshot()
    monitor = tqdm.tqdm.monitor
    writer_on = (*SMALL, "agent.agent.experiment.write_interval=1")  # a TensorBoard writer (a thread) per call
    train(log_root, overrides=writer_on)
    train(log_root, ml_framework="jax", max_iterations=1, overrides=writer_on)
    rlrun.train(
        rlrun.TrainRequest(task=PENDULUM, library="rsl_rl", num_envs=4, max_iterations=2, log_root=str(log_root))
    )
    after = census.snapshot()
    assert {name: after[name] for name in watched} == {name: before[name] for name in watched}
    assert tqdm.tqdm.monitor is monitor
    assert not [function for function in registered if "close_env" in getattr(function, "__qualname__", "")]
    assert len([path for path in log_root.glob("skrl/*/*/events.out.tfevents.*") if path.suffix != ".rlrun"]) == 2


# --- the adapter's specifics --------------------------------------------------------------------------------


def test_the_run_directory_is_skrls_experiment_directory_and_checkpoints_are_recorded(log_root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    batches, save_checkpoints = [], runs.RunRecord.save_checkpoints

    def spy(record, checkpoints):
        batches.append([Path(name).name for name, _, _ in checkpoints])
        return save_checkpoints(record, checkpoints)

    monkeypatch.setattr(runs.RunRecord, "save_checkpoints", spy)
    result = train(
        log_root,
        max_iterations=3,
        overrides=(
            *SMALL,
            "agent.agent.experiment.write_interval=4",
            "agent.agent.experiment.checkpoint_interval=10",
        ),
    )
    assert result.iterations == 3 and result.env_steps == 3 * 8 * 8
    assert not (tmp_path / "runs").exists()
    assert list(result.run_dir.glob("events.out.tfevents.*"))
    files = [entry["file"] for entry in checkpoint_entries(result)]
    agents = [name for name in files if "best" not in name]
    assert agents == ["checkpoints/agent_10.pt", "checkpoints/agent_20.pt", "checkpoints/agent_24.pt"]  # last step too
    assert files[-1] == "checkpoints/agent_24.pt" and result.checkpoint == result.run_dir / files[-1]
    # a best agent and the current one, saved at one moment, are one batch: one run.json lists both
    assert [batch[-1] for batch in batches] == ["agent_10.pt", "agent_20.pt", "agent_24.pt"]
    assert any(batch[0] == "best_agent.pt" for batch in batches)
    assert all(batch[:-1] in ([], ["best_agent.pt"]) for batch in batches)
    assert sorted(path.name for path in (result.run_dir / "checkpoints").iterdir()) == sorted(
        {Path(name).name for name in files}
    ), "only complete checkpoints, no temporary files"

    play = {"task": CARTPOLE, "library": "skrl", "num_envs": 2, "num_episodes": 2, "log_root": str(log_root)}
    assert rlrun.play(rlrun.PlayRequest(**play)).checkpoint == result.checkpoint
    best = rlrun.play(rlrun.PlayRequest(**play, checkpoint="best")).checkpoint
    assert best.relative_to(result.run_dir).as_posix() in files
    by_path = rlrun.play(rlrun.PlayRequest(**play, checkpoint=str(result.run_dir / agents[0])))
    assert by_path.checkpoint == result.run_dir / agents[0] and len(by_path.returns) == 2

    resumed = train(log_root, max_iterations=1, resume=True)
    parent = json.loads((resumed.run_dir / "run.json").read_text())["parent"]
    assert parent["checkpoint"] == str(result.checkpoint) and resumed.checkpoint.is_file()


def test_max_iterations_are_rollouts_for_ppo_and_timesteps_for_sac():
    ppo = load_agent_config("skrl", "ppo", CARTPOLE)
    sac = load_agent_config("skrl", "sac", PENDULUM)
    assert adapter.env_steps_per_iteration(ppo, 64) == ppo["agent"]["rollouts"] * 64
    assert adapter.env_steps_per_iteration(sac, 8) == 8


def test_a_gaussian_policy_becomes_categorical_on_a_discrete_action_space(tmp_path):
    config = library_config(load_agent_config("skrl", "ppo", "Acrobot-v1"))  # the generic default
    filled = adapter.runner_config(
        config, seed=3, timesteps=16, run_dir=tmp_path / "run", action_space=gymnasium.spaces.Discrete(3)
    )
    policy = filled["models"]["policy"]
    assert policy["class"] == "CategoricalMixin" and "initial_log_std" not in policy and policy["network"]
    assert filled["seed"] == 3 and filled["trainer"]["timesteps"] == 16
    assert not filled["trainer"]["close_environment_at_exit"]
    assert (
        filled["agent"]["experiment"]["directory"] == str(tmp_path)
        and not filled["agent"]["experiment"]["store_separately"]
    )


def test_the_generic_default_trains_a_discrete_gymnasium_task_and_sac_a_continuous_one(log_root):
    discrete = train(log_root, task="CartPole-v1", num_envs=2, max_iterations=1)
    assert discrete.env_steps == 16 and discrete.checkpoint.is_file()

    sac = train(log_root, task=PENDULUM, algorithm="sac", num_envs=4, max_iterations=12, overrides=())
    assert json.loads((sac.run_dir / "run.json").read_text())["algorithm"] == "sac" and sac.env_steps == 48
    played = rlrun.play(
        rlrun.PlayRequest(task=PENDULUM, library="skrl", num_envs=2, num_episodes=2, log_root=str(log_root))
    )
    assert played.checkpoint == sac.checkpoint and len(played.returns) == 2

    with pytest.raises(UnsupportedTask, match="--algorithm ppo"):
        train(log_root, algorithm="sac", overrides=())


def test_truncated_steps_are_recorded_with_the_last_observation_of_the_episode():
    env = make_env(CARTPOLE, 3, env_kwargs={"max_episode_steps": 2})
    wrapped = adapter.wrap_env(env, "torch", "cpu", seed=0)
    first, _ = wrapped.reset()
    assert torch.equal(first, env.reset(seed=0)[0]), "the first reset is seeded with the run's seed"
    _, _, _, _, info = wrapped.step(torch.ones(3, 1, dtype=torch.long))
    observations, rewards, terminated, truncated, info = wrapped.step(torch.ones(3, 1, dtype=torch.long))
    assert observations.shape == (3, 4) and rewards.shape == terminated.shape == truncated.shape == (3, 1)
    assert truncated.all() and not torch.equal(info["final_observations"], observations)
    assert wrapped.reset()[0] is observations  # SKRL's trainer asks after an episode ended: the env already reset

    recorded = {}

    class Agent:
        def record_transition(self, **kwargs):
            recorded.update(kwargs)

    agent = Agent()
    adapter.bootstrap_from_final_observations(agent)
    agent.record_transition(next_observations=observations, infos=info, rewards=rewards)
    assert recorded["next_observations"] is info["final_observations"] and recorded["rewards"] is rewards
    env.close()


# --- checkpoints --------------------------------------------------------------------------------------------


class RunsCode:
    """Unpickling this would run a shell command."""

    def __reduce__(self):
        return os.system, ("touch ran",)


def test_a_file_that_is_not_a_skrl_checkpoint_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "agent.pt"
    torch.save({"value": {}}, path)
    with pytest.raises(CorruptCheckpoint, match="no 'policy' module"):
        adapter.check_checkpoint(path)
    path.write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(CorruptCheckpoint, match="cannot be read"):
        adapter.check_checkpoint(path)
    path.write_bytes(pickle.dumps({"policy": RunsCode()}))
    with pytest.raises(CorruptCheckpoint, match="refused to load"):
        adapter.check_checkpoint(path)
    assert not (tmp_path / "ran").exists()


def test_a_jax_checkpoint_without_jax_installed_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "agent.pickle"
    path.write_bytes(pickle.dumps({"policy": b"\x80"}, protocol=4))
    monkeypatch.setitem(sys.modules, "msgpack", None)  # what an installation without JAX's packages has
    expected = re.escape("is a SKRL checkpoint of JAX") + ".*" + re.escape("pip install 'rlrun[jax]'")
    with pytest.raises(MissingDependency, match=expected):
        adapter.check_checkpoint(path)
    path.write_bytes(pickle.dumps({"policy": RunsCode()}))  # a file that is none is still refused first
    with pytest.raises(CorruptCheckpoint, match="refused to load"):
        adapter.check_checkpoint(path)


@needs_jax
def test_a_jax_checkpoint_is_read_without_running_code(tmp_path):
    from flax import serialization

    path = tmp_path / "agent.pickle"
    path.write_bytes(pickle.dumps({"policy": serialization.to_bytes({"kernel": np.ones((2, 2))})}, protocol=4))
    adapter.check_checkpoint(path)
    assert checkpoint_framework(path) == "jax"
    path.write_bytes(pickle.dumps({"policy": "not bytes"}, protocol=4))
    with pytest.raises(CorruptCheckpoint, match="not a dictionary of serialized modules"):
        adapter.check_checkpoint(path)


def initialise_jax():
    """Initialise JAX's backends, if JAX is installed, and wait for the timer thread that initialisation starts."""
    if importlib.util.find_spec("jax") is None:
        return
    import jax

    jax.devices()
    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.join()


@needs_jax
def test_jax_cannot_use_a_device_it_does_not_have():
    initialise_jax()
    with pytest.raises(InvalidArgument, match="pass --device cpu"):
        jax_device("cuda:7")


# --- JAX's persistent compilation cache ----------------------------------------------------------------------


@pytest.fixture
def jax_cache_events():
    """JAX's monitoring events during the test, counted by name (`/jax/compilation_cache/cache_hits`, ...)."""
    import jax.monitoring

    events = collections.Counter()

    def count(event, **kwargs):
        events[event] += 1

    jax.monitoring.register_event_listener(count)
    yield events
    jax.monitoring.unregister_event_listener(count)


HITS, WRITES = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"
"""JAX's events for an executable loaded from the persistent cache and for one compiled and written to it."""


@needs_jax
def test_jax_calls_compile_into_rlruns_cache_folder_and_a_second_call_loads_from_it(
    log_root, tmp_path, monkeypatch, jax_cache_events
):
    monkeypatch.setenv("RLRUN_CACHE_DIR", str(tmp_path / "cache"))
    train(log_root, ml_framework="jax", max_iterations=1)
    written = jax_cache_events[WRITES]
    files = [path for path in (tmp_path / "cache").rglob("*") if path.is_file()]
    assert written > 0 and len(files) >= written
    assert all(path.parent == tmp_path / "cache" / "jax" for path in files)

    jax_cache_events.clear()
    train(log_root, ml_framework="jax", max_iterations=1, seed=2)  # SKRL jits the same programs for a new agent
    assert jax_cache_events[HITS] > 0 and jax_cache_events[WRITES] == 0, dict(jax_cache_events)


@needs_jax
def test_a_later_jax_call_in_the_process_takes_the_executables_it_needs_from_memory(
    log_root, tmp_path, monkeypatch, jax_cache_events
):
    """Every call traces SKRL's functions anew; the executables the persistent cache gave an earlier call are kept
    (`skrl_jax_cache._read_kept`), so a later call of the same programs reads none from the disk."""
    from jax._src import compilation_cache

    monkeypatch.setenv("RLRUN_CACHE_DIR", str(tmp_path / "cache"))
    train(log_root, ml_framework="jax", max_iterations=1)  # compiles and writes the folder
    train(log_root, ml_framework="jax", max_iterations=1, seed=2)  # reads from the folder, and keeps
    assert skrl_jax_cache._kept
    reads = []
    read = compilation_cache.get_executable_and_time
    monkeypatch.setattr(
        compilation_cache, "get_executable_and_time", lambda *args: reads.append(args[0]) or read(*args)
    )
    jax_cache_events.clear()
    train(log_root, ml_framework="jax", max_iterations=1, seed=3)
    assert jax_cache_events[HITS] > 0 and jax_cache_events[WRITES] == 0, dict(jax_cache_events)
    assert reads == []


@needs_jax
def test_a_jax_call_with_another_cache_folder_compiles_into_it_whatever_is_kept(
    log_root, tmp_path, monkeypatch, jax_cache_events
):
    monkeypatch.setenv("RLRUN_CACHE_DIR", str(tmp_path / "first"))
    train(log_root, ml_framework="jax", max_iterations=1)
    train(log_root, ml_framework="jax", max_iterations=1)
    assert skrl_jax_cache._kept
    monkeypatch.setenv("RLRUN_CACHE_DIR", str(tmp_path / "second"))
    jax_cache_events.clear()
    train(log_root, ml_framework="jax", max_iterations=1)
    assert jax_cache_events[WRITES] > 0
    assert list((tmp_path / "second" / "jax").iterdir())


@needs_jax
def test_the_executables_kept_after_a_call_are_those_it_used():
    """The reader keeps what the disk gave, serves it again, and the guard that takes it out at the call's end lets
    go of what the call did not ask for (with a stand-in for JAX's reader and fake keys)."""
    from jax._src import compiler

    initialise_jax()
    device = types.SimpleNamespace(id=0)
    backend = object()
    disk = []

    def from_disk(module_name, cache_key, options, backend, devices):
        disk.append(cache_key)
        return (None, None) if cache_key == "absent" else (f"executable {cache_key}", 1)

    def read(cache_key):
        return compiler._cache_read("module", cache_key, None, backend, [device])

    skrl_jax_cache.forget_kept_executables()
    with hermetic_call() as call, call.guarded():
        jax_reader = compiler._cache_read
        compiler._cache_read = from_disk
        try:
            with hermetic_call() as inner, inner.guarded():
                skrl_jax_cache._keep_executables("folder")
                assert compiler._cache_read is skrl_jax_cache._read_kept
                assert [read("a"), read("b"), read("a"), read("absent")] == [
                    ("executable a", 1),
                    ("executable b", 1),
                    ("executable a", 1),
                    (None, None),
                ]
                assert disk == ["a", "b", "absent"]  # a kept one is not read again; a missing one is not kept
            assert compiler._cache_read is from_disk  # the caller's reader is back
            assert {key[1] for key in skrl_jax_cache._kept} == {"a", "b"}

            with hermetic_call() as inner, inner.guarded():  # a call that asks for "b" and "c" only
                skrl_jax_cache._keep_executables("folder")
                read("b"), read("c")
            assert disk == ["a", "b", "absent", "c"]
            assert {key[1] for key in skrl_jax_cache._kept} == {"b", "c"}  # "a" is let go

            with hermetic_call() as inner, inner.guarded():  # another folder: read from its disk
                skrl_jax_cache._keep_executables("elsewhere")
                read("b")
            assert disk[-1] == "b"
        finally:
            compiler._cache_read = jax_reader
            skrl_jax_cache.forget_kept_executables()


@needs_jax
def test_a_jax_call_lets_go_of_its_agent_and_keeps_skrls_array_only_functions_compiled(log_root, monkeypatch):
    """JAX's caches would hold every call's models through SKRL's static arguments; the call clears those
    functions. SKRL's array-only functions (`skrl_jax_traces.ARRAY_ONLY`) hold no call object and keep
    their executables: a second call of the same shapes adds no entry."""
    from skrl.agents.jax.ppo import ppo

    make_runner, models = adapter.make_runner, []

    def watched(*args, **kwargs):
        runner = make_runner(*args, **kwargs)
        models.extend(weakref.ref(model) for model in runner.agent.models.values())
        return runner

    monkeypatch.setattr(adapter, "make_runner", watched)
    train(log_root, ml_framework="jax", max_iterations=1)
    gc.collect()
    assert models and all(model() is None for model in models), "a model of the call is still alive"
    assert ppo._update_policy._cache_size() == ppo._update_value._cache_size() == 0
    kept = ppo._compute_gae._cache_size()
    assert kept > 0
    train(log_root, ml_framework="jax", max_iterations=1, seed=2)
    assert ppo._compute_gae._cache_size() == kept


@needs_jax
def test_a_jax_call_leaves_the_callers_own_jitted_functions_their_inferred_parameters(log_root):
    """The eviction is for SKRL's functions alone: JAX's `clear_cache()` on one of them would also empty pjit's
    parameter-inference cache for every function, the caller's included, whose parameters would be inferred again."""
    import jax
    from jax._src import pjit

    def double(x):
        return x * 2

    jax.jit(double)(np.arange(3.0))

    def entries():
        return sum(key[0]() is double for key in pjit._infer_params_cached.cache_keys())

    assert entries() == 1
    train(log_root, ml_framework="jax", max_iterations=1)
    assert entries() == 1


@needs_jax
def test_a_callers_own_jax_cache_comes_back_after_a_jax_call_with_its_objects(log_root, tmp_path, monkeypatch):
    import jax
    from jax._src import compilation_cache

    from rlrun.libraries.skrl_jax_cache import GLOBALS

    monkeypatch.setenv("RLRUN_CACHE_DIR", str(tmp_path / "rlrun"))
    initialise_jax()
    before = census.snapshot()
    with hermetic_call(check_leaks=True) as outer, outer.guarded():  # the caller's own settings, undone at the end
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "caller"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.jit(lambda x: x * 3 + 1)(np.arange(3.0))  # opens the caller's cache and writes to it
        opened = {name: getattr(compilation_cache, name) for name in GLOBALS}
        config = jax.config.values
        assert opened["_cache"] is not None and opened["_cache_initialized"]

        train(log_root, ml_framework="jax", max_iterations=1)
        assert {name: getattr(compilation_cache, name) for name in GLOBALS} == opened
        assert compilation_cache._cache is opened["_cache"]
        assert jax.config.values == config
        assert list((tmp_path / "rlrun" / "jax").iterdir())
        assert len(list((tmp_path / "caller").iterdir())) == 1  # the call wrote to rlrun's folder only
        jax.jit(lambda x: x * 5 - 1)(np.arange(3.0))
        assert len(list((tmp_path / "caller").iterdir())) == 2  # and the caller's cache works after it
    assert census.compare(before, census.snapshot()) == []


@needs_jax
def test_a_caller_who_switched_jax_caching_off_gets_no_cache(log_root, tmp_path, monkeypatch):
    import jax

    monkeypatch.setenv("RLRUN_CACHE_DIR", str(tmp_path / "rlrun"))
    with hermetic_call(check_leaks=True) as outer, outer.guarded():
        jax.config.update("jax_enable_compilation_cache", False)
        train(log_root, ml_framework="jax", max_iterations=1)
    assert not (tmp_path / "rlrun" / "jax").exists()


# --- guards -------------------------------------------------------------------------------------------------


def _skrl_config_torch():
    import skrl

    skrl.config.torch.key = 123
    skrl.config.torch.device = "cpu"
    skrl.config.torch.backend = "torch"  # what Isaac Lab writes (an attribute SKRL 2.x does not have)


def _skrl_config_jax():
    import skrl

    skrl.config.jax.key = 7  # a new key array
    skrl.config.jax.device = "cpu"
    skrl.config.jax.backend = "jax"


def _skrl_config_warp():
    import skrl

    skrl.config.warp.key = 5
    skrl.config.warp.tiled = False


def _jax_config_values():
    import jax

    jax.config.update("jax_enable_x64", not jax.config.jax_enable_x64)
    jax.config.update("jax_default_matmul_precision", "highest")


MUTATIONS = {
    "skrl.config.torch": _skrl_config_torch,
    "skrl.config.jax": _skrl_config_jax,
    "skrl.config.warp": _skrl_config_warp,
    "jax.config values": _jax_config_values,
    "jax compilation cache": SUPPORT_MUTATIONS["jax compilation cache"],
    "jax compiler cache read": SUPPORT_MUTATIONS["jax compiler cache read"],
}


def test_every_guard_of_the_adapter_has_a_mutation_here():
    assert {guard.name for guard in GUARDS if guard.owner == "skrl"} == set(MUTATIONS)


@pytest.mark.parametrize("name", [pytest.param(name, marks=needs_jax) if "jax" in name else name for name in MUTATIONS])
def test_guard_restores_value_and_identity(name):
    import skrl

    initialise_jax()  # the guards read modules that are imported
    (guard,) = [guard for guard in GUARDS if guard.name == name]
    objects = {framework: dict(vars(getattr(skrl.config, framework))) for framework in ("torch", "jax", "warp")}
    before = census.snapshot()
    with hermetic_call(check_leaks=True) as call, call.guarded():
        MUTATIONS[name]()
        assert guard.snapshot() != before[name], "the mutation did not change what the guard covers"
    assert census.compare(before, census.snapshot()) == []
    for framework, attributes in objects.items():
        current = vars(getattr(skrl.config, framework))
        assert current.keys() == attributes.keys()
        assert all(current[key] is value for key, value in attributes.items())


@pytest.mark.parametrize("deterministic", [False, True])
def test_everything_skrls_set_seed_changes_is_put_back(deterministic, monkeypatch):
    from skrl.utils import set_seed

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    before = census.snapshot()
    with hermetic_call(check_leaks=True) as call, call.guarded():
        set_seed(123, deterministic=deterministic)
        assert os.environ["PYTHONHASHSEED"] == "123"
    assert census.compare(before, census.snapshot()) == []
    assert "PYTHONHASHSEED" not in os.environ and not torch.are_deterministic_algorithms_enabled()


def test_skrls_log_lines_go_to_the_console_log_unless_verbose(log_root, capfd):
    handlers = logging.getLogger("skrl").handlers
    result = train(log_root, max_iterations=1)
    assert "Seed: 1" in (result.run_dir / "console.log").read_text()
    played = rlrun.play(rlrun.PlayRequest(task=CARTPOLE, library="skrl", num_episodes=1, log_root=str(log_root)))
    assert played.returns and "skrl:INFO" not in "".join(capfd.readouterr())
    verbose = train(log_root, max_iterations=1, verbose=True)  # skrl's own handlers, wherever they write
    console = verbose.run_dir / "console.log"
    assert not console.exists() or "Seed: 1" not in console.read_text(encoding="utf-8")
    assert logging.getLogger("skrl").handlers is handlers


@needs_jax
def test_a_jax_training_leaves_torch_dynamo_unimported(tmp_path):
    """A JAX call builds no torch optimizer, so it neither imports `torch._dynamo` before its capture (1 to 1.5 s
    of CPU) nor has it imported during the call: checked in a fresh process, with the leak detector on."""
    code = (
        "import sys, rlrun\n"
        "rlrun.train(rlrun.TrainRequest(task='rlrun/Pendulum-v1', library='skrl', ml_framework='jax', num_envs=4, "
        f"max_iterations=2, log_root={str(tmp_path)!r}), check_leaks=True)\n"
        "print('torch._dynamo' in sys.modules, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["False", "True"]
