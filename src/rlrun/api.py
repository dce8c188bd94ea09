"""The typed API: requests in, results out, every call hermetic.

    result = rlrun.train(rlrun.TrainRequest(task="rlrun/CartPoleContinuous-v1", library="rsl_rl"))
    played = rlrun.play(rlrun.PlayRequest(task="rlrun/CartPoleContinuous-v1", library="rsl_rl"))

Each call runs in three phases (see `rlrun.hermetic.scope`): plan (parse and validate the request,
import what it needs; nothing else changes and no directory is made), run (inside the guarded scope:
the library may change any global), restore. User mistakes raise `rlrun.errors.UserError`
subclasses; nothing here calls `sys.exit`. This module imports no RL library: adapters are looked up
in `rlrun.libraries.LIBRARIES`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import re
import secrets
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from rlrun import configs, rollout, runs
from rlrun.errors import (
    CorruptCheckpoint,
    InvalidArgument,
    MissingDependency,
    UnsupportedTask,
    UserError,
    did_you_mean,
)
from rlrun.hermetic import Call, fresh_torch_state, hermetic_call
from rlrun.libraries import LIBRARIES, Library, check_installed, get_library, libraries_for, load_adapter
from rlrun.progress import Progress

CORE_IMPORTS = ("numpy", "torch", "torch._dynamo", "gymnasium", "rlrun.envs")
"""Imported before any capture. `torch._dynamo` is what the first `optimizer.step()` of a process
imports lazily (2 s, an env var, warning filters, atexit hooks): an import effect, not the call's."""
VIDEO_IMPORTS = (
    "pygame",
    "moviepy",
    "moviepy.video.io.ImageSequenceClip",
    "imageio_ffmpeg",
    "gymnasium.wrappers.vector",
)

MAX_NUM_ENVS = 1 << 20
MAX_SEED = 2**32 - 1
VECTORIZATION_MODES = ("sync", "async")


# --- requests and results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRequest:
    """What every call that runs a task is told. `None` means the tuned default of the task (and library)."""

    task: str
    """A Gymnasium id: rlrun's native tasks (`rlrun/CartPole-v1`, ...) or any registered id."""
    num_envs: int | None = None
    seed: int | None = None
    """Seeds this call's RNGs and environments; -1 draws one from the OS (recorded in run.json)."""
    device: str | None = None
    """`cpu`, `cuda` or `cuda:N`; None: `cuda` when available, else `cpu`."""
    overrides: tuple[str, ...] = ()
    """`agent.<key>=<value>` and `env.<key>=<value>` words (OmegaConf dotlists)."""
    log_root: str = "logs"
    vectorization: str = "sync"
    """How a Gymnasium (non-native) task runs its sub-envs: `sync` (one process) or `async`."""
    video: bool = False
    """Record mp4 clips of the first environment (see each request for where and when)."""
    video_length: int = 200
    """Steps per clip."""
    argv: tuple[str, ...] | None = None
    """The command line that made this request (set by the CLI; recorded in run.json)."""


@dataclass(frozen=True)
class LibraryRequest(TaskRequest):
    """What every call that drives an RL library is told, besides the task."""

    library: str | None = None
    """`rsl_rl`, ... (`rlrun list`); None: the task's default library."""
    algorithm: str | None = None
    """The library's algorithm (`ppo`, `sac`, ...); None: the library's default, or the checkpoint's."""
    ml_framework: str | None = None
    """`torch` or `jax` for libraries that run on both (SKRL); None: torch, or the checkpoint's."""
    checkpoint: str | None = None
    """`latest`, `best`, a path, or a checkpoint file name inside `load_run`."""
    load_run: str | None = None
    """The run directory name (or a regex) to take the checkpoint from."""
    experiment: str | None = None
    """Folder under `<log_root>/<library>/`; None: the task id made path-safe."""
    verbose: bool = False
    """Pass the library's own console output through instead of writing it to `console.log`."""


@dataclass(frozen=True)
class TrainRequest(LibraryRequest):
    """What to train. `checkpoint` and `load_run` apply with `resume` only."""

    max_iterations: int | None = None
    """Library iterations (RSL-RL: rollouts of `num_steps_per_env` steps per env, then an update)."""
    resume: bool = False
    """Continue from `checkpoint` (default `latest`): weights, optimiser, normaliser, counters."""
    run_name: str | None = None
    """Suffix of the run directory name."""
    video_interval: int = 2000
    """With `video`: vector steps between the starts of two clips, saved in `<run_dir>/videos/train/`."""
    deterministic: bool = False
    """Ask torch for deterministic algorithms (slower; CUDA needs it to be reproducible)."""


@dataclass(frozen=True)
class PlayRequest(LibraryRequest):
    """What to evaluate: a trained checkpoint, run for `num_episodes` episodes (video: the first steps)."""

    checkpoint: str | None = "latest"
    num_episodes: int = 10
    max_steps: int | None = None
    """Stop after this many vector steps even if fewer episodes finished (None: 100 episode lengths)."""
    deterministic: bool = True
    """Act with the policy's mean action; False samples from the policy's distribution."""


