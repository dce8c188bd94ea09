"""TorchRL (`torchrl` 0.14 with `tensordict` 0.14): its `PPOTrainer` and `SACTrainer` on rlrun's torch vector envs.

The trainers are TorchRL's own (`torchrl.trainers.algorithms`), built from keyword arguments without
Hydra: a `Collector` over `TorchRLVecEnv` (rlrun's env behind TorchRL's `EnvBase`, see
`rlrun.libraries.torchrl_env`), a `ClipPPOLoss` (GAE from the trainer's own hook) or `SACLoss` with a
`SoftUpdate`, one Adam optimiser, and a `ReplayBuffer` over a `LazyTensorStorage` (never a memory-mapped
one: TorchRL's memmap storage installs SIGINT/SIGTERM handlers and an atexit hook). PPO acts in Box
(Gaussian, clipped by the env wrapper) and Discrete (categorical) spaces, SAC in Box (tanh-Gaussian).

Iterations (`--max_iterations`): one collector batch of `steps_per_env` steps of every env, then the
trainer's update for it: PPO's `num_epochs` passes over it in minibatches of `minibatch_size`, SAC's
`updates_per_iteration` gradient steps on replay samples (none during the first `learning_starts` env
steps, rounded up to whole iterations, which a uniform random policy collects).

Process globals: TorchRL and tensordict keep their settings in module globals (`set_exploration_type`,
`set_lazy_legacy`, `set_list_to_stack`, `set_composite_lp_aggregate`, `set_auto_unwrap_transformed_env`,
...), several mirrored into `os.environ`. The collector switches the exploration (interaction) type in
context managers; every one of these settings is guarded here (`owner="torchrl"`), values measured on the
installed versions in docs/torchrl.md. TorchRL's C++ extension does not load on torch 2.13 (an undefined
symbol); nothing used here needs it. The trainers' "experimental feature" warning is silenced at
construction; the trainer's tqdm bar, logger and own checkpointing are off; the collector is shut down in
`finally`.

Checkpoints: `model_<iterations>.pt`, a plain dict of tensors and numbers (`torch.load(weights_only=True)`):
the loss module's state (policy, value or Q networks, their targets, SAC's temperature), the optimiser's
state, the iteration and optimisation-step counters. `--resume` continues all of them; SAC's replay buffer
is not saved and refills from the resumed policy.

The agent (networks, loss module, optimiser, checkpoint contents) is `rlrun.libraries.torchrl_agent`'s;
the env as TorchRL sees it is `rlrun.libraries.torchrl_env`'s; the configuration's checks are
`rlrun.libraries.torchrl_config`'s, the trainer `rlrun.libraries.torchrl_trainer`'s and the exported policy
module `rlrun.libraries.torchrl_export`'s.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rlrun.hermetic import MISSING, Guard, module_loaded, register, torch_backend_flags
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome
from rlrun.libraries.torchrl_agent import Agent, read_checkpoint
from rlrun.libraries.torchrl_config import CODE_NAMES as CODE_NAMES  # the adapter's trust table
from rlrun.libraries.torchrl_config import env_steps_per_iteration as env_steps_per_iteration  # the adapter's member
from rlrun.libraries.torchrl_export import export_class
from rlrun.libraries.torchrl_trainer import make_trainer

IMPORTS = {
    "torch": (
        "tensordict",
        "tensordict.nn",
        "torchrl",
        "torchrl.envs",
        "torchrl.collectors",
        "torchrl.data",
        "torchrl.modules",
        "torchrl.objectives",
        "torchrl.trainers",
        "torchrl.trainers.algorithms",
    )
}
ALGORITHMS = {"ppo": ("Box", "Discrete"), "sac": ("Box",)}
DEFAULT_ALGORITHM = "ppo"
MINIBATCH_KEYS = {"ppo": "minibatch_size"}
"""PPO's minibatch size, fitted to `--num_envs` unless the user set it (`rlrun.api.fitting`)."""
LOGGERS: tuple[str, ...] = ("torchrl",)


# --- guards: tensordict's and TorchRL's process-wide settings -------------------------------------------------

Setting = tuple[str, str]
"""(module, attribute path): a module global, or the `_mode` of one of tensordict's `_ContextManager` objects."""

