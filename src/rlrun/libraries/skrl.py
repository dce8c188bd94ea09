"""SKRL (`skrl` 2.1.x) on PyTorch and on JAX: its own `Runner` on rlrun's torch vector envs.

The agent configuration is SKRL's runner configuration; the algorithm is `agent.class`. What rlrun fills
in for the run (seed, timesteps, experiment directory, a categorical policy for Discrete actions) is
`rlrun.libraries.skrl_config`'s.

What a call changes and how it is put back: `set_seed` (run by the `Runner`) writes `PYTHONHASHSEED`,
cuDNN `benchmark`/`deterministic` and reseeds `random`, NumPy and torch (restored by rlrun's generic
guards), and writes the PRNG keys of `skrl.config.torch/jax/warp`; the JAX path also sets
`skrl.config.jax.device`. Every attribute of those three objects is guarded here (read with `vars()`,
so no property imports jax), and so are JAX's config values. SKRL never closes its TensorBoard
writer, and tqdm (its progress bar) starts a monitor thread: both are closed in `finally`. A JAX call
compiles through JAX's persistent compilation cache in rlrun's cache folder, so that calls after the first
on a machine load SKRL's executables instead of compiling them, and later calls in the same process take the
executables the latest one loaded from memory (`rlrun.libraries.skrl_jax_cache`, which also guards the cache's
globals); at its end it lets go of what JAX's in-memory caches hold of its agent
(`rlrun.libraries.skrl_jax_traces`).

Checkpoints (`<run>/checkpoints/agent_<timestep>.pt` or `.pickle`, read once as data and loaded into the agent
without SKRL's loader of a path) are `rlrun.libraries.skrl_checkpoints`'s; the env as SKRL sees it is
`rlrun.libraries.skrl_env`'s; the exported policy module is `rlrun.libraries.skrl_export`'s.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from rlrun.hermetic import attributes_guard, register, torch_backend_flags
from rlrun.hermetic.registry import Guard, module_loaded
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome
from rlrun.libraries.skrl_checkpoints import CheckpointWriter, load_checkpoint, read_checkpoint
from rlrun.libraries.skrl_checkpoints import check_checkpoint as check_checkpoint  # the adapter's member
from rlrun.libraries.skrl_config import CODE_NAMES as CODE_NAMES  # the adapter's trust tables
from rlrun.libraries.skrl_config import CODE_SOURCE as CODE_SOURCE
from rlrun.libraries.skrl_config import hand_over, runner_config, timesteps_per_iteration
from rlrun.libraries.skrl_env import wrap_env
from rlrun.libraries.skrl_export import export_class
from rlrun.libraries.skrl_jax_cache import use_persistent_cache
from rlrun.libraries.skrl_jax_traces import forget_jax_traces, skrl_jitted_functions

IMPORTS = {
    "torch": (
        "tqdm",
        "rlrun.libraries.tqdm_lock",
        "tensorboard.summary.writer.event_file_writer",
        "skrl",
        "skrl.utils",
        "skrl.envs.wrappers.torch",
        "skrl.utils.runner.torch",
    ),
    "jax": (
        "jax",
        "flax",
        "optax",
        "tqdm",
        "rlrun.libraries.tqdm_lock",
        "tensorboard.summary.writer.event_file_writer",
        "skrl",
        "skrl.utils",
        "skrl.envs.wrappers.jax",
        "skrl.utils.runner.jax",
    ),
}
ALGORITHMS = {"ppo": ("Box", "Discrete"), "sac": ("Box",)}
LOGGERS = ("skrl",)
DEFAULT_ALGORITHM = "ppo"

# --- guards: SKRL's configuration singleton and JAX's configuration ------------------------------------------


def _skrl_config(framework: str) -> Any:
    return getattr(sys.modules["skrl"].config, framework)


for _framework in ("torch", "jax", "warp"):
    register(
        attributes_guard(
            f"skrl.config.{_framework}",
            functools.partial(_skrl_config, _framework),
            doc=f"Every attribute of `skrl.config.{_framework}` (PRNG key, device, distributed settings), read "
            "with `vars()`; added attributes are deleted, changed ones get their original object back.",
            category="skrl",
            available=module_loaded("skrl"),
            owner="skrl",
        )
    )


def _jax_config_values() -> dict[str, Any]:
    return sys.modules["jax"].config.values  # a new dict on every read


def _restore_jax_config(saved: dict[str, Any]) -> None:
    config = sys.modules["jax"].config
    current = config.values  # rebuilt from every option on each read: read it once
    if current == saved:  # compared in C: the usual case, nothing changed
        return
    for name, value in saved.items():
        if current.get(name) != value:
            config.update(name, value)


register(
    Guard(
        "jax.config values",
        "Every value of `jax.config` (x64, platforms, default device, matmul precision, ...); changed ones are "
        "put back with `jax.config.update`.",
        _jax_config_values,
        _restore_jax_config,
        category="skrl",
        available=module_loaded("jax"),
        owner="skrl",
    )
)

# --- the adapter surface ------------------------------------------------------------------------------------


def env_steps_per_iteration(config: dict[str, Any], num_envs: int) -> int:
    """One iteration is `timesteps_per_iteration` steps of every env."""
    return timesteps_per_iteration(config) * num_envs


# --- the runner -------------------------------------------------------------------------------------------


def make_runner(env: Any, config: dict[str, Any], framework: str) -> Any:
    """SKRL's own `Runner` for `framework` (it seeds, then builds models, memory, agent and trainer), handed the
    configuration as `hand_over` makes it: checked, classes for names, rlrun's text for expressions."""
    if framework == "jax":
        from skrl.utils.runner.jax import Runner
    else:
        from skrl.utils.runner.torch import Runner
    return Runner(env, hand_over(config, framework))


