"""Stable-Baselines3 (`stable-baselines3` 2.x): PPO, A2C, SAC and TD3 on rlrun's torch vector envs.

SB3 works on NumPy `VecEnv`s: `Sb3VecEnv` (`rlrun.libraries.sb3_env`) is one over rlrun's torch vector env
(SAME_STEP autoreset), with SB3's `infos` for the envs whose episode ended.

Process globals: given a seed, SB3's `set_random_seed` reseeds `random`, NumPy and torch and, on CUDA,
sets cuDNN `deterministic=True, benchmark=False`; the scope's guards restore all of them. Importing SB3
adds a warnings filter, which rlrun's import phase drops (the caller's filters stay theirs). Its logger
(the stdout table, which rlrun redirects, and a TensorBoard writer in the run directory) is closed in
`finally`.

Configuration (`rlrun.libraries.sb3_config`): the algorithm's constructor keywords, plus the adapter's own
keys (`policy`, `save_interval`, `noise_type`, `noise_std`), checked before a run starts. `--resume`
continues with the checkpoint's network and the configuration's other hyperparameters.

Iterations (`--max_iterations`): for PPO and A2C, one rollout of `n_steps` steps per env and one update
(Isaac Lab's `n_timesteps = max_iterations * n_steps * num_envs`); for SAC and TD3, one `train_freq`
cycle: `train_freq` steps per env, then `gradient_steps` updates (`train_freq` must count steps, not
episodes).

Checkpoints (`rlrun.libraries.sb3_checkpoints`): SB3's own `.zip` (`model_<iterations>.zip`; a training
stopped early is saved as of its last finished rollout). They are never read back with SB3's `load`, which
unpickles the hyperparameters, spaces and schedules kept in the zip: play, export and `--resume` build the
model from the agent configuration and the task's env, and load the zip's tensors, read with
`weights_only=True`, into it. The exported policy module is `rlrun.libraries.sb3_export`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlrun.hermetic import torch_backend_flags
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome
from rlrun.libraries.sb3_checkpoints import build_model, callback_class, writer
from rlrun.libraries.sb3_checkpoints import check_checkpoint as check_checkpoint  # the adapter's member
from rlrun.libraries.sb3_config import CODE_NAMES as CODE_NAMES  # the adapter's trust table
from rlrun.libraries.sb3_config import algorithm_class, constructor_kwargs
from rlrun.libraries.sb3_config import env_steps_per_iteration as env_steps_per_iteration  # the adapter's member
from rlrun.libraries.sb3_env import vec_env_class
from rlrun.libraries.sb3_export import export_class

IMPORTS = {"torch": ("stable_baselines3", "torch.utils.tensorboard")}
ALGORITHMS = {"ppo": ("Box", "Discrete"), "a2c": ("Box", "Discrete"), "sac": ("Box",), "td3": ("Box",)}
DEFAULT_ALGORITHM = "ppo"
MINIBATCH_KEYS = {"ppo": "batch_size"}
"""PPO's minibatch size, fitted to `--num_envs` unless the user set it (`rlrun.api.fitting`)."""
LOGGERS: tuple[str, ...] = ()
IMAGE_OBSERVATIONS = True
"""SB3 acts on image observations (an Atari task's uint8 frames) with its `CnnPolicy` (RL Zoo's atari entry)."""


# --- the VecEnv (`sb3_env`) ---------------------------------------------------------------------------------


def __getattr__(name: str) -> Any:
    if name == "Sb3VecEnv":  # imports SB3, so only on first use
        return vec_env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- training -----------------------------------------------------------------------------------------------


def _model(job: TrainJob, vec_env: Any) -> Any:
    """Build the algorithm from the configuration; resuming, load `job.resume_from`'s weights, optimiser states
    and counters into it (the configuration's hyperparameters and network, the checkpoint's values)."""
    if job.resume_from is None:
        cls = algorithm_class(job.algorithm)
        kwargs = constructor_kwargs(job.config, job.algorithm, vec_env.action_space)
        return cls(job.config.get("policy", "MlpPolicy"), vec_env, seed=job.seed, device=job.device, **kwargs)
    model = build_model(
        job.resume_from, job.config, job.algorithm, vec_env, device=job.device, seed=job.seed, play=False
    )
    model.set_random_seed(job.seed)  # the RNGs as a fresh training's start, whatever building the model drew
    return model


def train(job: TrainJob) -> TrainOutcome:
    """Run the algorithm's `learn` for `job.max_iterations` iterations, checkpointing atomically."""
    from stable_baselines3.common.logger import configure

    # SB3's own policy: torch's default TF32 settings (matmul off, cuDNN on), and the cuDNN flags its
    # seeding sets on CUDA (deterministic, no autotuning), on every device; no TF32 when asked to be deterministic.
    torch_backend_flags(
        matmul_allow_tf32=False, cudnn_allow_tf32=not job.deterministic, deterministic=True, benchmark=False
    )
    vec_env = vec_env_class()(job.env, clip_reward=bool(job.config.get("clip_reward", False)))
    model = _model(job, vec_env)
    saved: list[Path] = []

    def save(iterations: int) -> None:
        saved.append(job.save_checkpoint(f"model_{iterations}.zip", writer(model), iterations))

    checkpoints = callback_class()(save, int(job.config.get("save_interval", 50)), job.resume_iteration)
    logger = configure(str(job.run_dir), ["stdout", "tensorboard"])
    try:
        model.set_logger(logger)
        try:
            model.learn(
                total_timesteps=job.max_iterations * env_steps_per_iteration(job.config, vec_env.num_envs),
                callback=checkpoints,
                reset_num_timesteps=job.resume_from is None,
            )
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or a stop request: keep the model as it is
            if checkpoints.iterations > 0:  # named by the iterations whose rollout ended (their update ran)
                try:
                    save(checkpoints.iterations)
                except BaseException as failure:  # a failed write or a second Ctrl-C: the stop goes on
                    stop.add_note(f"rlrun: the checkpoint at the stop was not saved: {failure!r}")
            raise
        save(checkpoints.iterations)
    finally:
        logger.close()  # SB3 never closes it: TensorBoard's writer thread would stay
    return TrainOutcome(iterations=checkpoints.iterations, checkpoint=saved[-1])


# --- playing ------------------------------------------------------------------------------------------------


def load_policy(job: PlayJob) -> Policy:
    """Build the model with the checkpoint's weights loaded (`build_model`) and return its `predict` on torch
    tensors."""
    import torch

    vec_env = vec_env_class()(job.env)
    model = build_model(job.checkpoint, job.config, job.algorithm, vec_env, device=job.device, seed=None, play=True)
    deterministic = job.deterministic

    def policy(observations: Any) -> Any:
        actions, _ = model.predict(observations.detach().cpu().numpy(), deterministic=deterministic)
        return torch.as_tensor(actions, device=observations.device)

    return policy


# --- export -------------------------------------------------------------------------------------------------


def export_policy(job: PlayJob) -> Any:
    """The model's deterministic policy on the CPU, as `predict(deterministic=True)` computes it before clipping."""
    vec_env = vec_env_class()(job.env)
    model = build_model(job.checkpoint, job.config, job.algorithm, vec_env, device="cpu", seed=None, play=True)
    return export_class()(model.policy, job.algorithm, model.action_space)