@dataclass(frozen=True)
class ExportRequest(LibraryRequest):
    """What to export: a trained checkpoint's deterministic policy, observation normalisation included."""

    checkpoint: str | None = "latest"
    device: str | None = "cpu"
    format: str = "both"
    """`onnx`, `torchscript` or `both`."""
    validation_steps: int = 16
    """Steps of the task whose observations check each exported file against the live policy."""


@dataclass(frozen=True)
class AgentRequest(TaskRequest):
    """Run a task with zero or random actions, no library involved: a smoke test of the task itself."""

    num_envs: int | None = 4
    num_episodes: int | None = None
    """Episodes to run; None: 10, unless `max_steps` is given."""
    max_steps: int | None = None
    """Vector steps to run at most; None: until `num_episodes` episodes finished (at most 100 episode lengths)."""


@dataclass(frozen=True)
class TrainResult:
    """What a training call produced."""

    task: str
    library: str
    run_dir: Path
    checkpoint: Path | None
    """The last checkpoint written."""
    seed: int
    num_envs: int
    iterations: int
    env_steps: int
    episodes: int
    mean_return: float | None
    """Mean return of the last 100 finished training episodes."""
    steps_per_s: float
    wall_time_s: float
    videos: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ExportResult:
    """The exported files and how closely they reproduce the live policy."""

    task: str
    library: str
    checkpoint: Path
    files: tuple[Path, ...]
    max_abs_error: dict[str, float]
    """Per file name: the largest difference from the live policy's actions on the validation observations."""


@dataclass(frozen=True)
class PlayResult:
    """Episode returns and lengths of a trained policy."""

    task: str
    library: str
    """The library, or `zero` / `random` for the agents that need none."""
    checkpoint: Path | None
    run_dir: Path | None
    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    mean_return: float | None
    std_return: float | None
    mean_length: float | None
    env_steps: int
    steps_per_s: float
    videos: tuple[Path, ...] = ()


# --- public calls -------------------------------------------------------------------------------------------


def export(request: ExportRequest, *, check_leaks: bool | None = None) -> ExportResult:
    """Export a trained policy to `exported/policy.onnx` and `exported/policy.pt` in its run directory."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.export") as call:
        return export_in(call, request)


def zero_agent(
    request: AgentRequest, *, check_leaks: bool | None = None, progress: Progress | None = None
) -> PlayResult:
    """Run the task with the zero action (action 0 in discrete spaces); report episode returns."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.zero_agent") as call:
        return agent_in(call, request, "zero", progress)


def random_agent(
    request: AgentRequest, *, check_leaks: bool | None = None, progress: Progress | None = None
) -> PlayResult:
    """Run the task with uniformly random actions; report episode returns."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.random_agent") as call:
        return agent_in(call, request, "random", progress)


def train(request: TrainRequest, *, check_leaks: bool | None = None, progress: Progress | None = None) -> TrainResult:
    """Train an agent; the process is left exactly as it was found (see `rlrun.hermetic`)."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.train") as call:
        return train_in(call, request, progress)


