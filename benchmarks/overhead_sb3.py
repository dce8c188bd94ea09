"""SB3 row of `adapter_overhead.py`: PPO's `learn` alone against `rlrun.train`, same env and config."""

from __future__ import annotations

from pathlib import Path

import rlrun
from rlrun.configs import library_config, load_agent_config
from rlrun.envs import make_env
from rlrun.libraries import sb3

TASK = "rlrun/CartPole-v1"
NUM_ENVS, ITERATIONS, SEED = 32, 50, 1
LABEL = f"sb3 ppo, {TASK}, {NUM_ENVS} envs"


def direct(tmp: Path, iterations: int = ITERATIONS) -> None:
    """SB3 alone: rlrun's env behind the SB3 VecEnv; SB3's PPO, logger and checkpoint callback, as a user would."""
    import contextlib

    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import CheckpointCallback
    from stable_baselines3.common.logger import configure

    config = library_config(load_agent_config("sb3", "ppo", TASK))
    env = make_env(TASK, NUM_ENVS)
    try:
        with open(tmp / "console.log", "w") as log, contextlib.redirect_stdout(log):
            vec_env = sb3.Sb3VecEnv(env)
            kwargs = sb3.constructor_kwargs(config, "ppo", vec_env.action_space)
            model = PPO(config["policy"], vec_env, seed=SEED, device="cpu", **kwargs)
            model.set_logger(configure(str(tmp), ["stdout", "tensorboard"]))
            checkpoints = CheckpointCallback(config["save_interval"] * config["n_steps"], str(tmp), "model")
            try:
                model.learn(iterations * config["n_steps"] * NUM_ENVS, callback=checkpoints)
                model.save(tmp / "model.zip")
            finally:
                model.logger.close()
    finally:
        env.close()


def through_rlrun(tmp: Path, iterations: int = ITERATIONS) -> None:
    rlrun.train(
        rlrun.TrainRequest(
            task=TASK, library="sb3", num_envs=NUM_ENVS, max_iterations=iterations, seed=SEED, log_root=str(tmp)
        )
    )
