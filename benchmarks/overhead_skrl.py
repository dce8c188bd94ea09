"""SKRL (PyTorch) row of `adapter_overhead.py`: SKRL's own `Runner` alone against `rlrun.train`, same env and config."""

from __future__ import annotations

from pathlib import Path

import rlrun
from rlrun.configs import library_config, load_agent_config
from rlrun.envs import make_env
from rlrun.libraries import skrl

TASK = "rlrun/CartPole-v1"
FRAMEWORK = "torch"
NUM_ENVS, ITERATIONS, SEED = 64, 15, 1
LABEL = f"skrl ppo ({FRAMEWORK}), {TASK}, {NUM_ENVS} envs"


def direct(tmp: Path, iterations: int = ITERATIONS, framework: str = FRAMEWORK) -> None:
    """The library alone: rlrun's env in the adapter's SKRL wrapper, SKRL's `Runner` on the same configuration."""
    import contextlib

    import skrl as library  # noqa: F401 (for JAX, the adapter's wrapper sets the imported SKRL's device)
    import tqdm

    config = library_config(load_agent_config("skrl", "ppo", TASK))
    env = make_env(TASK, NUM_ENVS)
    wrapped = skrl.wrap_env(env, framework, "cpu", SEED)
    timesteps = iterations * skrl.timesteps_per_iteration(config)
    config = skrl.runner_config(
        config, seed=SEED, timesteps=timesteps, run_dir=tmp / "run", action_space=wrapped.action_space
    )
    runner = None
    try:
        with open(tmp / "console.log", "w") as log, contextlib.redirect_stdout(log):
            runner = skrl.make_runner(wrapped, config, framework)
            runner.run("train")
    finally:
        writer = getattr(getattr(runner, "agent", None), "writer", None)
        if writer is not None:
            writer.close()
        if tqdm.tqdm.monitor is not None:
            tqdm.tqdm.monitor.exit()
            tqdm.tqdm.monitor = None
        env.close()


def through_rlrun(tmp: Path, iterations: int = ITERATIONS, framework: str = FRAMEWORK) -> None:
    rlrun.train(
        rlrun.TrainRequest(
            task=TASK,
            library="skrl",
            ml_framework=framework,
            num_envs=NUM_ENVS,
            max_iterations=iterations,
            seed=SEED,
            log_root=str(tmp),
        )
    )