def play(request: PlayRequest, *, check_leaks: bool | None = None, progress: Progress | None = None) -> PlayResult:
    """Evaluate a trained agent; the process is left exactly as it was found."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.play") as call:
        return play_in(call, request, progress)


# --- plans: everything validated before anything changes ----------------------------------------------------


@dataclass
class _Plan:
    """A validated request, filled in step by step before anything changes."""

    task: str
    library: Library | None
    """None for the zero and random agents, which need no library."""
    adapter: ModuleType | None
    device: str
    log_root: Path
    experiment: str
    algorithm: str = ""
    ml_framework: str = ""
    agent_config: dict[str, Any] = field(default_factory=dict)
    env_config: dict[str, Any] = field(default_factory=dict)
    num_envs: int = 1
    seed: int = 0
    max_iterations: int = 0
    checkpoint: Path | None = None
    checkpoint_run: runs.Run | None = None


def _check_int(value: Any, name: str, *, minimum: int, maximum: int | None = None, flag: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{flag} must be an integer, not {value!r}.")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise InvalidArgument(f"{flag} {value} is out of range: {name} must be {bound}.")


def _check_common(request: TaskRequest) -> None:
    if not isinstance(request.task, str) or not request.task:
        raise InvalidArgument(f"--task must name a task, not {request.task!r} (see `rlrun list`).")
    _check_int(request.num_envs, "the number of environments", minimum=1, maximum=MAX_NUM_ENVS, flag="--num_envs")
    if request.seed != -1:
        _check_int(request.seed, "the seed", minimum=0, maximum=MAX_SEED, flag="--seed")
    if request.vectorization not in VECTORIZATION_MODES:
        raise InvalidArgument(
            f"--vectorization {request.vectorization!r} is not one of {', '.join(VECTORIZATION_MODES)}."
            f"{did_you_mean(request.vectorization, VECTORIZATION_MODES)}"
        )
    if request.video:
        _check_int(request.video_length, "the video length", minimum=1, flag="--video_length")
        _check_int(getattr(request, "video_interval", 1), "the video interval", minimum=1, flag="--video_interval")
        if not _has("moviepy"):
            raise MissingDependency(
                "recording videos needs moviepy, which is not installed: pip install 'rlrun[video]'"
            )
    if isinstance(request.overrides, str):
        raise InvalidArgument("overrides must be a sequence of 'agent.key=value' strings, not one string.")
    if isinstance(request, LibraryRequest) and request.experiment is not None:
        runs.check_name(request.experiment, "--experiment_name")


def _resolve_device(device: str | None) -> str:
    import torch

    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise InvalidArgument(f"--device {device!r} is not a device: use cpu, cuda or cuda:N.")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InvalidArgument(f"--device {device!r} requested but CUDA is not available here; pass --device cpu.")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise InvalidArgument(f"--device {device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible.")
    return device


def _jax_has_cuda() -> bool:
    """Whether a CUDA build of jaxlib is installed (found without importing or initialising JAX)."""
    return any(_has(name) for name in ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_cuda12_pjrt"))


def _resolve_seed(seed: int | None, default: Any) -> int:
    if seed is None:
        seed = default if isinstance(default, int) else 42
    if seed == -1:
        seed = secrets.randbelow(MAX_SEED)  # OS entropy: the caller's RNGs are not consumed
    return seed


def _choose_library(call: Call, task: str, name: str | None) -> Library:
    from rlrun.envs import NATIVE_TASKS

    if name is not None:
        library = get_library(name)
    elif task in NATIVE_TASKS:
        default = NATIVE_TASKS[task].default_library
        try:
            library = get_library(default)
        except UserError:
            known = ", ".join(libraries_for("Box"))
            raise UnsupportedTask(
                f"{task}'s default library {default!r} is not available in this version of rlrun; "
                f"pass --library with one that can act in its action space ({known} act in Box spaces)."
            ) from None
    else:
        space = _probe_action_space(call, task)
        candidates = [get_library(n) for n in libraries_for(space)]
        installed = [library for library in candidates if library.installed]
        if not installed:
            hint = f"install one of: {', '.join(c.install_hint for c in candidates)}" if candidates else ""
            raise UnsupportedTask(f"no installed library can act in {task}'s {space} action space; {hint}".rstrip())
        library = installed[0]
    check_installed(library)
    return library


def _probe_action_space(call: Call, task: str) -> str:
    """Build one instance of `task` inside a guarded span and return its action space class name."""
    import gymnasium

    with call.guarded():
        env = gymnasium.make(task)
        try:
            return type(env.action_space).__name__
        finally:
            env.close()


def _configs(plan: _Plan, overrides: tuple[str, ...]) -> None:
    """Fill the plan's agent and env configurations: the run's own when continuing one, else the defaults."""
    from rlrun.envs import env_config

    scoped = configs.split_overrides(overrides)
    saved = plan.checkpoint_run.path / "params" if plan.checkpoint_run is not None else None
    if saved is not None and (saved / "agent.yaml").is_file() and (saved / "env.yaml").is_file():
        import yaml

        agent = yaml.safe_load((saved / "agent.yaml").read_text(encoding="utf-8"))
        environment = yaml.safe_load((saved / "env.yaml").read_text(encoding="utf-8"))
    else:
        agent = configs.load_agent_config(plan.library.name, plan.algorithm, plan.task)
        environment = env_config(plan.task)
    plan.agent_config = configs.apply_overrides(agent, scoped["agent"], scope="agent")
    plan.env_config = configs.apply_overrides(environment, scoped["env"], scope="env")


def _check_framework(library: Library, framework: str) -> None:
    if framework not in library.frameworks:
        raise InvalidArgument(
            f"--ml_framework {framework!r} is not one {library.name} runs on: use {' or '.join(library.frameworks)}."
        )
    check_installed(library, framework)


def _check_algorithm(library: Library, adapter: ModuleType, algorithm: str) -> str:
    name = algorithm.lower()
    if name not in adapter.ALGORITHMS:
        close = did_you_mean(name, adapter.ALGORITHMS, listing=0)
        raise InvalidArgument(
            f"--algorithm {algorithm!r} is not one rlrun runs with {library.name}.{close} "
            f"Choose from: {', '.join(adapter.ALGORITHMS)}."
        )
    return name


def _import_core(call: Call, request: TaskRequest) -> None:
    call.import_modules(CORE_IMPORTS)
    if request.video:
        call.import_modules([name for name in VIDEO_IMPORTS if _has(name.partition(".")[0])])


def _plan(call: Call, request: LibraryRequest) -> _Plan:
    """What train and play validate alike: numbers, task, library, device, seed, log root."""
    _check_common(request)
    _import_core(call, request)
    from rlrun.envs import resolve_task

    task = resolve_task(request.task)
    library = _choose_library(call, task, request.library)
    return _Plan(
        task=task,
        library=library,
        adapter=load_adapter(library),
        device=_resolve_device(request.device),
        log_root=Path(request.log_root).absolute(),
        experiment=request.experiment or runs.experiment_name(task),
    )


def _resolve_checkpoint(plan: _Plan, request: LibraryRequest, selector: str) -> None:
    """Find the checkpoint; runs of another algorithm or framework than the one asked for do not count."""
    wanted = {"algorithm": request.algorithm and request.algorithm.lower(), "ml_framework": request.ml_framework}
    plan.checkpoint, plan.checkpoint_run = runs.resolve_checkpoint(
        selector,
        log_root=request.log_root,
        library=plan.library.name,
        task=plan.task,
        experiment=request.experiment,
        load_run=request.load_run,
        match={key: value for key, value in wanted.items() if value is not None},
    )
    manifest = plan.checkpoint_run.manifest if plan.checkpoint_run is not None else {}
    for key, expected, flag in (("task", plan.task, "--task"), ("library", plan.library.name, "--library")):
        if manifest.get(key, expected) != expected:
            raise InvalidArgument(
                f"checkpoint {str(plan.checkpoint)!r} was trained on {key} {manifest[key]!r}, not {expected!r}; "
                f"pass {flag} {manifest[key]} or another checkpoint."
            )


def _finish_plan(call: Call, plan: _Plan, request: LibraryRequest, manifest: dict[str, Any]) -> None:
    """Settle algorithm and framework (asked for, else the checkpoint's, else the defaults) and import them."""
    framework = request.ml_framework or manifest.get("ml_framework") or plan.library.frameworks[0]
    _check_framework(plan.library, framework)
    plan.ml_framework = framework
    if framework == "jax" and request.device is None and plan.device.startswith("cuda") and not _jax_has_cuda():
        plan.device = "cpu"  # torch sees a GPU, but this JAX was installed for the CPU only
    call.import_modules(plan.adapter.IMPORTS[framework])
    plan.algorithm = _check_algorithm(
        plan.library, plan.adapter, request.algorithm or manifest.get("algorithm") or plan.adapter.DEFAULT_ALGORITHM
    )
    if plan.checkpoint is not None:
        try:
            plan.adapter.check_checkpoint(plan.checkpoint)
        except CorruptCheckpoint as error:
            owner = _identify_checkpoint(plan.checkpoint, other_than=plan.library.name)
            if owner is None:
                raise
            raise InvalidArgument(
                f"checkpoint {str(plan.checkpoint)!r} is a {owner} checkpoint, not a {plan.library.name} one; "
                f"pass --library {owner}."
            ) from error


def _identify_checkpoint(path: Path, other_than: str) -> str | None:
    """The installed library whose checkpoint format `path` has, if any (each adapter reads without building)."""
    for library in LIBRARIES.values():
        if library.name == other_than or not library.installed:
            continue
        try:
            load_adapter(library).check_checkpoint(path)
        except UserError:
            continue
        return library.name
    return None


def _plan_train(call: Call, request: TrainRequest) -> _Plan:
    plan = _plan(call, request)
    _check_int(request.max_iterations, "the number of iterations", minimum=1, flag="--max_iterations")
    if request.run_name is not None:
        runs.check_name(request.run_name, "--run_name")
    if request.resume or request.checkpoint is not None or request.load_run is not None:
        if not request.resume:
            raise InvalidArgument("--checkpoint and --load_run continue a run only with --resume; add --resume.")
        _resolve_checkpoint(plan, request, request.checkpoint or "latest")
    _finish_plan(call, plan, request, plan.checkpoint_run.manifest if plan.checkpoint_run else {})
    _configs(plan, request.overrides)
    plan.num_envs = request.num_envs or plan.agent_config.get("num_envs", 1)
    _check_int(plan.num_envs, "the number of environments", minimum=1, maximum=MAX_NUM_ENVS, flag="agent.num_envs")
    plan.seed = _resolve_seed(request.seed, plan.agent_config.get("seed"))
    plan.max_iterations = request.max_iterations or int(plan.agent_config.get("max_iterations", 1))
    return plan


def _plan_play(call: Call, request: PlayRequest) -> _Plan:
    plan = _plan(call, request)
    _check_int(request.num_episodes, "the number of episodes", minimum=1, flag="--num_episodes")
    _check_int(request.max_steps, "the number of steps", minimum=1, flag="--max_steps")
    _resolve_checkpoint(plan, request, request.checkpoint or "latest")
    _finish_plan(call, plan, request, plan.checkpoint_run.manifest if plan.checkpoint_run else {})
    _configs(plan, request.overrides)
    plan.num_envs = request.num_envs or min(request.num_episodes, 64)
    plan.seed = _resolve_seed(request.seed, plan.agent_config.get("seed"))
    return plan


# --- runs: inside the guarded scope -------------------------------------------------------------------------


def _seed_everything(seed: int) -> None:
    """Seed this call's global RNGs (the scope restores the caller's states afterwards)."""
    import random

    import numpy
    import torch

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)  # seeds CUDA's generators too, lazily, without initialising CUDA


