"""Test helpers: one mutation per guarded global (`MUTATIONS`), a task that makes them all like a careless
library, then fails on request; the order-independence check every library's tests run.

`rlrun_test/Meddling-v0` is rlrun's Pendulum with three extra constructor arguments (so they can be set
with `env.meddle_at=...` overrides like any task keyword):
- `meddle_at`: at this step, change every global the hermetic scope guards and can read (argv in place
  *and* rebound, environment, cwd, sys.path, warnings, logging, SIGINT, atexit, RNGs, torch flags, the
  imported libraries' configuration, ...): `meddle()`, one `MUTATIONS` entry per registry entry;
- `fail_at`: at this step, also change the globals that would break a training still running
  (`FATAL_MUTATIONS`: default dtype, grad mode, anomaly mode), then raise `failure`;
- `failure`: `RuntimeError`, `KeyboardInterrupt` or `SystemExit`.
Everything it does happens after the library has built its runner and started training.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import importlib.util
import logging
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch

os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
with contextlib.suppress(ImportError):  # loaded before any census, so that the pygame guard reads every snapshot
    import pygame  # noqa: F401

from rlrun.envs import register_task
from rlrun.envs.pendulum import PendulumVectorEnv
from rlrun.hermetic import GUARDS

REQUIRES = {
    "rsl_rl": ("rsl_rl",),
    "skrl": ("skrl",),
    "skrl_jax": ("skrl", "jax", "flax"),
    "jax": ("jax", "flax"),
    "sb3": ("stable_baselines3",),
    "rl_games": ("rl_games",),
    "torchrl": ("torchrl",),
    "torchrl_sac": ("torchrl",),
}
"""A test parameter naming a library path (a contract case, a library, a framework) -> the modules it needs; the
suite's `conftest` skips a parametrized test whose parameter needs a module that is not installed (an install
without an extra: `pip install 'rlrun[rsl-rl,dev]'`)."""


def missing_module(parameter: Any) -> str | None:
    """The first module that test parameter `parameter` needs (`REQUIRES`) and this installation lacks, or None."""
    if not isinstance(parameter, str):
        return None
    return next((name for name in REQUIRES.get(parameter, ()) if importlib.util.find_spec(name) is None), None)


needs_jax = pytest.mark.skipif(
    missing_module("jax") is not None, reason="JAX is not installed (pip install 'rlrun[jax]')"
)
"""For a test of SKRL on JAX that is not parametrized by its case."""

MEDDLING_TASK = "rlrun_test/Meddling-v0"
FAILURE_MESSAGE = "the environment exploded on purpose"


class EnvironmentExploded(RuntimeError):
    """The exception the meddling env raises; tests check it reaches the caller unchanged."""


class _Wrapper:
    """What a library that wraps a global installs (colorama's stream wrapper, a progress bar's hook): a new
    object that forwards everything to the one it replaced, so the process keeps working."""

    def __init__(self, wrapped: Any) -> None:
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped(*args, **kwargs)


class _NoFinder:
    """A meta path finder that finds nothing."""

    @staticmethod
    def find_spec(*args: Any) -> None:
        return None


def _no_path_hook(path: str) -> Any:
    raise ImportError(path)


def _wrap(owner: Any, name: str) -> Callable[[], None]:
    return lambda: setattr(owner, name, _Wrapper(getattr(owner, name)))


def _environ() -> None:
    os.environ["RLRUN_TEST_ADDED"] = "added"
    os.environ["RLRUN_TEST_SENTINEL"] = "changed"
    os.environ.pop("RLRUN_TEST_DELETED", None)
    os.environ["PYTHONHASHSEED"] = "42"  # what SKRL's set_seed writes


def _warnings() -> None:
    warnings.simplefilter("ignore")
    warnings.filters = []
    warnings.showwarning = lambda *args, **kwargs: None


def _logging() -> None:
    logging.getLogger().setLevel(logging.DEBUG)
    logging.getLogger().addHandler(logging.NullHandler())
    logging.getLogger("rlrun_test.meddler").addHandler(logging.NullHandler())
    logging.getLogger("rlrun_test.meddler").setLevel(logging.DEBUG)
    logging.getLogger("gymnasium").propagate = False
    logging.disable(logging.INFO)


def _signals() -> None:
    signal.signal(signal.SIGINT, lambda number, frame: None)
    signal.signal(signal.SIGTERM, lambda number, frame: None)


def _exit_hook() -> None:
    """An exit hook registered during a call (SKRL registers one per trainer)."""


def _atexit() -> None:
    atexit.register(_exit_hook)
    atexit.register = _Wrapper(atexit.register)


def _shared_memory() -> None:
    """What an async vector env does: share a buffer larger than any arena the heap has, then free it."""
    import multiprocessing.heap

    heap = multiprocessing.heap.BufferWrapper._heap
    size = max((arena.size for arena in heap._arenas), default=0) + 1
    multiprocessing.heap.BufferWrapper(size)  # freed at once: its arena stays, with its /dev/shm file open


def _pygame() -> None:
    """What a Gymnasium classic-control render and close do: SDL's timer thread outlives them."""
    import pygame

    pygame.display.init()
    pygame.time.Clock()
    pygame.display.quit()
    pygame.quit()


