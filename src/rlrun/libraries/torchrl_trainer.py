"""TorchRL's own `PPOTrainer` or `SACTrainer` for one run, built from keyword arguments without Hydra.

A synchronous `Collector` over the env, the agent's loss module and optimiser, and a `ReplayBuffer` over a
`LazyTensorStorage` (never a memory-mapped one: TorchRL's memmap storage installs SIGINT/SIGTERM handlers and
an atexit hook). The trainer's tqdm bar, logger and own checkpointing are off, and its "experimental feature"
warning is silenced at construction. TorchRL and torch are imported inside the function.
"""

from __future__ import annotations

import warnings
from typing import Any

from rlrun.libraries.base import TrainJob
from rlrun.libraries.torchrl_agent import Agent
from rlrun.libraries.torchrl_config import env_steps_per_iteration


def make_trainer(job: TrainJob, env: Any, agent: Agent, first_iteration: int) -> Any:
    """TorchRL's `PPOTrainer` or `SACTrainer` over a synchronous `Collector`, without Hydra."""
    import torch
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer, RoundRobinWriter
    from torchrl.data.replay_buffers import RandomSampler, SamplerWithoutReplacement
    from torchrl.trainers import ReplayBufferTrainer
    from torchrl.trainers.algorithms import PPOTrainer, SACTrainer

    config = job.config
    batch = env_steps_per_iteration(config, env.batch_size[0])
    total = job.max_iterations * batch
    ppo = job.algorithm == "ppo"
    # SAC's warm-up in whole iterations (the collector warns about a part of one), minus what a parent run did.
    warm_up = -(-int(config.get("learning_starts", 0)) // batch) if not ppo else 0
    learning_starts = max(0, warm_up - first_iteration) * batch
    collector = Collector(
        env,
        agent.actor,
        frames_per_batch=batch,
        total_frames=total,
        init_random_frames=learning_starts or None,
        device=job.device,
        auto_register_policy_transforms=False,
    )
    common = {
        "collector": collector,
        "total_frames": total,
        "frame_skip": 1,
        "loss_module": agent.loss,
        "optimizer": agent.optimizer,
        "logger": None,
        "clip_grad_norm": True,
        "clip_norm": float(config["max_grad_norm"]) if config.get("max_grad_norm") is not None else None,
        "progress_bar": False,
        "seed": None,
        "save_trainer_file": None,
        "enable_logging": False,
        "auto_log_optim_steps": False,
    }
    # Replay buffers are built `compilable`: their storage's and writer's counters are then tensors and ints, not
    # `multiprocessing.Value`s, whose locks are named semaphores that start multiprocessing's resource tracker
    # (a child process and a pipe that outlive the call) and whose shared memory holds a file descriptor.
    with warnings.catch_warnings():  # "PPOTrainer is an experimental/prototype feature", at every construction
        warnings.filterwarnings("ignore", message=".*experimental/prototype feature", category=UserWarning)
        if ppo:
            minibatch = int(config["minibatch_size"])
            buffer = ReplayBuffer(
                storage=LazyTensorStorage(batch, device=job.device, compilable=True),
                sampler=SamplerWithoutReplacement(),
                writer=RoundRobinWriter(compilable=True),
                batch_size=minibatch,
            )
            lr_scheduler = None
            if config.get("lr_schedule", "constant") == "linear":  # to 0 at the last iteration; a resumed run
                start, horizon = first_iteration, first_iteration + job.max_iterations  # goes on over the new total
                lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                    agent.optimizer, lambda step: max(0.0, 1.0 - (start + step) / horizon)
                )
            return PPOTrainer(
                **common,
                # Each epoch runs until the sampler has handed out every minibatch once. A fixed count would
                # leave the sampler's iterator one step short of its StopIteration, and the next epoch would
                # then end at its first step: every other epoch skipped (TorchRL 0.14's ReplayBufferTrainer).
                optim_steps_per_batch=None,
                num_epochs=int(config["num_epochs"]),
                replay_buffer=buffer,
                gamma=float(config.get("gamma", 0.99)),
                lmbda=float(config.get("lmbda", 0.95)),
                lr_scheduler=lr_scheduler,
            )
        from torchrl.objectives import SoftUpdate

        trainer = SACTrainer(
            **common,
            optim_steps_per_batch=int(config.get("updates_per_iteration", 1)),
            replay_buffer=None,  # registered below, so that warm-up batches are stored too
            target_net_updater=SoftUpdate(agent.loss, tau=float(config.get("tau", 0.005))),
        )
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(int(config.get("buffer_size", 100_000)), device=job.device, compilable=True),
        sampler=RandomSampler(),
        writer=RoundRobinWriter(compilable=True),
        batch_size=int(config.get("batch_size", 256)),
    )
    # TorchRL's standard hook: every collected batch goes into the buffer (SACTrainer's own registration
    # extends it only in the update, so that the batches collected before `learning_starts` would be lost).
    ReplayBufferTrainer(buffer, flatten_tensordicts=True, device=job.device).register(trainer)
    return trainer