@contextlib.contextmanager
def _determinism(enabled: bool, device: str) -> Iterator[None]:
    import os

    import torch

    if enabled:
        if device.startswith("cuda"):
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.use_deterministic_algorithms(True)
    yield


def _make_env(plan: _Plan, vectorization: str, render: bool = False) -> Any:
    """Build the task's torch vector env and check the library's algorithm can act in it."""
    from rlrun.envs import make_env

    env = make_env(
        plan.task,
        plan.num_envs,
        device=plan.device,
        vectorization=vectorization,
        env_kwargs=plan.env_config,
        render_mode="rgb_array" if render else None,
    )
    try:
        space = type(env.single_action_space).__name__
        supported = plan.adapter.ALGORITHMS[plan.algorithm] if plan.adapter is not None else (space,)
        if space not in supported:
            others = [name for name, spaces in plan.adapter.ALGORITHMS.items() if space in spaces]
            able = [name for name in libraries_for(space) if name != plan.library.name]
            ways = [f"--algorithm {name}" for name in others] + [f"--library {name}" for name in able]
            raise UnsupportedTask(
                f"{plan.library.name} {plan.algorithm} cannot act in {plan.task}'s {space} action space "
                f"(it supports {', '.join(supported)})" + (f"; use {' or '.join(ways)}." if ways else ".")
            )
        if render and env.render_mode != "rgb_array":
            raise UnsupportedTask(
                f"{plan.task} does not render rgb_array images, so it cannot be recorded; drop --video."
            )
        return env
    except BaseException:
        env.close()
        raise