def _mujoco_meddler(message: str) -> None:
    """A MuJoCo warning callback of the kind a caller or a library might set."""


def _gc() -> None:
    gc.disable()
    gc.set_threshold(*(threshold + 1 for threshold in gc.get_threshold()))


def _gymnasium() -> None:
    gymnasium.register("rlrun_test/RegisteredByMeddler-v0", entry_point="gymnasium.envs.classic_control:PendulumEnv")
    gymnasium.registry.pop("CartPole-v0", None)
    gymnasium.logger.min_level = 50


def _tf32() -> None:
    torch.set_float32_matmul_precision("high")  # what rl_games' Runner does: the mixed legacy/new state of
    torch.backends.cuda.matmul.allow_tf32 = False  # reference C.5, in which torch's own getters raise
    torch.backends.cudnn.allow_tf32 = False


def _backend_flags() -> None:
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic = not torch.backends.cudnn.deterministic
    torch.backends.cuda.enable_flash_sdp(not torch.backends.cuda.flash_sdp_enabled())


def _dynamo_limits() -> None:
    config = sys.modules["torch._dynamo.config"]
    config.recompile_limit += 1


def _skrl_config_torch() -> None:
    skrl = sys.modules["skrl"]
    skrl.config.torch.key = 123
    skrl.config.torch.device = "cpu"
    skrl.config.torch.backend = "torch"  # what Isaac Lab writes (an attribute SKRL 2.x no longer has)


def _skrl_config_jax() -> None:
    skrl = sys.modules["skrl"]
    skrl.config.jax.key = 7  # a new key array
    skrl.config.jax.device = "cpu"
    skrl.config.jax.backend = "jax"


def _skrl_config_warp() -> None:
    skrl = sys.modules["skrl"]
    skrl.config.warp.key = 5
    skrl.config.warp.tiled = not skrl.config.warp.tiled


def _jax_config_values() -> None:
    config = sys.modules["jax"].config
    config.update("jax_traceback_filtering", "off" if config.values["jax_traceback_filtering"] != "off" else "auto")


def _jax_compilation_cache() -> None:
    compilation_cache = sys.modules["jax._src.compilation_cache"]

    class MemoryCache(compilation_cache.CacheInterface):  # a cache of a library's own, opened in the process
        def __init__(self) -> None:
            self._path, self.entries = Path("memory"), {}

        def get(self, key: str) -> bytes | None:
            return self.entries.get(key)

        def put(self, key: str, value: bytes) -> None:
            self.entries[key] = value

    with compilation_cache._cache_initialized_mutex:
        compilation_cache._cache, compilation_cache._cache_initialized = MemoryCache(), True


def _jax_compiler_cache_read() -> None:
    compiler = sys.modules["jax._src.compiler"]
    read = compiler._cache_read

    def logged(*args: Any) -> Any:  # a reader that counts or logs the cache's reads, as a profiler might
        return read(*args)

    compiler._cache_read = logged


def _rl_games_registries() -> None:
    from rl_games.algos_torch import model_builder
    from rl_games.common import env_configurations, vecenv

    vecenv.register("RLRUN_TEST", lambda config_name, num_actors, **kwargs: None)
    env_configurations.configurations = dict(env_configurations.configurations)  # rebound
    env_configurations.register("rlrun_test", {"vecenv_type": "RLRUN_TEST"})
    model_builder.register_network("rlrun_test", object)
    model_builder.register_model("rlrun_test", object)
    model_builder.NETWORK_REGISTRY.pop("testnet", None)


