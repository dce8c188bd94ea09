"""SKRL (`skrl` 2.1.x) on PyTorch and on JAX: its own `Runner` on rlrun's torch vector envs.

The agent configuration is SKRL's runner configuration (`models`, `memory`, `agent`, `trainer`, as in
Isaac Lab's `skrl_*_cfg.yaml`); the algorithm is `agent.class`. rlrun fills in what belongs to the run:
- `seed` (the call's seed, passed to SKRL's `set_seed`);
- `trainer.timesteps`: `--max_iterations` times the timesteps of one iteration, which is `agent.rollouts`
  for on-policy agents (PPO; Isaac Lab's mapping) and one timestep (one step of every env, then
  `agent.gradient_steps` updates) for off-policy agents without rollouts (SAC);
- `trainer.close_environment_at_exit: false` (SKRL would register one `atexit` hook per call holding
  the env) and `agent.experiment.directory` / `experiment_name`, so that SKRL's experiment directory
  is the run directory (never `./runs` in the cwd); checkpoints are always one file each
  (`store_separately: false`).
A Gaussian policy in a configuration (the generic `default.yaml`) becomes a categorical one with the
same network on a Discrete action space.

What a call changes and how it is put back: `set_seed` (run by the `Runner`) writes `PYTHONHASHSEED`,
cuDNN `benchmark`/`deterministic` and reseeds `random`, NumPy and torch (restored by rlrun's generic
guards), and writes the PRNG keys of `skrl.config.torch/jax/warp`; the JAX path also sets
`skrl.config.jax.device`. Every attribute of those three objects is guarded here (read with `vars()`,
so no property imports jax), and so are JAX's config values. SKRL never closes its TensorBoard
writer, and tqdm (its progress bar) starts a monitor thread: both are closed in `finally`. A JAX call
compiles through JAX's persistent compilation cache in rlrun's cache folder, so that calls after the first
on a machine load SKRL's executables instead of compiling them, and later calls in the same process take the
executables the latest one loaded from memory (`rlrun.libraries.skrl_jax_cache`, which also guards the cache's
globals).

Checkpoints (`<run>/checkpoints/agent_<timestep>.pt` or `.pickle`, read before SKRL's loader sees them) are
`rlrun.libraries.skrl_checkpoints`'s; the env as SKRL sees it is `rlrun.libraries.skrl_env`'s.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

from rlrun.hermetic import attributes_guard, register, torch_backend_flags
from rlrun.hermetic.registry import Guard, module_loaded
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome
from rlrun.libraries.skrl_checkpoints import CheckpointWriter, check_framework_of, load_checkpoint
from rlrun.libraries.skrl_checkpoints import check_checkpoint as check_checkpoint  # the adapter's member
from rlrun.libraries.skrl_env import wrap_env
from rlrun.libraries.skrl_jax_cache import use_persistent_cache

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
    current = config.values  # rebuilt from every option on each read (133 in JAX 0.10): read it once
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

# --- configuration ------------------------------------------------------------------------------------------


def timesteps_per_iteration(config: dict[str, Any]) -> int:
    """Vector-env steps in one `--max_iterations` unit: `agent.rollouts`, or 1 for agents without rollouts."""
    return int(config.get("agent", {}).get("rollouts", 1))


def env_steps_per_iteration(config: dict[str, Any], num_envs: int) -> int:
    return timesteps_per_iteration(config) * num_envs


def runner_config(
    config: dict[str, Any], *, seed: int, timesteps: int, run_dir: Path, action_space: Any
) -> dict[str, Any]:
    """Fill in what belongs to the run (see the module docstring); `config` is consumed."""
    config["seed"] = seed
    config.setdefault("trainer", {}).update(timesteps=timesteps, close_environment_at_exit=False)
    experiment = config.setdefault("agent", {}).setdefault("experiment", {}) or {}
    experiment.update(directory=str(run_dir.parent), experiment_name=run_dir.name, store_separately=False)
    config["agent"]["experiment"] = experiment
    _categorical_policy_for_discrete_actions(config, action_space)
    return config


GAUSSIAN_ONLY = (
    "clip_actions",
    "clip_mean_actions",
    "clip_log_std",
    "min_log_std",
    "max_log_std",
    "reduction",
    "initial_log_std",
    "fixed_log_std",
)
"""Parameters of SKRL's `gaussian_model` that its `categorical_model` does not take."""