def bootstrap_from_final_observations(agent: Any) -> None:
    """Give the agent each ended episode's last observation as `next_observations` when it records a step.

    The env resets ended episodes in the same step, so the observation the trainer acts on next is the
    new episode's first; SKRL bootstraps truncated episodes (SAC always, PPO with `time_limit_bootstrap`)
    from `next_observations`, which must be the last observation of the old one.
    """
    record_transition = agent.record_transition

    def record_with_final_observations(*, next_observations: Any, infos: Any, **kwargs: Any) -> None:
        final = infos.get("final_observations", next_observations)
        record_transition(next_observations=final, infos=infos, **kwargs)

    agent.record_transition = record_with_final_observations


# --- train and play -----------------------------------------------------------------------------------------


def _close(runner: Any, monitor: Any) -> None:
    """Close what SKRL leaves open: its TensorBoard writer and the tqdm monitor thread its progress bar started."""
    import tqdm

    writer = getattr(getattr(runner, "agent", None), "writer", None)
    if writer is not None:
        writer.close()
    if tqdm.tqdm.monitor is not monitor:
        if tqdm.tqdm.monitor is not None:
            tqdm.tqdm.monitor.exit()
        tqdm.tqdm.monitor = monitor


def train(job: TrainJob) -> TrainOutcome:
    """Run SKRL's `Runner` for `job.max_iterations` iterations, checkpointing through rlrun's writer."""
    import tqdm

    per_iteration = timesteps_per_iteration(job.config)
    timesteps = job.max_iterations * per_iteration
    if job.ml_framework == "jax":
        use_persistent_cache()  # SKRL's executables, compiled again by every call, come from the disk
    modules = None if job.resume_from is None else read_checkpoint(job.resume_from, job.ml_framework, job.device)
    env = wrap_env(job.env, job.ml_framework, job.device, job.seed)
    config = runner_config(
        job.config, seed=job.seed, timesteps=timesteps, run_dir=job.run_dir, action_space=env.action_space
    )
    monitor = tqdm.tqdm.monitor
    jitted = skrl_jitted_functions() if job.ml_framework == "jax" else None
    runner = None
    try:
        runner = make_runner(env, config, job.ml_framework)
        # SKRL's set_seed (in the Runner) turns cuDNN autotuning on and determinism off; the policy is
        # SKRL's for cuDNN, full float32 matmuls; deterministic throughout on request.
        torch_backend_flags(
            matmul_allow_tf32=False,
            cudnn_allow_tf32=not job.deterministic,
            deterministic=job.deterministic,
            benchmark=not job.deterministic,
        )
        agent = runner.agent
        checkpoints = agent.write_checkpoint = CheckpointWriter(agent, job, per_iteration)
        checkpoints.count_timesteps()
        bootstrap_from_final_observations(agent)
        if job.resume_from is not None and modules is not None:
            load_checkpoint(agent, job.resume_from, modules)
        try:
            runner.run("train")
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or a stop request: keep what the agent has learned
            checkpoints.at_stop(stop, timesteps)
            raise
        if checkpoints.last_timestep != timesteps:  # SKRL saves every checkpoint_interval timesteps only
            checkpoints(timestep=timesteps, timesteps=timesteps)
    finally:
        _close(runner, monitor)
        if jitted is not None:
            forget_jax_traces(jitted)
    return TrainOutcome(iterations=job.resume_iteration + job.max_iterations, checkpoint=checkpoints.saved[-1])