def _tensordict_interaction_type() -> None:
    from tensordict.nn import InteractionType, set_interaction_type

    set_interaction_type(InteractionType.MODE).__enter__()  # entered and never left, as an exception would leave it


def _tensordict_options() -> None:
    from tensordict import set_capture_non_tensor_stack, set_lazy_legacy, set_list_to_stack

    # Each to its default value, set explicitly (None -> the value): what TorchRL's and users' scripts do.
    set_lazy_legacy(False).set()
    set_list_to_stack(True).set()
    set_capture_non_tensor_stack(False).set()


def _tensordict_nn_modes() -> None:
    from tensordict.nn import add_custom_mapping, set_composite_lp_aggregate

    set_composite_lp_aggregate(False).set()
    add_custom_mapping("rlrun_test", torch.nn.functional.softplus)


def _torchrl_options() -> None:
    from torchrl import set_auto_unwrap_transformed_env
    from torchrl.modules.tensordict_module._rnn_precision import set_recurrent_matmul_precision

    set_auto_unwrap_transformed_env(True).set()
    set_recurrent_matmul_precision("ieee")


MUTATIONS: dict[str, Callable[[], None]] = {
    # generic guards (rlrun.hermetic.*_guards); argv in place like skrl's Isaac Lab loader, then rebound like Hydra
    "sys.argv": lambda: (sys.argv.append("--meddled"), setattr(sys, "argv", ["meddler", "--rebound"])),
    "sys.path": lambda: (sys.path.insert(0, "/meddled"), setattr(sys, "path", [*sys.path, "/rebound"])),
    "sys.meta_path": lambda: sys.meta_path.append(_NoFinder()),
    "sys.path_hooks": lambda: sys.path_hooks.append(_no_path_hook),
    "os.environ": _environ,
    "cwd": lambda: os.chdir("/"),
    "sys.stdin": _wrap(sys, "stdin"),
    "sys.stdout": _wrap(sys, "stdout"),
    "sys.stderr": _wrap(sys, "stderr"),
    "sys.excepthook": _wrap(sys, "excepthook"),
    "sys.displayhook": _wrap(sys, "displayhook"),
    "sys.unraisablehook": _wrap(sys, "unraisablehook"),
    "threading.excepthook": _wrap(threading, "excepthook"),
    "sys.recursionlimit": lambda: sys.setrecursionlimit(sys.getrecursionlimit() + 7),
    "sys.switchinterval": lambda: sys.setswitchinterval(sys.getswitchinterval() * 2),
    "warnings": _warnings,
    "logging": _logging,
    "signal handlers": _signals,
    "atexit.register": _atexit,
    "multiprocessing start method": lambda: multiprocessing.set_start_method(  # `import torchrl` sets spawn
        "forkserver" if multiprocessing.get_start_method(allow_none=True) == "spawn" else "spawn", force=True
    ),
    "multiprocessing shared-memory heap": _shared_memory,
    "SDL subsystems (pygame)": _pygame,
    "garbage collector": _gc,
    "random": lambda: random.seed(123),
    "numpy.random": lambda: np.random.seed(123),
    "numpy error and print options": lambda: (np.seterr(all="ignore"), np.set_printoptions(precision=2)),
    "gymnasium registry": _gymnasium,
    "mujoco warning callback": lambda: sys.modules["mujoco"].set_mju_user_warning(_mujoco_meddler),
    # torch (rlrun.hermetic.torch_state)
    "torch TF32 and float32 matmul precision": _tf32,
    "torch.backends flags": _backend_flags,
    "torch deterministic algorithms": lambda: torch.use_deterministic_algorithms(True, warn_only=True),
    "torch default dtype": lambda: torch.set_default_dtype(torch.float64),
    "torch default device": lambda: torch.set_default_device("cpu"),
    "torch intra-op threads": lambda: torch.set_num_threads(1 if torch.get_num_threads() != 1 else 2),
    "torch grad mode": lambda: torch.set_grad_enabled(False),
    "torch anomaly mode": lambda: torch.set_anomaly_enabled(True, check_nan=False),
    "torch print options": lambda: torch.set_printoptions(precision=2, sci_mode=True),
    "torch._dynamo limits": _dynamo_limits,
    "torch RNG": lambda: torch.manual_seed(123),
    # library guards (rlrun.libraries.*): their modules are imported whenever the guard is available
    "skrl.config.torch": _skrl_config_torch,
    "skrl.config.jax": _skrl_config_jax,
    "skrl.config.warp": _skrl_config_warp,
    "jax.config values": _jax_config_values,
    "jax compilation cache": _jax_compilation_cache,
    "jax compiler cache read": _jax_compiler_cache_read,
    "rl_games registries": _rl_games_registries,
    "tensordict interaction type": _tensordict_interaction_type,
    "tensordict options": _tensordict_options,
    "tensordict.nn modes": _tensordict_nn_modes,
    "torchrl options": _torchrl_options,
}
"""One realistic change per restorable guard, by guard name: the one table that `meddle`, the guard tests
(`tests/hermetic/test_guards.py`) and the completeness test use. Each change is safe to make in the middle of
a training (wrappers forward, finders find nothing), except those in `FATAL_MUTATIONS`; each can be made twice."""