@dataclass(frozen=True)
class _Video:
    """Where and what to record: clips of `length` steps every `interval` steps (None: one clip, at the start)."""

    folder: Path
    length: int
    interval: int | None
    prefix: str

    def files(self) -> tuple[Path, ...]:
        """The clips recorded, oldest first."""
        return tuple(sorted(self.folder.glob(f"{self.prefix}*.mp4"), key=lambda path: path.stat().st_mtime_ns))


def _instrument(env: Any, video: _Video | None, on_step: Any = None) -> Any:
    """Wrap a checked env with Gymnasium's video recorder (first env only) and rlrun's episode statistics."""
    from rlrun.envs import EpisodeStatistics

    if video is not None:
        import warnings

        from gymnasium.wrappers.vector import RecordVideo

        interval = video.interval
        with warnings.catch_warnings():
            # Expected here: SAME_STEP autoreset drops each episode's last frame; the folder may hold other clips.
            warnings.filterwarnings("ignore", message=".*(same-step|Overwriting existing videos)")
            env = RecordVideo(
                env,
                video_folder=str(video.folder),
                record_first_only=True,
                step_trigger=(lambda step: step % interval == 0) if interval else (lambda step: step == 0),
                video_length=video.length,
                name_prefix=video.prefix,
                gc_trigger=None,
            )
    return EpisodeStatistics(env, on_step=on_step)


def _versions(library: Library) -> dict[str, str | None]:
    def version(distribution: str) -> str | None:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "rlrun": version("rlrun"),
        library.distribution: library.version,
        "torch": version("torch"),
        "gymnasium": version("gymnasium"),
        "python": sys.version.split()[0],
    }


class _RunRecord:
    """The run directory and its manifest, written atomically at every change."""

    def __init__(self, plan: _Plan, request: TrainRequest) -> None:
        self.dir = runs.new_run_dir(plan.log_root, plan.library.name, plan.experiment, request.run_name)
        self.manifest: dict[str, Any] = {
            "version": runs.MANIFEST_VERSION,
            "library": plan.library.name,
            "algorithm": plan.algorithm,
            "ml_framework": plan.ml_framework,
            "task": plan.task,
            "experiment": plan.experiment,
            "run_name": request.run_name,
            "seed": plan.seed,
            "num_envs": plan.num_envs,
            "max_iterations": plan.max_iterations,
            "device": plan.device,
            "argv": list(request.argv) if request.argv is not None else None,
            "versions": _versions(plan.library),
            "parent": (
                {
                    "run": str(plan.checkpoint_run.path) if plan.checkpoint_run else None,
                    "checkpoint": str(plan.checkpoint),
                }
                if plan.checkpoint
                else None
            ),
            "created_at": runs.utc_now(),
            "status": "running",
            "checkpoints": [],
        }
        (self.dir / "params").mkdir(parents=True)
        runs.atomic_write_text(self.dir / "params" / "agent.yaml", configs.to_yaml(plan.agent_config))
        runs.atomic_write_text(self.dir / "params" / "env.yaml", configs.to_yaml(plan.env_config))
        self.write()

    def write(self) -> None:
        runs.write_manifest(self.dir, self.manifest)

    def finish(self, status: str, **fields: Any) -> None:
        self.manifest.update(status=status, finished_at=runs.utc_now(), **fields)
        self.write()


@contextlib.contextmanager
def _console(plan: _Plan, verbose: bool, run_dir: Path | None = None) -> Iterator[None]:
    """Send the library's console output to `<run_dir>/console.log` (nowhere without a run directory)
    unless `verbose`: what it prints (stdout) and what its loggers (the adapter's `LOGGERS`) write.

    The loggers get one handler writing there for the span, then their own handlers back (the logging
    guard would restore them too).
    """
    if verbose:
        yield
        return
    import logging

    with contextlib.ExitStack() as stack:
        log = None if run_dir is None else stack.enter_context(open(run_dir / "console.log", "a", encoding="utf-8"))
        stack.enter_context(contextlib.redirect_stdout(log))  # type: ignore[type-var]
        for name in getattr(plan.adapter, "LOGGERS", ()):
            logger = logging.getLogger(name)
            handler: logging.Handler = logging.NullHandler() if log is None else logging.StreamHandler(log)
            if logger.handlers and logger.handlers[0].formatter is not None:
                handler.setFormatter(logger.handlers[0].formatter)
            stack.callback(setattr, logger, "handlers", logger.handlers)
            logger.handlers = [handler]
        yield


