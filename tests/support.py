"""Test helpers: a task that changes every guarded global like a careless library, then fails on request;
the order-independence check every library's tests run.

`rlrun_test/Meddling-v0` is rlrun's Pendulum with three extra constructor arguments (so they can be set
with `env.meddle_at=...` overrides like any task keyword):
- `meddle_at`: at this step, change every global the hermetic scope guards (argv in place *and* rebound,
  environment, cwd, sys.path, warnings, logging, SIGINT, atexit, RNGs, torch flags, ...);
- `fail_at`: at this step, also change the globals that would break a training still running
  (default dtype, grad mode, anomaly mode), then raise `failure`;
- `failure`: `RuntimeError`, `KeyboardInterrupt` or `SystemExit`.
Everything it does happens after the library has built its runner and started training.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch

from rlrun.envs import register_task
from rlrun.envs.pendulum import PendulumVectorEnv

MEDDLING_TASK = "rlrun_test/Meddling-v0"
FAILURE_MESSAGE = "the environment exploded on purpose"


class EnvironmentExploded(RuntimeError):
    """The exception the meddling env raises; tests check it reaches the caller unchanged."""


def meddle() -> None:
    """Change every global the scope restores, each in the way a library could."""
    sys.argv.append("--meddled")  # in place, like skrl's Isaac Lab loader
    sys.argv = ["meddler", "--rebound"]  # rebound, like Hydra's set_hydra_args
    os.environ["RLRUN_TEST_ADDED"] = "added"
    os.environ["RLRUN_TEST_SENTINEL"] = "changed"
    os.environ.pop("RLRUN_TEST_DELETED", None)
    os.environ["PYTHONHASHSEED"] = "42"
    os.chdir("/")
    sys.path.insert(0, "/meddled")
    warnings.simplefilter("ignore")
    warnings.filters = list(warnings.filters)
    logging.getLogger().setLevel(logging.DEBUG)
    logging.getLogger().addHandler(logging.NullHandler())
    logging.getLogger("rlrun_test.meddler").addHandler(logging.NullHandler())
    logging.getLogger("rlrun_test.meddler").setLevel(logging.DEBUG)
    signal.signal(signal.SIGINT, lambda number, frame: None)
    signal.signal(signal.SIGTERM, lambda number, frame: None)
    atexit.register(lambda: None)
    multiprocessing.set_start_method("spawn", force=True)
    random.seed(123)
    np.random.seed(123)
    np.seterr(all="ignore")
    np.set_printoptions(precision=2)
    torch.manual_seed(123)
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic = not torch.backends.cudnn.deterministic
    torch.set_num_threads(1 if torch.get_num_threads() != 1 else 2)
    torch.set_printoptions(precision=2, sci_mode=True)
    sys.setrecursionlimit(sys.getrecursionlimit() + 7)
    gymnasium.register("rlrun_test/RegisteredByMeddler-v0", entry_point="gymnasium.envs.classic_control:PendulumEnv")


def meddle_fatally() -> None:
    """Change the globals that would break a training still running."""
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.set_anomaly_enabled(True)


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
}
"""The libraries (and frameworks) the hermetic contract tests run, one small configuration each."""


SHORT_RUNS = {
    "rsl_rl": ("agent.num_steps_per_env=8",),
    "skrl": ("agent.agent.rollouts=8", "agent.agent.mini_batches=2"),
    "sb3": ("agent.n_steps=8", "agent.batch_size=32", "agent.save_interval=1"),
    "rl_games": ("agent.params.config.horizon_length=8", "agent.params.config.minibatch_size=32"),
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