FATAL_MUTATIONS = frozenset({"torch default dtype", "torch grad mode", "torch anomaly mode"})
"""The changes that would break a training still running: `meddle(fatal=True)` makes them just before failing."""


def meddle(*, fatal: bool = False) -> None:
    """Change every global the scope restores and can read now, each in the way a library could.

    Every restorable guard in the registry that is available gets its `MUTATIONS` entry (a guard without one
    raises `KeyError`); `fatal` selects the `FATAL_MUTATIONS` instead of the others.
    """
    for guard in list(GUARDS):
        if guard.restored and guard.available() and (guard.name in FATAL_MUTATIONS) == fatal:
            MUTATIONS[guard.name]()


def meddle_fatally() -> None:
    """Change the globals that would break a training still running."""
    meddle(fatal=True)


def import_library(name: str) -> list[str]:
    """Import library `name` (a `LIBRARIES` key) the way its calls do, for every framework it runs on that is
    installed, so that its guards are available; return the modules imported. JAX's backends are initialised
    and the timer thread that starts waited for, so no later census sees them."""
    from rlrun.libraries import LIBRARIES

    library = LIBRARIES[name]
    adapter = importlib.import_module(library.adapter)
    imported = []
    for framework in library.frameworks:
        modules = adapter.IMPORTS[framework]
        if all(importlib.util.find_spec(module.partition(".")[0]) is not None for module in modules):
            imported += [importlib.import_module(module).__name__ for module in modules]
    if "jax" in imported:
        sys.modules["jax"].devices()
        for thread in threading.enumerate():
            if isinstance(thread, threading.Timer):
                thread.join()
    return imported


def import_adapters() -> list[str]:
    """Import every library adapter module, which registers the library's guards (the libraries themselves
    are not imported); return the owners in table order."""
    from rlrun.libraries import LIBRARIES

    for library in LIBRARIES.values():
        importlib.import_module(library.adapter)
    return list(LIBRARIES)


FAILURES = {"RuntimeError": EnvironmentExploded, "KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}


class MeddlingVectorEnv(PendulumVectorEnv):
    """Pendulum that meddles with the process at step `meddle_at` and fails at step `fail_at`."""

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int = 200,
        device: str | torch.device = "cpu",
        g: float = 10.0,
        render_mode: str | None = None,
        meddle_at: int = 0,
        fail_at: int = 0,
        failure: str = "RuntimeError",
    ):
        super().__init__(num_envs, max_episode_steps=max_episode_steps, device=device, g=g, render_mode=render_mode)
        self.meddle_at, self.fail_at, self.failure = meddle_at, fail_at, failure
        self.step_count = 0

    def step(self, actions):
        self.step_count += 1
        if self.step_count == self.meddle_at:
            meddle()
        if self.step_count == self.fail_at:
            meddle()
            meddle_fatally()
            if self.failure == "SystemExit":
                raise SystemExit(3)
            raise FAILURES[self.failure](FAILURE_MESSAGE)
        return super().step(actions)