def _resumed_iteration(plan: _Plan) -> int:
    """The iteration the parent run recorded for the checkpoint being resumed (0 for a file outside a run)."""
    if plan.checkpoint is None or plan.checkpoint_run is None:
        return 0
    for entry in plan.checkpoint_run.checkpoints:
        if (plan.checkpoint_run.path / entry["file"]).resolve() == plan.checkpoint.resolve():
            return int(entry.get("iteration") or 0)
    return 0


def train_in(call: Call, request: TrainRequest, progress: Progress | None = None) -> TrainResult:
    """`train` within an already open hermetic call (the CLI opens one around argument parsing)."""
    plan = _plan_train(call, request)
    per_iteration = plan.adapter.env_steps_per_iteration(plan.agent_config, plan.num_envs)
    with call.guarded(), _collected(), fresh_torch_state(), _determinism(request.deterministic, plan.device):
        _seed_everything(plan.seed)
        on_step = None if progress is None else (lambda stats: progress.update(stats.env_steps, stats.mean_return()))
        env = _make_env(plan, request.vectorization, render=request.video)
        record: _RunRecord | None = None
        video: _Video | None = None
        started = time.perf_counter()
        try:
            record = _RunRecord(plan, request)
            if request.video:
                video = _Video(
                    record.dir / "videos" / "train", request.video_length, request.video_interval, "rl-video"
                )
            env = _instrument(env, video, on_step)
            if progress is not None:
                progress.start(
                    f"train {plan.library.name} {plan.task}",
                    plan.max_iterations * per_iteration,
                    per_iteration,
                )

            def save_checkpoint(name: str, write: Any, iteration: int) -> Path:
                path = record.dir / name
                runs.atomic_save(path, write)
                entries = record.manifest["checkpoints"]
                entries[:] = [entry for entry in entries if entry["file"] != name]  # a file saved again (best_agent)
                entries.append(
                    {
                        "file": name,
                        "iteration": iteration,
                        "env_steps": env.env_steps,
                        "mean_return": env.mean_return(),
                        "saved_at": runs.utc_now(),
                    }
                )
                record.write()
                return path

            job_config = plan.adapter.run_config(plan.agent_config)
            from rlrun.libraries.base import TrainJob

            job = TrainJob(
                env=env,
                stats=env,
                config=job_config,
                max_iterations=plan.max_iterations,
                seed=plan.seed,
                device=plan.device,
                run_dir=record.dir,
                save_checkpoint=save_checkpoint,
                resume_from=plan.checkpoint,
                resume_iteration=_resumed_iteration(plan),
                deterministic=request.deterministic,
                algorithm=plan.algorithm,
                ml_framework=plan.ml_framework,
            )
            with _console(plan, request.verbose, record.dir):
                outcome = plan.adapter.train(job)
            wall = time.perf_counter() - started
            env.close()  # writes the last video clip
            result = TrainResult(
                task=plan.task,
                library=plan.library.name,
                run_dir=record.dir,
                checkpoint=outcome.checkpoint,
                seed=plan.seed,
                num_envs=plan.num_envs,
                iterations=outcome.iterations,
                env_steps=env.env_steps,
                episodes=len(env.episode_returns),
                mean_return=env.mean_return(),
                steps_per_s=env.env_steps / wall if wall > 0 else 0.0,
                wall_time_s=wall,
                videos=video.files() if video else (),
            )
            record.finish("completed", result=_jsonable(result))
            return result
        except BaseException as error:
            if record is not None:
                status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
                try:
                    record.finish(status, error=f"{type(error).__name__}: {error}")
                except Exception as manifest_error:  # never mask the call's own exception
                    error.add_note(f"rlrun: could not mark the run {status}: {manifest_error!r}")
            raise
        finally:
            if progress is not None:
                progress.stop()
            env.close()


def play_in(call: Call, request: PlayRequest, progress: Progress | None = None) -> PlayResult:
    """`play` within an already open hermetic call."""
    plan = _plan_play(call, request)
    with call.guarded(), _collected(), fresh_torch_state():
        _seed_everything(plan.seed)
        env = _make_env(plan, request.vectorization, render=request.video)
        try:
            from rlrun.libraries.base import PlayJob

            job = PlayJob(
                env=env,
                config=plan.adapter.run_config(plan.agent_config),
                checkpoint=plan.checkpoint,  # type: ignore[arg-type]
                device=plan.device,
                deterministic=request.deterministic,
                algorithm=plan.algorithm,
                ml_framework=plan.ml_framework,
                seed=plan.seed,
            )
            with _console(plan, request.verbose):
                policy = plan.adapter.load_policy(job)
            video = None
            if request.video:
                home = plan.checkpoint_run.path if plan.checkpoint_run else plan.checkpoint.parent  # type: ignore[union-attr]
                video = _Video(
                    home / "videos" / "play", request.video_length, None, _video_prefix(plan.checkpoint.stem)
                )  # type: ignore[union-attr]
            env = _instrument(env, video)
            if progress is not None:
                progress.start(f"play {plan.library.name} {plan.task}", None, None)
            episodes = rollout.evaluate(
                env,
                policy,
                num_episodes=request.num_episodes,
                max_steps=request.max_steps or _default_max_steps(plan),
                seed=plan.seed,
                progress=progress,
            )
            env.close()  # writes the video
            return _play_result(plan, plan.library.name, episodes, video)
        finally:
            if progress is not None:
                progress.stop()
            env.close()


