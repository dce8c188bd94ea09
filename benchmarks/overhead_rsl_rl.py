"""RSL-RL row of `adapter_overhead.py`: `OnPolicyRunner` alone against `rlrun.train`, same env and config."""

from __future__ import annotations

from pathlib import Path

import rlrun
from rlrun.configs import library_config, load_agent_config
from rlrun.envs import make_env
from rlrun.libraries import rsl_rl

TASK = "rlrun/CartPoleContinuous-v1"
NUM_ENVS, ITERATIONS, SEED = 512, 25, 1
LABEL = f"rsl_rl ppo, {TASK}, {NUM_ENVS} envs"


def direct(tmp: Path, iterations: int = ITERATIONS) -> None:
    """The library alone: rlrun's env, RSL-RL's runner, as a user would write it (console to a file, as rlrun)."""
    import contextlib

    import torch
    from rsl_rl.runners import OnPolicyRunner

    torch.manual_seed(SEED)
    config = library_config(load_agent_config("rsl_rl", "ppo", TASK))
    env = make_env(TASK, NUM_ENVS)
    runner = None
    try:
        with open(tmp / "console.log", "w") as log, contextlib.redirect_stdout(log):  # the runner prints its model
            runner = OnPolicyRunner(rsl_rl.RslRlVecEnv(env, config, SEED), config, log_dir=str(tmp), device="cpu")
            runner.learn(num_learning_iterations=iterations)
    finally:
        if runner is not None:
            runner.logger.writer.close()
        env.close()


def through_rlrun(tmp: Path, iterations: int = ITERATIONS) -> None:
    rlrun.train(
        rlrun.TrainRequest(
            task=TASK, library="rsl_rl", num_envs=NUM_ENVS, max_iterations=iterations, seed=SEED, log_root=str(tmp)
        )
    )