def load_policy(job: PlayJob) -> Policy:
    """Rebuild the agent with SKRL's `Runner` (no writer, no checkpoints), load the checkpoint, return its policy."""
    agent, env = _agent(job)
    return _policy(agent, env, job.ml_framework, job.deterministic)


def _agent(job: PlayJob) -> tuple[Any, Any]:
    """The agent rebuilt by SKRL's `Runner` (no writer, no checkpoints), checkpoint loaded, in eval mode,
    and SKRL's view of the env."""
    modules = read_checkpoint(job.checkpoint, job.ml_framework, job.device)
    if job.ml_framework == "jax":
        use_persistent_cache()
    env = wrap_env(job.env, job.ml_framework, job.device, None)
    config = runner_config(
        job.config,
        seed=job.seed if job.seed is not None else 0,
        timesteps=1,
        run_dir=job.checkpoint.parent,
        action_space=env.action_space,
    )
    config["agent"]["experiment"].update(write_interval=0, checkpoint_interval=0)  # no writer, no directory
    agent = make_runner(env, config, job.ml_framework).agent
    load_checkpoint(agent, job.checkpoint, modules)
    agent.enable_training_mode(False, apply_to_models=True)
    return agent, env


def _policy(agent: Any, env: Any, framework: str, deterministic: bool) -> Policy:
    """Map torch observations to torch actions with the agent's own `act` (after any random warm-up)."""
    timestep = int(getattr(agent.cfg, "random_timesteps", 0))
    discrete = type(env.action_space).__name__ == "Discrete"

    def choose(actions: Any, outputs: dict[str, Any]) -> Any:
        if not deterministic:
            return actions
        if discrete:
            return outputs["net_output"].argmax(-1, keepdims=True)
        return outputs.get("mean_actions", actions)

    if framework == "jax":

        def jax_policy(observations: Any) -> Any:
            actions, outputs = agent.act(env.to_jax(observations), None, timestep=timestep, timesteps=timestep)
            return env.to_torch(choose(actions, outputs))

        return jax_policy

    def torch_policy(observations: Any) -> Any:
        observations = observations.reshape(observations.shape[0], -1)
        actions, outputs = agent.act(observations, None, timestep=timestep, timesteps=timestep)
        return choose(actions, outputs)

    return torch_policy


# --- export -------------------------------------------------------------------------------------------------


def export_policy(job: PlayJob) -> Any:
    """The PyTorch agent's deterministic policy on the CPU: observation preprocessor, policy network, mean
    action (clipped where the model clips its mean) or, for Discrete actions, the most likely one. rlrun asks
    for PyTorch agents only (its export refuses JAX ones while planning)."""
    agent, _ = _agent(job)
    return export_class()(agent, type(job.env.single_action_space).__name__ == "Discrete").to("cpu")