INTERACTION_TYPE: tuple[Setting, ...] = (("tensordict.nn.probabilistic", "_interaction_type._mode"),)
TENSORDICT_OPTIONS: tuple[Setting, ...] = (
    ("tensordict._utils_options", "_LAZY_OP"),
    ("tensordict._utils_options", "_LIST_TO_STACK"),
    ("tensordict._utils_options", "_CAPTURE_NONTENSOR_STACK"),
    ("tensordict._utils_options", "_REPR_OPTIONS"),
)
TENSORDICT_NN_MODES: tuple[Setting, ...] = (
    ("tensordict.nn.utils", "_composite_lp_aggregate._mode"),
    ("tensordict.nn.utils", "_skip_existing._mode"),
    ("tensordict.nn.utils", "_dispatch_tdnn_modules._mode"),
    ("tensordict.nn.utils", "_MAPPINGS"),
)
TORCHRL_OPTIONS: tuple[Setting, ...] = (
    ("torchrl._utils", "_AUTO_UNWRAP"),
    ("torchrl.envs.transforms._base", "_AUTO_UNWRAP_WARNING_EMITTED"),
    ("torchrl.modules.tensordict_module._rnn_precision", "_GLOBAL_OVERRIDE"),
    ("torchrl._utils", "_PROFILING_ENABLED"),
)


def _split(path: str) -> tuple[tuple[str, ...], str]:
    """`a.b.c` -> (("a", "b"), "c"): the attributes leading to the setting's owner, and its own name."""
    *parents, name = path.split(".")
    return tuple(parents), name


def _settings_guard(name: str, doc: str, settings: tuple[Setting, ...]) -> Guard:
    """Guard module-level settings: each value is put back (the same object); a dict also gets its entries back."""
    # (setting, module, the attributes leading to the owner, the attribute): split once, not at every call.
    paths = [(setting, setting[0], *_split(setting[1])) for setting in settings]

    def owner(module: str, parents: tuple[str, ...]) -> Any:
        target = sys.modules[module]
        for parent in parents:
            target = getattr(target, parent)
        return target

    def capture() -> dict[Setting, tuple[Any, Any]]:
        saved = {}
        for setting, module, parents, attribute in paths:
            value = getattr(owner(module, parents), attribute, MISSING)
            saved[setting] = value, dict(value) if isinstance(value, dict) else None
        return saved

    def restore(saved: dict[Setting, tuple[Any, Any]]) -> None:
        for setting, module, parents, attribute in paths:
            value, contents = saved[setting]
            target = owner(module, parents)
            if getattr(target, attribute, MISSING) is not value:
                if value is MISSING:
                    delattr(target, attribute)
                else:
                    setattr(target, attribute, value)
            if contents is not None and (
                value.keys() != contents.keys() or any(value[k] is not contents[k] for k in value)
            ):
                value.clear()
                value.update(contents)

    def fingerprint(saved: dict[Setting, tuple[Any, Any]]) -> dict[str, Any]:
        return {
            f"{module}.{path}": repr(value)
            if contents is None
            else (id(value), {k: id(v) for k, v in contents.items()})
            for (module, path), (value, contents) in saved.items()
        }

    return Guard(
        name,
        doc,
        capture,
        restore,
        fingerprint=fingerprint,
        category="torchrl",
        available=module_loaded(*dict.fromkeys(module for module, _ in settings)),
        owner="torchrl",
    )


register(
    _settings_guard(
        "tensordict interaction type",
        "tensordict's interaction type, which TorchRL's `set_exploration_type` sets (the collector switches it to "
        "`RANDOM` while it collects): put back as it was.",
        INTERACTION_TYPE,
    )
)
register(
    _settings_guard(
        "tensordict options",
        "tensordict's `set_lazy_legacy`, `set_list_to_stack` and `set_capture_non_tensor_stack` switches (their "
        "`os.environ` mirrors are the environment guard's) and its print options: values and entries put back.",
        TENSORDICT_OPTIONS,
    )
)
register(
    _settings_guard(
        "tensordict.nn modes",
        "tensordict.nn's composite log-prob aggregation (`set_composite_lp_aggregate`), `set_skip_existing`, "
        "module dispatch and custom scale mappings (`add_custom_mapping`): values and entries put back.",
        TENSORDICT_NN_MODES,
    )
)
register(
    _settings_guard(
        "torchrl options",
        "TorchRL's `set_auto_unwrap_transformed_env` switch and its warned-once flag, the recurrent matmul precision "
        "override (`set_recurrent_matmul_precision`) and the profiling switch: put back as they were.",
        TORCHRL_OPTIONS,
    )
)