def register() -> None:
    """Register the meddling task (idempotent)."""
    register_task(MEDDLING_TASK, "support:MeddlingVectorEnv", max_episode_steps=200, default_library="rsl_rl")


SMALL_RSL_RL = ("agent.num_steps_per_env=8", "agent.actor.hidden_dims=[16,16]", "agent.critic.hidden_dims=[16,16]")
"""Overrides that make an RSL-RL run of a few iterations take well under a second."""


def bench_request(out: Any, **fields: Any) -> Any:
    """A bench of seconds into `out`: one seed, 2 iterations on 2 envs, no report, unless `fields` say otherwise
    (they name the tasks, runs and overrides)."""
    import rlrun

    spec = {"seeds": (0,), "iterations": 2, "num_envs": 2, "out": str(out), "report": False, **fields}
    return rlrun.BenchRequest(**spec)


def result_rows(out: Any) -> list[dict[str, Any]]:
    """The rows of `<out>/results.jsonl`, in file order."""
    import json
    from pathlib import Path

    text = (Path(out) / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


CONTRACT_CASES = {
    # case id: (TrainRequest keyword arguments for a short run of the meddling task, a step at which the
    # library has built its agent and is training: the env fails there, after the library changed globals)
    "rsl_rl": ({"library": "rsl_rl", "num_envs": 4, "max_iterations": 3, "overrides": SMALL_RSL_RL}, 12),
    "skrl": (
        {
            "library": "skrl",
            "num_envs": 4,
            "max_iterations": 2,
            "overrides": ("agent.agent.rollouts=8", "agent.agent.learning_epochs=1", "agent.agent.mini_batches=1"),
        },
        12,
    ),
    "skrl_jax": (  # JAX compiles per agent: one update in a successful run, none in a failing one
        {
            "library": "skrl",
            "ml_framework": "jax",
            "num_envs": 4,
            "max_iterations": 1,
            "overrides": ("agent.agent.rollouts=8", "agent.agent.learning_epochs=1", "agent.agent.mini_batches=1"),
        },
        5,
    ),
    "sb3": (
        {
            "library": "sb3",
            "num_envs": 4,
            "max_iterations": 3,
            "overrides": ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]"),
        },
        12,
    ),
    "rl_games": (
        {
            "library": "rl_games",
            "num_envs": 4,
            "max_iterations": 3,
            "overrides": ("agent.params.config.horizon_length=8", "agent.params.config.minibatch_size=16"),
        },
        12,
    ),
    "torchrl": (
        {
            "library": "torchrl",
            "num_envs": 4,
            "max_iterations": 3,
            "overrides": ("agent.steps_per_env=8", "agent.minibatch_size=16", "agent.num_epochs=2"),
        },
        12,
    ),
    "torchrl_sac": (
        {
            "library": "torchrl",
            "algorithm": "sac",
            "num_envs": 4,
            "max_iterations": 4,
            "overrides": (
                "agent.steps_per_env=4",
                "agent.learning_starts=8",
                "agent.batch_size=16",
                "agent.actor.hidden=[16,16]",
                "agent.critic.hidden=[16,16]",
            ),
        },
        12,
    ),
}
"""The libraries (and frameworks) the hermetic contract tests run, one small configuration each."""


SHORT_RUNS = {
    "rsl_rl": ("agent.num_steps_per_env=8",),
    "skrl": ("agent.agent.rollouts=8", "agent.agent.mini_batches=2"),
    "sb3": ("agent.n_steps=8", "agent.batch_size=32", "agent.save_interval=1"),
    "rl_games": ("agent.params.config.horizon_length=8", "agent.params.config.minibatch_size=32"),
    "torchrl": ("agent.steps_per_env=8", "agent.minibatch_size=32", "agent.save_interval=1"),
}
"""Per PyTorch library, overrides for short runs of `rlrun/Pendulum-v1`: 8 steps per env per iteration."""

ALONE_IN_A_FRESH_PROCESS = """
import sys
import rlrun
result = rlrun.train(rlrun.TrainRequest(log_root=sys.argv[1], **{spec!r}))
print(result.checkpoint)
print(repr(result.mean_return))
"""


def assert_bitwise_equal(first: dict[str, Any], second: dict[str, Any]) -> None:
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), f"{key} differs"