EXPORT_FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
EXPORT_IMPORTS = ("torch.onnx", "onnx", "onnxscript", "torch.jit")


def _plan_export(call: Call, request: ExportRequest) -> tuple[_Plan, list[str]]:
    formats = list(EXPORT_FORMATS) if request.format == "both" else [request.format]
    if request.format != "both" and request.format not in EXPORT_FORMATS:
        choices = ", ".join([*EXPORT_FORMATS, "both"])
        raise InvalidArgument(f"--format {request.format!r} is not one of {choices}.")
    _check_int(request.validation_steps, "the number of validation steps", minimum=1, flag="--validation_steps")
    plan = _plan(call, request)
    _check_exportable(plan, request.ml_framework if request.ml_framework in plan.library.frameworks else "torch")  # type: ignore[union-attr]
    _resolve_checkpoint(plan, request, request.checkpoint or "latest")
    _finish_plan(call, plan, request, plan.checkpoint_run.manifest if plan.checkpoint_run else {})
    _check_exportable(plan, plan.ml_framework)
    call.import_modules(EXPORT_IMPORTS[: 3 if "onnx" in formats else 0] + ("onnxruntime",) * _has("onnxruntime"))
    _configs(plan, request.overrides)
    plan.num_envs = request.num_envs or 8
    plan.seed = _resolve_seed(request.seed, plan.agent_config.get("seed"))
    return plan, formats


def _check_exportable(plan: _Plan, framework: str) -> None:
    name = plan.library.name  # type: ignore[union-attr]
    if not hasattr(plan.adapter, "export_policy"):
        raise InvalidArgument(f"rlrun cannot export {name} policies yet.")
    if framework != "torch":
        raise InvalidArgument(
            f"rlrun exports PyTorch policies only, and this {name} agent runs on {framework}; "
            "train it with --ml_framework torch to export it."
        )


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def export_in(call: Call, request: ExportRequest) -> ExportResult:
    """`export` within an already open hermetic call."""
    plan, formats = _plan_export(call, request)
    with call.guarded(), _collected(), fresh_torch_state():
        import torch

        _seed_everything(plan.seed)
        env = _make_env(plan, request.vectorization)
        try:
            from rlrun.libraries.base import PlayJob

            job = PlayJob(
                env=env,
                config=plan.adapter.run_config(plan.agent_config),  # type: ignore[union-attr]
                checkpoint=plan.checkpoint,  # type: ignore[arg-type]
                device=plan.device,
                deterministic=True,
                algorithm=plan.algorithm,
                ml_framework=plan.ml_framework,
                seed=plan.seed,
            )
            with _console(plan, request.verbose):
                module = plan.adapter.export_policy(job).eval()  # type: ignore[union-attr]
            observations = _validation_observations(env, module, request.validation_steps, plan.seed)
            with torch.inference_mode():
                expected = module(observations)
            directory = (plan.checkpoint_run.path if plan.checkpoint_run else plan.checkpoint.parent) / "exported"  # type: ignore[union-attr]
            directory.mkdir(parents=True, exist_ok=True)
            files, errors = [], {}
            # ONNX from the trace too: modules that libraries script (rl_games' normaliser) export that way.
            example = observations[:1]
            traced = torch.jit.trace(module, example)
            for name in formats:
                path = directory / EXPORT_FORMATS[name]
                runs.atomic_save(path, lambda temporary, name=name: _write_export(name, traced, example, temporary))
                files.append(path)
                exported = _run_export(name, path, observations)
                if exported is not None:
                    errors[path.name] = float((exported - expected.to(exported.dtype)).abs().max())
            return ExportResult(
                task=plan.task,
                library=plan.library.name,  # type: ignore[union-attr]
                checkpoint=plan.checkpoint,  # type: ignore[arg-type]
                files=tuple(files),
                max_abs_error=errors,
            )
        finally:
            env.close()


def _validation_observations(env: Any, module: Any, steps: int, seed: int) -> Any:
    """Observations the policy really meets: a short deterministic rollout of the policy itself."""
    import torch

    observations, _ = env.reset(seed=seed)
    seen = []
    low = high = None
    space = env.single_action_space
    if hasattr(space, "low"):
        low = torch.as_tensor(space.low, dtype=torch.float32, device=env.device)
        high = torch.as_tensor(space.high, dtype=torch.float32, device=env.device)
    for _ in range(steps):
        seen.append(observations.to("cpu", torch.float32))
        with torch.inference_mode():
            actions = module(observations.to("cpu", torch.float32)).to(env.device)
        if low is not None:
            actions = torch.clamp(actions, low, high)
        observations, *_ = env.step(actions)
    return torch.cat(seen)


def _write_export(name: str, traced: Any, example: Any, path: str) -> None:
    """Write the traced policy as TorchScript or ONNX (a dynamic batch dimension) to `path`."""
    import torch

    if name == "torchscript":
        traced.save(path)
    else:
        with warnings.catch_warnings():  # the exporter reads no signature from a traced module: nothing to act on
            warnings.filterwarnings("ignore", message="no signature found", category=UserWarning)
            torch.onnx.export(
                traced,
                (example,),
                path,
                input_names=["obs"],
                output_names=["actions"],
                dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
                opset_version=18,
                dynamo=False,
            )


