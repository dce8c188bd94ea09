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
writer, and tqdm (its progress bar) starts a monitor thread: both are closed in `finally`.

Checkpoints keep SKRL's names under `<run>/checkpoints/` (`agent_<timestep>.pt` for torch,
`agent_<timestep>.pickle` for JAX, and `best_agent.*`), written through rlrun's atomic writer and
recorded in run.json; the last timestep is always saved, and a training stopped early is saved as of its
last finished iteration. Torch checkpoints are read with
`torch.load(weights_only=True)` before SKRL's loader (`weights_only=False`) sees them. JAX checkpoints
are SKRL's pickle of one flax msgpack blob per module, which `torch.load` cannot read: rlrun unpickles
them first with an unpickler that refuses every global (so no code can run) and parses each blob
with msgpack, before SKRL's loader (`pickle.load`) sees them.
"""

from __future__ import annotations

import functools
import io
import pickle
import sys
import zipfile
from pathlib import Path
from typing import Any

from rlrun.errors import CorruptCheckpoint, InvalidArgument, UnsupportedTask
from rlrun.hermetic import attributes_guard, register, torch_backend_flags
from rlrun.hermetic.registry import Guard, module_loaded
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome, unreadable

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
CHECKPOINT_DIRECTORY = "checkpoints"
EXTENSIONS = {"torch": ".pt", "jax": ".pickle"}

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


# --- checkpoints --------------------------------------------------------------------------------------------


class _NoGlobals(pickle.Unpickler):
    """Unpickles plain containers only: any class or function reference is refused, so no code runs."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}")


def _read_jax_checkpoint(path: Path) -> dict[str, Any]:
    """SKRL's JAX checkpoint, `{module name: flax msgpack bytes}`, read without running any code."""
    import msgpack  # what flax serializes with; importing it changes no process state (flax would import jax)

    with open(path, "rb") as file:
        modules = _NoGlobals(io.BytesIO(file.read())).load()
    if not isinstance(modules, dict) or not all(isinstance(blob, bytes) for blob in modules.values()):
        raise pickle.UnpicklingError("not a dictionary of serialized modules")
    return {name: msgpack.unpackb(blob, strict_map_key=False) for name, blob in modules.items()}


def checkpoint_framework(path: Path) -> str:
    """`torch` for a torch zip archive, else `jax` (SKRL's pickle)."""
    return "torch" if zipfile.is_zipfile(path) else "jax"


def check_checkpoint(path: Path) -> None:
    """Read the file (torch: `weights_only=True`; JAX: no globals) and check it holds a SKRL agent."""
    import torch

    framework = checkpoint_framework(path)
    try:
        if framework == "torch":
            state = torch.load(path, map_location="cpu", weights_only=True)
        else:
            state = _read_jax_checkpoint(path)
    except Exception as error:
        raise unreadable(path, "a SKRL agent checkpoint", error) from error
    if not isinstance(state, dict) or "policy" not in state:
        raise CorruptCheckpoint(f"checkpoint {str(path)!r} is not a SKRL agent checkpoint (no 'policy' module).")


def _check_framework_of(path: Path, framework: str) -> None:
    found = checkpoint_framework(path)
    if found != framework:
        raise InvalidArgument(
            f"checkpoint {str(path)!r} holds a SKRL {found} agent, not a {framework} one; pass --ml_framework {found}."
        )


def _write_modules(framework: str, modules: dict[str, Any], path: str) -> None:
    """Write module states as SKRL's `write_checkpoint` does for a whole agent."""
    if framework == "torch":
        import torch

        torch.save(modules, path)
        return
    from flax import serialization

    with open(path, "wb") as file:
        pickle.dump({name: serialization.to_bytes(value) for name, value in modules.items()}, file, protocol=4)