# --- checkpoints ----------------------------------------------------------------------------------------------


def check_checkpoint(path: Path) -> None:
    """Load the file with `weights_only=True` and check it holds rlrun's TorchRL agent state."""
    read_checkpoint(path)


# --- training -------------------------------------------------------------------------------------------------


def train(job: TrainJob) -> TrainOutcome:
    """Run TorchRL's trainer for `job.max_iterations` iterations, checkpointing atomically."""
    import torch

    from rlrun.libraries.torchrl_env import env_class

    # torch's defaults (TorchRL sets none): matmul TF32 off, cuDNN TF32 on unless deterministic, no autotuning.
    torch_backend_flags(
        matmul_allow_tf32=False,
        cudnn_allow_tf32=not job.deterministic,
        deterministic=job.deterministic,
        benchmark=False,
    )
    agent = Agent(job.algorithm, job.env, job.config, job.device)
    iteration, optim_steps = job.resume_iteration, 0
    if job.resume_from is not None:
        state = agent.load(job.resume_from, job.device, optimizer=True)
        iteration, optim_steps = int(state["iteration"]), int(state.get("optim_steps", 0))
    env = env_class()(job.env, seed=job.seed)
    trainer = make_trainer(job, env, agent, iteration)
    trainer._optim_count = optim_steps
    counter = {"iteration": iteration}
    saved: list[Path] = []
    save_interval = int(job.config.get("save_interval", 50))

    def save() -> None:
        count = counter["iteration"]
        state = agent.state(count, int(trainer._optim_count))
        saved.append(job.save_checkpoint(f"model_{count}.pt", lambda path: torch.save(state, path), count))

    def iteration_done() -> None:  # after the trainer's update of the batch and the collector's weight update
        counter["iteration"] += 1
        if counter["iteration"] % save_interval == 0:
            save()

    trainer.register_op("post_steps", iteration_done)
    try:
        try:
            trainer.train()
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or a stop request: keep the agent as it is
            if counter["iteration"] > iteration:  # numbered by the last iteration whose update ran
                try:
                    save()
                except BaseException as failure:  # a failed write or a second Ctrl-C: the stop goes on
                    stop.add_note(f"rlrun: the checkpoint at the stop was not saved: {failure!r}")
            raise
        if not saved or saved[-1].name != f"model_{counter['iteration']}.pt":
            save()
    finally:
        trainer.collector.shutdown()
    return TrainOutcome(iterations=counter["iteration"], checkpoint=saved[-1] if saved else None)


# --- playing and export ---------------------------------------------------------------------------------------


def _loaded_agent(job: PlayJob, device: str) -> Agent:
    agent = Agent(job.algorithm or DEFAULT_ALGORITHM, job.env, job.config, device)
    agent.load(job.checkpoint, device, optimizer=False)
    return agent


def load_policy(job: PlayJob) -> Policy:
    """Rebuild the agent, load the checkpoint and return its actor on torch tensors: TorchRL's deterministic
    action (the mean, the most likely category) or a sample, clipped to a Box."""
    import torch
    from tensordict import TensorDict
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    agent = _loaded_agent(job, job.device)
    actor = agent.actor.eval()
    mode = ExplorationType.DETERMINISTIC if job.deterministic else ExplorationType.RANDOM

    def policy(observations: Any) -> Any:
        data = TensorDict({"observation": observations}, batch_size=observations.shape[:1])
        with torch.no_grad(), set_exploration_type(mode):
            actions = actor(data)["action"]
        if agent.discrete:
            return actions
        return torch.clamp(actions, agent.low, agent.high)

    return policy


def export_policy(job: PlayJob) -> Any:
    """The deterministic actor as a plain module on the CPU: the MLP, then the Gaussian's mean (PPO), the
    tanh-Gaussian's mean scaled to the bounds (SAC) or the most likely category (Discrete)."""
    agent = _loaded_agent(job, "cpu")
    return export_class()(agent)