def _run_export(name: str, path: Path, observations: Any) -> Any:
    """The exported file's actions on `observations` (None when onnxruntime is not installed)."""
    import torch

    if name == "torchscript":
        with torch.inference_mode():
            return torch.jit.load(str(path))(observations)
    if not _has("onnxruntime"):
        return None
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return torch.from_numpy(session.run(None, {"obs": observations.numpy()})[0])


AGENTS = ("zero", "random")


def _plan_agent(call: Call, request: AgentRequest) -> _Plan:
    _check_common(request)
    _check_int(request.num_episodes, "the number of episodes", minimum=1, flag="--num_episodes")
    _check_int(request.max_steps, "the number of steps", minimum=1, flag="--max_steps")
    _import_core(call, request)
    from rlrun.envs import env_config, resolve_task

    task = resolve_task(request.task)
    scoped = configs.split_overrides(request.overrides)
    if scoped["agent"]:
        raise InvalidArgument(
            f"the zero and random agents have no agent configuration: drop {'agent.' + scoped['agent'][0]!r}."
        )
    return _Plan(
        task=task,
        library=None,
        adapter=None,
        device=_resolve_device(request.device),
        log_root=Path(request.log_root).absolute(),
        experiment=runs.experiment_name(task),
        env_config=configs.apply_overrides(env_config(task), scoped["env"], scope="env"),
        num_envs=request.num_envs or 4,
        seed=_resolve_seed(request.seed, None),
    )


def agent_in(call: Call, request: AgentRequest, kind: str, progress: Progress | None = None) -> PlayResult:
    """`zero_agent` / `random_agent` within an already open hermetic call."""
    plan = _plan_agent(call, request)
    with call.guarded(), _collected(), fresh_torch_state():
        _seed_everything(plan.seed)
        env = _make_env(plan, request.vectorization, render=request.video)
        try:
            video = None
            if request.video:
                folder = plan.log_root / f"{kind}_agent" / plan.experiment / "videos"
                video = _Video(folder, request.video_length, None, _video_prefix(kind))
            env = _instrument(env, video)
            policy = rollout.zero_policy(env) if kind == "zero" else rollout.random_policy(env, plan.seed)
            if progress is not None:
                progress.start(
                    f"{kind} agent {plan.task}", request.max_steps and request.max_steps * plan.num_envs, None
                )
            num_episodes = request.num_episodes or (None if request.max_steps else 10)
            episodes = rollout.evaluate(
                env,
                policy,
                num_episodes=num_episodes,
                max_steps=request.max_steps or _default_max_steps(plan),
                seed=plan.seed,
                progress=progress,
            )
            env.close()  # writes the video
            return _play_result(plan, kind, episodes, video)
        finally:
            if progress is not None:
                progress.stop()
            env.close()


def _default_max_steps(plan: _Plan) -> int:
    """A bound on vector steps for tasks whose episodes might never end: 100 episode lengths."""
    return 100 * int(plan.env_config.get("max_episode_steps") or 1000)


def _video_prefix(name: str) -> str:
    """A clip name that no earlier clip in the same folder has: `<name>-<YYYY-MM-DD_HH-MM-SS-ffffff>`."""
    import datetime

    return f"{name}-{datetime.datetime.now().strftime('%Y-%m-%d_%H-%M-%S-%f')}"


def _play_result(plan: _Plan, library: str, episodes: rollout.Episodes, video: _Video | None = None) -> PlayResult:
    return PlayResult(
        task=plan.task,
        library=library,
        checkpoint=plan.checkpoint,
        run_dir=plan.checkpoint_run.path if plan.checkpoint_run else None,
        returns=episodes.returns,
        lengths=episodes.lengths,
        mean_return=episodes.mean_return,
        std_return=episodes.std_return,
        mean_length=episodes.mean_length,
        env_steps=episodes.env_steps,
        steps_per_s=episodes.env_steps / max(episodes.wall_time_s, 1e-9),
        videos=video.files() if video else (),
    )


@contextlib.contextmanager
def _collected() -> Iterator[None]:
    """Free what the call left in reference cycles before the scope restores and the detector looks.

    Library objects that own processes or files and are only released by the cycle collector would
    otherwise outlive the call: GitPython's `Repo` (which RSL-RL's logger creates to record the code
    state) keeps two `git cat-file` child processes until it is collected. Everything that existed
    before the call is frozen out of the collection (`gc.freeze`), so it costs microseconds instead of
    a walk over every object of the process (0.6 s once rl_games is imported); a caller's own freeze is
    left alone.
    """
    import gc

    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        yield
    finally:
        gc.collect()
        if freeze:
            gc.unfreeze()


def _jsonable(result: Any) -> dict[str, Any]:
    return {
        key: str(value) if isinstance(value, Path) else value
        for key, value in dataclasses.asdict(result).items()
        if not isinstance(value, (tuple, list)) or len(value) < 1000
    }


__all__ = [
    "AgentRequest",
    "ExportRequest",
    "ExportResult",
    "LibraryRequest",
    "PlayRequest",
    "PlayResult",
    "TaskRequest",
    "TrainRequest",
    "TrainResult",
    "UserError",
    "export",
    "play",
    "random_agent",
    "train",
    "zero_agent",
]
