"""TorchRL row of `adapter_overhead.py`: TorchRL's own `PPOTrainer` alone against `rlrun.train`, same env and config.

The direct side builds what `rlrun.libraries.torchrl` builds for PPO, with TorchRL's API as a user would
write it: the adapter's agent modules (`Agent`: actor, `ClipPPOLoss` with its critic, Adam) and env
wrapper (`TorchRLVecEnv`), a synchronous `Collector`, a `ReplayBuffer` over a `LazyTensorStorage` sampled
without replacement, the linear learning-rate schedule, and `PPOTrainer` with its logger, progress bar and
own checkpointing off; the final weights are saved with `torch.save`.
"""

from __future__ import annotations

from pathlib import Path

import rlrun
from rlrun.configs import library_config, load_agent_config
from rlrun.envs import make_env
from rlrun.libraries import torchrl

TASK = "rlrun/CartPole-v1"
NUM_ENVS, ITERATIONS, SEED = 32, 45, 1
LABEL = f"torchrl ppo, {TASK}, {NUM_ENVS} envs"


def direct(tmp: Path, iterations: int = ITERATIONS) -> None:
    """TorchRL alone: rlrun's env behind TorchRL's `EnvBase`, TorchRL's collector, buffer and `PPOTrainer`."""
    import warnings

    import torch
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer, RoundRobinWriter
    from torchrl.data.replay_buffers import SamplerWithoutReplacement
    from torchrl.trainers.algorithms import PPOTrainer

    from rlrun.libraries.torchrl_env import env_class

    torch.manual_seed(SEED)
    config = library_config(load_agent_config("torchrl", "ppo", TASK))
    env = make_env(TASK, NUM_ENVS)
    agent = torchrl.Agent("ppo", env, config, "cpu")
    batch = int(config["steps_per_env"]) * NUM_ENVS
    collector = Collector(
        env_class()(env, seed=SEED),
        agent.actor,
        frames_per_batch=batch,
        total_frames=iterations * batch,
        device="cpu",
        auto_register_policy_transforms=False,
    )
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(batch, device="cpu", compilable=True),
        sampler=SamplerWithoutReplacement(),
        writer=RoundRobinWriter(compilable=True),
        batch_size=int(config["minibatch_size"]),
    )
    schedule = None
    if config.get("lr_schedule", "constant") == "linear":
        schedule = torch.optim.lr_scheduler.LambdaLR(agent.optimizer, lambda step: max(0.0, 1.0 - step / iterations))
    try:
        with warnings.catch_warnings():  # "PPOTrainer is an experimental/prototype feature"
            warnings.filterwarnings("ignore", message=".*experimental/prototype feature", category=UserWarning)
            # TorchRL 0.14's own hook registrations warn of their replacement; rlrun's side writes the same
            # warnings to the run's console.log, and here they would fill the benchmark's output.
            warnings.filterwarnings(
                "ignore", message=".*will be replaced by OptimizationStepper", category=FutureWarning
            )
            trainer = PPOTrainer(
                collector=collector,
                total_frames=iterations * batch,
                frame_skip=1,
                loss_module=agent.loss,
                optimizer=agent.optimizer,
                logger=None,
                clip_grad_norm=True,
                clip_norm=float(config["max_grad_norm"]),
                progress_bar=False,
                seed=None,
                save_trainer_file=None,
                enable_logging=False,
                auto_log_optim_steps=False,
                optim_steps_per_batch=None,
                num_epochs=int(config["num_epochs"]),
                replay_buffer=buffer,
                gamma=float(config["gamma"]),
                lmbda=float(config["lmbda"]),
                lr_scheduler=schedule,
            )
        trainer.train()
        torch.save(agent.state(iterations, int(trainer._optim_count)), tmp / f"model_{iterations}.pt")
    finally:
        collector.shutdown()
        env.close()


def through_rlrun(tmp: Path, iterations: int = ITERATIONS) -> None:
    rlrun.train(
        rlrun.TrainRequest(
            task=TASK, library="torchrl", num_envs=NUM_ENVS, max_iterations=iterations, seed=SEED, log_root=str(tmp)
        )
    )