def _categorical_policy_for_discrete_actions(config: dict[str, Any], action_space: Any) -> None:
    policy = config.get("models", {}).get("policy")
    discrete = type(action_space).__name__ == "Discrete"
    if discrete and isinstance(policy, dict) and str(policy.get("class", "")).lower() == "gaussianmixin":
        kept = {key: value for key, value in policy.items() if key not in GAUSSIAN_ONLY}
        config["models"]["policy"] = {**kept, "class": "CategoricalMixin", "unnormalized_log_prob": True}


# --- the runner -------------------------------------------------------------------------------------------


def make_runner(env: Any, config: dict[str, Any], framework: str) -> Any:
    """SKRL's own `Runner` for `framework` (it seeds, then builds models, memory, agent and trainer)."""
    if framework == "jax":
        from skrl.utils.runner.jax import Runner
    else:
        from skrl.utils.runner.torch import Runner
    return Runner(env, config)


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


ARRAY_ONLY = frozenset(
    {
        "skrl.agents.jax.ddpg.ddpg._apply_exploration_noise",
        "skrl.agents.jax.ppo.ppo._compute_gae",
        "skrl.agents.jax.td3.td3._apply_exploration_noise",
        "skrl.agents.jax.td3.td3._apply_smooth_regularization_noise",
        "skrl.memories.jax.base._copyto",
        "skrl.memories.jax.base._copyto_i",
        "skrl.memories.jax.base._copyto_i_j",
        "skrl.models.jax.base._unvectorize_leaves",
        "skrl.models.jax.base._vectorize_leaves",
        "skrl.models.jax.categorical._categorical",
        "skrl.models.jax.categorical._entropy",
        "skrl.models.jax.gaussian._entropy",
        "skrl.models.jax.gaussian._gaussian",
        "skrl.models.jax.multicategorical._categorical",
        "skrl.models.jax.multicategorical._entropy",
        "skrl.resources.preprocessors.jax.running_standard_scaler._copyto",
        "skrl.resources.preprocessors.jax.running_standard_scaler._inverse",
        "skrl.resources.preprocessors.jax.running_standard_scaler._parallel_variance",
        "skrl.resources.preprocessors.jax.running_standard_scaler._standardization",
    }
)
"""SKRL's jitted functions whose arguments are arrays, plain numbers and flags only (read in SKRL 2.x's
source): their compiled entries are keyed on shapes, dtypes and those values and hold none of a call's
objects, so they stay compiled across calls, as the caller's own jitted functions do (bounded: one entry
per shape and flag). Every other SKRL function that gains entries in a call is cleared at its end: those
that take a model's `act` or `apply`, an optax transformation or a state dict (whose tree carries the
model's `apply`), and any this list does not name, such as one a new SKRL version adds."""