class CheckpointWriter:
    """SKRL's `agent.write_checkpoint`, writing through `job.save_checkpoint` (atomic, recorded in run.json).

    `best_agent` is written before `agent_<timestep>` (both hold the same weights when SKRL has just
    found a new best), so that the newest checkpoint in run.json is the newest state. SKRL's trainer
    counts timesteps from 0 in every run; a resumed run's names and iterations continue the parent's.
    A training stopped early is saved by `at_stop` as of the last timestep whose update ran.
    """

    def __init__(self, agent: Any, job: TrainJob, per_iteration: int) -> None:
        self.agent, self.job, self.per_iteration = agent, job, per_iteration
        self.first_timestep = job.resume_iteration * per_iteration
        self.extension = EXTENSIONS[job.ml_framework]
        self.saved: list[Path] = []
        self.last_timestep: int | None = None
        self.finished = 0
        """Timesteps of this run whose `post_interaction` ran (see `count_timesteps`)."""
        (job.run_dir / CHECKPOINT_DIRECTORY).mkdir(exist_ok=True)  # SKRL makes it only for periodic checkpoints

    def __call__(self, *, timestep: int, timesteps: int) -> None:
        agent = self.agent
        best = agent.checkpoint_best_modules
        if best["modules"] and not best["saved"]:
            self.save(
                "best_agent", {name: best["modules"][name] for name in agent.checkpoint_modules}, best["timestep"]
            )
            best["saved"] = True
        current = {name: agent._get_internal_value(module) for name, module in agent.checkpoint_modules.items()}
        self.save("agent_{}", current, timestep)
        self.last_timestep = timestep

    def save(self, name: str, modules: dict[str, Any], timestep: int) -> None:
        """Save under `name` (`{}` becomes the timestep counted over resumed runs); `timestep` is this run's."""
        timestep += self.first_timestep
        write = functools.partial(_write_modules, self.job.ml_framework, modules)
        file_name = f"{CHECKPOINT_DIRECTORY}/{name.format(timestep)}{self.extension}"
        self.saved.append(self.job.save_checkpoint(file_name, write, timestep // self.per_iteration))

    def count_timesteps(self) -> None:
        """Count the timesteps whose `post_interaction` (where SKRL's agents update) ran, in `self.finished`."""
        agent, post_interaction = self.agent, self.agent.post_interaction

        def counted_post_interaction(*, timestep: int, timesteps: int) -> None:
            post_interaction(timestep=timestep, timesteps=timesteps)
            self.finished = timestep + 1

        agent.post_interaction = counted_post_interaction

    def at_stop(self, stop: BaseException, timesteps: int) -> None:
        """Save the agent as it is when the training stops early, named as of the last iteration whose update
        ran (an iteration is `per_iteration` timesteps); a fresh agent that has not finished one is not saved."""
        timestep = self.finished // self.per_iteration * self.per_iteration
        if self.first_timestep + timestep > 0:
            try:
                self(timestep=timestep, timesteps=timesteps)
            except BaseException as failure:  # a failed write or a second Ctrl-C: the stop goes on
                stop.add_note(f"rlrun: the checkpoint at the stop was not saved: {failure!r}")


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


# --- the env as SKRL sees it --------------------------------------------------------------------------------


class VectorEnvWrapperMixin:
    """What SKRL's torch and JAX wrappers of rlrun's vector env share: the single env's spaces, no state,
    no rendering (rlrun records videos itself) and no closing (the env is rlrun's to close)."""

    _env: Any

    @property
    def observation_space(self) -> Any:
        return self._env.single_observation_space

    @property
    def action_space(self) -> Any:
        return self._env.single_action_space

    def state(self) -> None:
        return None

    def render(self, *args: Any, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        return None


@functools.cache
def _torch_wrapper_class() -> type:
    """SKRL's torch `Wrapper` subclassed for rlrun's torch vector env (built on first use: it imports SKRL)."""
    from skrl.envs.wrappers.torch import Wrapper as TorchWrapper

    class TorchVectorEnvWrapper(VectorEnvWrapperMixin, TorchWrapper):
        """rlrun's torch vector env as SKRL's torch wrapper: tensors pass through, shaped `[num_envs, -1]`.

        The first `reset` resets the env with the run's seed; later ones (SKRL's trainer asks after an
        ended episode when there is one env) return the observation of the episode the env already
        started. The env is rlrun's to close.
        """

        def __init__(self, env: Any, seed: int | None) -> None:
            super().__init__(env)
            self._seed = seed
            self._observations: Any = None

        def reset(self) -> tuple[Any, dict[str, Any]]:
            if self._observations is None:
                observations, _ = self._env.reset(seed=self._seed)
                self._observations = observations.reshape(self.num_envs, -1)
            return self._observations, {}

        def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
            observations, rewards, terminated, truncated, info = self._env.step(actions)
            self._observations = observations.reshape(self.num_envs, -1)
            final = info["final_obs"].reshape(self.num_envs, -1)
            shape = (self.num_envs, 1)
            return (
                self._observations,
                rewards.reshape(shape),
                terminated.reshape(shape),
                truncated.reshape(shape),
                {"final_observations": final},
            )

    return TorchVectorEnvWrapper


@functools.cache
def _jax_wrapper_class() -> type:
    """SKRL's JAX `Wrapper` subclassed for rlrun's torch vector env (built on first use: it imports jax)."""
    import jax
    import numpy as np
    import torch
    from skrl.envs.wrappers.jax import Wrapper as JaxWrapper

    class JaxVectorEnvWrapper(VectorEnvWrapperMixin, JaxWrapper):
        """rlrun's torch vector env as SKRL's JAX wrapper: observations, rewards and flags become JAX
        arrays on the JAX device, actions become torch tensors on the env's device."""

        def __init__(self, env: Any, seed: int | None, device: Any) -> None:
            super().__init__(env)
            self._device = device
            self._seed = seed
            self._observations: Any = None

        def to_jax(self, tensor: Any, dtype: Any = np.float32) -> Any:
            array = tensor.detach().cpu().numpy().reshape(self.num_envs, -1)
            return jax.device_put(array.astype(dtype, copy=False), self._device)

        def to_torch(self, array: Any) -> Any:
            return torch.tensor(np.asarray(array), device=self._env.device)

        def reset(self) -> tuple[Any, dict[str, Any]]:
            if self._observations is None:
                observations, _ = self._env.reset(seed=self._seed)
                self._observations = self.to_jax(observations)
            return self._observations, {}

        def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
            observations, rewards, terminated, truncated, info = self._env.step(self.to_torch(actions))
            self._observations = self.to_jax(observations)
            return (
                self._observations,
                self.to_jax(rewards),
                self.to_jax(terminated, np.int8),
                self.to_jax(truncated, np.int8),
                {"final_observations": self.to_jax(info["final_obs"])},
            )

    return JaxVectorEnvWrapper


def jax_device(device: str) -> Any:
    """The JAX device for rlrun's device string (`cpu`, `cuda`, `cuda:N`)."""
    import jax

    kind, _, index = device.partition(":")
    try:
        return jax.devices("gpu" if kind == "cuda" else kind)[int(index or 0)]
    except (RuntimeError, IndexError):
        available = ", ".join(str(found) for found in jax.devices())
        raise InvalidArgument(
            f"--device {device!r} is not a device JAX can use here (it has: {available}); pass --device cpu."
        ) from None


def wrap_env(env: Any, framework: str, device: str, seed: int | None) -> Any:
    """rlrun's vector env as SKRL's wrapper for `framework`; for JAX, also make its device SKRL's default."""
    if framework == "jax":
        target = jax_device(device)
        sys.modules["skrl"].config.jax.device = target  # guarded: skrl.config.jax
        return _jax_wrapper_class()(env, seed, target)
    return _torch_wrapper_class()(env, seed)


def make_runner(env: Any, config: dict[str, Any], framework: str) -> Any:
    """SKRL's own `Runner` for `framework` (it seeds, then builds models, memory, agent and trainer)."""
    if framework == "jax":
        from skrl.utils.runner.jax import Runner
    else:
        from skrl.utils.runner.torch import Runner
    return Runner(env, config)


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


def _skrl_jitted_functions() -> dict[int, tuple[Any, int]]:
    """SKRL's module-level jitted functions, by id, with the number of compiled entries each holds now."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "skrl" or name.startswith("skrl.")):
            continue
        for value in list(vars(module).values()):
            if type(value).__name__ == "PjitFunction" and hasattr(value, "clear_cache"):
                size = getattr(value, "_cache_size", None)
                found[id(value)] = (value, size() if callable(size) else -1)
    return found


def _forget_jax_traces(before: dict[int, tuple[Any, int]]) -> None:
    """Make JAX's caches let go of this call's agent; `before` is `_skrl_jitted_functions()` from the start.

    SKRL's JAX agents jit module-level functions with the call's own objects as static arguments
    (`_update_policy(policy_act=policy.act)`, `_update_value(value_act=...)`, the Adam step's optax
    `transformation`). JAX keys its caches on static arguments and holds them strongly, so every call's
    models, optimizer state and compiled executables stayed alive: +22-35 MB and about 6,000-9,000 objects
    per call. Evicted here, what the call added: every SKRL function that gained compiled entries in the
    call is cleared with its own `clear_cache()` (its executables and traced jaxprs; JAX also empties its
    parameter-inference memo, refilled on the next cache miss), and two memos of `jax._src.pjit` whose keys
    carry the argument tree (`_process_in_axis_resources`, `_check_and_canonicalize_out_shardings`) are
    emptied. The caller's own jitted functions keep their compiled executables. Where a JAX version lacks
    those names, `jax.clear_caches()` is used instead: correct, but the caller's jitted functions then
    compile again on their next call. Never raises (it runs in `finally`).
    """
    jax = sys.modules.get("jax")
    if jax is None:
        return
    try:
        from jax._src import pjit

        memos = (pjit._process_in_axis_resources, pjit._check_and_canonicalize_out_shardings)
        for key, (function, size) in _skrl_jitted_functions().items():
            if size < 0 or size > before.get(key, (None, 0))[1]:
                function.clear_cache()
        for memo in memos:
            memo.cache_clear()
    except Exception:  # JAX's internals moved: clear everything rather than keep every call's agent
        jax.clear_caches()


def train(job: TrainJob) -> TrainOutcome:
    """Run SKRL's `Runner` for `job.max_iterations` iterations, checkpointing through rlrun's writer."""
    import tqdm

    per_iteration = timesteps_per_iteration(job.config)
    timesteps = job.max_iterations * per_iteration
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
            _check_framework_of(job.resume_from, job.ml_framework)
            _load_checkpoint(agent, job.resume_from)
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


def _load_checkpoint(agent: Any, path: Path) -> None:
    """SKRL's `agent.load`; a checkpoint of another task (other observation or action sizes) is refused in one
    line. Torch refuses such weights itself; flax takes them silently, so the JAX parameters' shapes are
    compared before and after."""
    before = _parameter_shapes(agent)
    try:
        agent.load(str(path))
    except (RuntimeError, ValueError, KeyError) as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
        detail = next((line for line in lines[1:] if "mismatch" in line or "key(s)" in line), "")
        raise UnsupportedTask(
            f"checkpoint {str(path)!r} does not fit this task ({' '.join([lines[0], detail]).strip()[:300]}); "
            "pass the --task it was trained on, or another checkpoint."
        ) from None
    for name, shapes in _parameter_shapes(agent).items():
        if shapes != before.get(name, shapes):
            raise UnsupportedTask(
                f"checkpoint {str(path)!r} does not fit this task (its {name!r} parameters have other shapes); "
                "pass the --task it was trained on, or another checkpoint."
            )


def _parameter_shapes(agent: Any) -> dict[str, Any]:
    """The shapes of the JAX agent's module parameters, by module name (empty for torch agents)."""
    jax = sys.modules.get("jax")
    shapes = {}
    for name, module in getattr(agent, "checkpoint_modules", {}).items():
        params = getattr(getattr(module, "state_dict", None), "params", None)
        if jax is not None and params is not None:
            shapes[name] = jax.tree_util.tree_map(lambda leaf: tuple(getattr(leaf, "shape", ())), params)
    return shapes


def load_policy(job: PlayJob) -> Policy:
    """Rebuild the agent with SKRL's `Runner` (no writer, no checkpoints), load the checkpoint, return its policy."""
    agent, env = _agent(job)
    return _policy(agent, env, job.ml_framework, job.deterministic)


def _agent(job: PlayJob) -> tuple[Any, Any]:
    """The agent rebuilt by SKRL's `Runner` (no writer, no checkpoints), checkpoint loaded, in eval mode,
    and SKRL's view of the env."""
    _check_framework_of(job.checkpoint, job.ml_framework)
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
    _load_checkpoint(agent, job.checkpoint)
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
