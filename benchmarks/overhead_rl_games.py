"""rl_games row of `adapter_overhead.py`: rl_games' own `Runner` against `rlrun.train`, same env and config."""

from __future__ import annotations

from pathlib import Path

import rlrun
from rlrun.configs import library_config, load_agent_config
from rlrun.envs import make_env
from rlrun.libraries import rl_games

TASK = "rlrun/CartPole-v1"
NUM_ENVS, ITERATIONS, SEED = 128, 45, 1
LABEL = f"rl_games ppo, {TASK}, {NUM_ENVS} envs"


def direct(tmp: Path, iterations: int = ITERATIONS) -> None:
    """The library alone: rlrun's env behind an `IVecEnv`, rl_games' `Runner`, as a user would write it."""
    import contextlib

    import torch
    from rl_games.torch_runner import Runner

    torch.manual_seed(SEED)
    params = library_config(load_agent_config("rl_games", "ppo", TASK))["params"]
    env = make_env(TASK, NUM_ENVS)
    vec_env = rl_games.RlGamesVecEnv(env, SEED)
    params["seed"] = SEED
    params["config"].update(
        env_name="rlrun",
        env_info=vec_env.get_env_info(),
        vec_env=vec_env,
        num_actors=NUM_ENVS,
        device="cpu",
        train_dir=str(tmp),
        max_epochs=iterations,
    )
    runner = Runner()
    try:
        with open(tmp / "console.log", "w") as log, contextlib.redirect_stdout(log):
            runner.load_config(params)  # not `Runner.load`, which deep-copies the env with the configuration
            runner.run_train({"train": True, "play": False})
    finally:
        runner.algo_observer.writer.close()
        env.close()


def through_rlrun(tmp: Path, iterations: int = ITERATIONS) -> None:
    rlrun.train(
        rlrun.TrainRequest(
            task=TASK, library="rl_games", num_envs=NUM_ENVS, max_iterations=iterations, seed=SEED, log_root=str(tmp)
        )
    )