def _skrl_jitted_functions() -> dict[int, tuple[Any, int]]:
    """SKRL's module-level jitted functions that may hold a call's objects (not in `ARRAY_ONLY`), by id, with
    the number of compiled entries each holds now."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "skrl" or name.startswith("skrl.")):
            continue
        for value in list(vars(module).values()):
            if type(value).__name__ == "PjitFunction" and hasattr(value, "clear_cache"):
                function = getattr(value, "_fun", None)  # the jitted Python function, where it was defined
                if f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}" in ARRAY_ONLY:
                    continue
                size = getattr(value, "_cache_size", None)
                found[id(value)] = (value, size() if callable(size) else -1)
    return found


def _forget_jax_traces(before: dict[int, tuple[Any, int]]) -> None:
    """Make JAX's caches let go of this call's agent; `before` is `_skrl_jitted_functions()` from the start.

    SKRL's JAX agents jit module-level functions with the call's own objects as static arguments
    (`_update_policy(policy_act=policy.act)`, `_update_value(value_act=...)`, the Adam step's optax
    `transformation`). JAX keys its caches on static arguments and holds them strongly, so every call's
    models, optimizer state and compiled executables stayed alive: +22-35 MB and about 6,000-9,000 objects
    per call. Evicted here, what the call added: for every SKRL function that gained compiled entries in the
    call, except those of `ARRAY_ONLY`, its executables (`_clear_cache`), its traced jaxprs and its entries
    in pjit's parameter-inference cache (both caches are keyed weakly on the function, and evicted for it
    alone); then two memos of `jax._src.pjit` whose keys carry the argument tree
    (`_process_in_axis_resources`, `_check_and_canonicalize_out_shardings`) are emptied. The caller's own
    jitted functions, and SKRL's array-only ones, keep their executables and inferred parameters: clearing
    and tracing those again cost a PPO call about 0.1 s and more (GAE's executable alone took 60 ms to
    release). JAX's public `clear_cache()` on a function would also empty the inference cache of every
    function, the caller's included. Releasing what the call compiled takes about 20 ms (its executables are
    freed with their jaxprs).
    Where a JAX version lacks these names, `jax.clear_caches()` is used instead: correct, but every jitted
    function then compiles again on its next call. Never raises (it runs in `finally`).
    """
    jax = sys.modules.get("jax")
    if jax is None:
        return
    try:
        from jax._src import pjit
        from jax._src.interpreters import partial_eval

        memos = (pjit._process_in_axis_resources, pjit._check_and_canonicalize_out_shardings)
        caches = (partial_eval.trace_to_jaxpr, pjit._infer_params_cached)  # weakly keyed on the function
        for key, (function, size) in _skrl_jitted_functions().items():
            if size < 0 or size > before.get(key, (None, 0))[1]:
                function._clear_cache()
                for cache in caches:
                    cache.evict_weakref(function._fun)
        for memo in memos:
            memo.cache_clear()
    except Exception:  # JAX's internals moved: clear everything rather than keep every call's agent
        jax.clear_caches()


def train(job: TrainJob) -> TrainOutcome:
    """Run SKRL's `Runner` for `job.max_iterations` iterations, checkpointing through rlrun's writer."""
    import tqdm

    per_iteration = timesteps_per_iteration(job.config)
    timesteps = job.max_iterations * per_iteration
    if job.ml_framework == "jax":
        use_persistent_cache()  # SKRL's executables, compiled again by every call, come from the disk
    env = wrap_env(job.env, job.ml_framework, job.device, job.seed)
    config = runner_config(
        job.config, seed=job.seed, timesteps=timesteps, run_dir=job.run_dir, action_space=env.action_space
    )
    monitor = tqdm.tqdm.monitor
    jitted = _skrl_jitted_functions() if job.ml_framework == "jax" else None
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
        if job.resume_from is not None:
            check_framework_of(job.resume_from, job.ml_framework)
            load_checkpoint(agent, job.resume_from)
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
            _forget_jax_traces(jitted)
    return TrainOutcome(iterations=job.resume_iteration + job.max_iterations, checkpoint=checkpoints.saved[-1])


def load_policy(job: PlayJob) -> Policy:
    """Rebuild the agent with SKRL's `Runner` (no writer, no checkpoints), load the checkpoint, return its policy."""
    agent, env = _agent(job)
    return _policy(agent, env, job.ml_framework, job.deterministic)


def _agent(job: PlayJob) -> tuple[Any, Any]:
    """The agent rebuilt by SKRL's `Runner` (no writer, no checkpoints), checkpoint loaded, in eval mode,
    and SKRL's view of the env."""
    check_framework_of(job.checkpoint, job.ml_framework)
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
    load_checkpoint(agent, job.checkpoint)
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
    return _export_class()(agent, type(job.env.single_action_space).__name__ == "Discrete").to("cpu")


@functools.cache
def _export_class() -> type:
    import torch

    class SkrlDeterministicPolicy(torch.nn.Module):
        """SKRL's `act` without sampling: what rlrun's `play` does with the agent by default."""

        def __init__(self, agent: Any, discrete: bool) -> None:
            super().__init__()
            preprocessor = agent._observation_preprocessor
            self.preprocessor = preprocessor if isinstance(preprocessor, torch.nn.Module) else None
            self.policy = agent.policy
            self.discrete = discrete
            self.clip = not discrete and bool(getattr(agent.policy, "_g_clip_mean_actions", False))
            if self.clip:
                self.register_buffer("low", torch.as_tensor(agent.policy._g_min_actions).float())
                self.register_buffer("high", torch.as_tensor(agent.policy._g_max_actions).float())

        def forward(self, observations: Any) -> Any:
            observations = observations.reshape(observations.shape[0], -1)
            if self.preprocessor is not None:
                observations = self.preprocessor(observations)
            output, _ = self.policy.compute({"observations": observations, "states": None}, role="policy")
            if self.discrete:
                return output.argmax(dim=-1)
            return torch.clamp(output, self.low, self.high) if self.clip else output

    return SkrlDeterministicPolicy