def assert_order_independent(tmp_path: Path, a: dict[str, Any], b: dict[str, Any], weights: Callable[[Path], dict]):
    """Train A, then B, then A again in this process, and A alone in a fresh one (`a`, `b`: TrainRequest
    keywords): the three A runs must give the same mean return and bitwise-equal `weights(checkpoint)`."""
    import rlrun

    def train(name: str, spec: dict[str, Any]) -> Any:
        return rlrun.train(rlrun.TrainRequest(log_root=str(tmp_path / name), **spec))

    first = train("first", a)
    train("between", b)
    again = train("again", a)
    assert first.mean_return == again.mean_return and first.env_steps == again.env_steps
    assert_bitwise_equal(weights(first.checkpoint), weights(again.checkpoint))

    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    output = subprocess.run(
        [sys.executable, "-c", ALONE_IN_A_FRESH_PROCESS.format(spec=a), str(tmp_path / "fresh")],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        timeout=300,
    ).stdout.splitlines()
    assert float(output[-1]) == first.mean_return
    assert_bitwise_equal(weights(first.checkpoint), weights(Path(output[-2])))


def drop_a_ctrl_c() -> None:
    """Send this process a SIGINT from inside a weakref finalizer: Python raises its `KeyboardInterrupt` there,
    prints "Exception ignored" and drops it, as with a Ctrl-C that lands in a finalizer the collector runs."""
    import weakref

    dropped = type("Dropped", (), {})()
    weakref.finalize(dropped, os.kill, os.getpid(), signal.SIGINT)
    del dropped  # the finalizer runs here


# --- a two-node Ray cluster on this machine, the second node with its own disk -------------------------------

AWAY_NODE = """
import subprocess, sys
from ray._private.node import Node
from ray._private.parameter import RayParams
from ray._private.services import wait_for_node

gcs_address, node_disk, shadowed = sys.argv[1:]
# This process runs in its own mount namespace (unshare -m): here, and in the raylet and Ray workers it starts, the
# driver's out folder is the node's own disk; the driver never sees what is written there.
subprocess.run(["mount", "--make-rprivate", "/"], check=True)
subprocess.run(["mount", "--bind", node_disk, shadowed], check=True)
params = RayParams(
    gcs_address=gcs_address, num_cpus=1, num_gpus=0, object_store_memory=100 * 1024 * 1024, min_worker_port=0,
    max_worker_port=0, include_log_monitor=False, node_manager_port=0, resources={"away": 1},
)
params.dashboard_agent_listen_port = None
node = Node(params, head=False, shutdown_at_exit=True, spawn_reaper=True)
wait_for_node(gcs_address, node.plasma_store_socket_name, 60)  # registered with the cluster
print(node.node_id, flush=True)
sys.stdin.read()  # until the test closes this process's stdin
node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)
"""


def can_unshare() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@contextlib.contextmanager
def two_nodes(out: Path, node_disk: Path, monkeypatch: Any, **away_env: str) -> Iterator[tuple[str, str]]:
    """A Ray cluster of a head node (1 CPU) in this process's namespace and a second node (1 CPU, `away_env` in
    its processes' environment) in its own, where `out` is `node_disk`; yields the address and the second node's
    id, and stops both."""
    import pytest
    from ray.cluster_utils import Cluster

    if not can_unshare():
        pytest.skip("needs unshare -m and mount (root, or a user namespace)")
    out.mkdir()
    node_disk.mkdir()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))  # every Ray worker imports this checkout's rlrun
    handler = signal.getsignal(signal.SIGTERM)  # the head node's own, which its shutdown leaves in this process
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 100 * 1024 * 1024})
    away = subprocess.Popen(
        ["unshare", "-m", sys.executable, "-c", AWAY_NODE, cluster.gcs_address, str(node_disk), str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **away_env},
    )
    try:
        away_id = away.stdout.readline().strip()
        assert len(away_id) == 56, "the second node started"
        yield cluster.address, away_id
    finally:
        away.stdin.close()
        away.wait(timeout=60)
        away.stdout.close()
        cluster.shutdown()
        signal.signal(signal.SIGTERM, handler)


def scalars(run_dir):
    """Tag -> [(step, value)] of the run folder's event files, read the way TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]
    }
