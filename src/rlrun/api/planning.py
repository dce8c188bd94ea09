"""Planning: a request validated into a complete, typed plan before anything changes.

Each call kind has its plan type (`rlrun.api.plans`: TrainPlan, PlayPlan, ExportPlan, AgentPlan), built once
and whole: every number checked, the task resolved, the library chosen and imported, the device,
seed, checkpoint, algorithm, framework and configurations settled. Planning imports what the call
will need (import effects belong to the import, see `rlrun.hermetic.scope`) but changes nothing
else and makes no directory; a request it rejects raises a `UserError` and leaves no trace.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import re
import secrets
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rlrun import configs, runs
from rlrun.api.curves import CURVE_IMPORTS
from rlrun.api.plans import AgentPlan, ExportPlan, PlayPlan, TrainPlan
from rlrun.api.requests import (
    EXPORT_FORMATS,
    VECTORIZATION_MODES,
    AgentRequest,
    ExportRequest,
    LibraryRequest,
    PlayRequest,
    TaskRequest,
    TrainRequest,
)
from rlrun.errors import CorruptCheckpoint, InvalidArgument, MissingDependency, UnsupportedTask, UserError, did_you_mean
from rlrun.hermetic import Call
from rlrun.libraries import LIBRARIES, Library, check_installed, get_library, libraries_for, load_adapter
from rlrun.libraries.base import Adapter

CORE_IMPORTS = ("numpy", "torch", "torch._dynamo", "gymnasium", "rlrun.envs", "rlrun.envs.plugins")
"""Imported before any capture. `torch._dynamo` is what the first `optimizer.step()` of a process
imports lazily (2 s, an env var, warning filters, atexit hooks): an import effect, not the call's.
`rlrun.envs.plugins` registers the installed packages' `rlrun.tasks` as it is imported."""
VIDEO_IMPORTS = (
    "pygame",
    "moviepy",
    "moviepy.video.io.ImageSequenceClip",
    "imageio_ffmpeg",
    "gymnasium.wrappers.vector",
)
EXPORT_IMPORTS = ("torch.onnx", "onnx", "onnxscript", "torch.jit")
AGENTS = ("zero", "random")
"""The agents that need no library (`rlrun zero`, `rlrun random`)."""

RequestT = TypeVar("RequestT", bound=TaskRequest)

MAX_NUM_ENVS = 1 << 20
MAX_SEED = 2**32 - 1


# --- the plan of each call kind -----------------------------------------------------------------------------


def plan_train(call: Call, request: TrainRequest) -> TrainPlan:
    """Validate a training request; with `resume`, find the checkpoint and take the run's configuration."""
    _check_request_type(request, TrainRequest, "train")
    request = _normalised(request)
    target = _target(call, request)
    _check_int(request.max_iterations, "the number of iterations", minimum=1, flag="--max_iterations")
    if request.run_name is not None:
        runs.check_name(request.run_name, "--run_name")
    if request.video:
        _check_int(request.video_interval, "the video interval", minimum=1, flag="--video_interval")
    checkpoint: Path | None = None
    checkpoint_run: runs.Run | None = None
    if request.resume or request.checkpoint is not None or request.load_run is not None:
        if not request.resume:
            raise InvalidArgument("--checkpoint and --load_run continue a run only with --resume; add --resume.")
        checkpoint, checkpoint_run = _resolve_checkpoint(target, request, request.checkpoint or "latest")
    settled = _settle(call, target, request, checkpoint, checkpoint_run)
    call.import_modules(CURVE_IMPORTS)  # the run's rlrun/* TensorBoard curves
    agent, environment, source = _configs(
        target, settled.algorithm, checkpoint_run, request.overrides, request.agent_config
    )
    num_envs = request.num_envs or agent.get("num_envs", 1)
    _check_int(num_envs, "the number of environments", minimum=1, maximum=MAX_NUM_ENVS, flag="agent.num_envs")
    _check_int(agent.get("max_iterations"), "the number of iterations", minimum=1, flag="agent.max_iterations")
    if request.seed is None and agent.get("seed") != -1:
        _check_int(agent.get("seed"), "the seed", minimum=0, maximum=MAX_SEED, flag="agent.seed")
    library_config = configs.library_config(agent)
    return TrainPlan(
        **_task_fields(target, request, environment, num_envs, _resolve_seed(request.seed, agent.get("seed"))),
        **_library_fields(target, settled, agent, library_config, checkpoint_run, request.verbose),
        max_iterations=request.max_iterations or int(agent.get("max_iterations", 1)),
        env_steps_per_iteration=_steps_per_iteration(target, library_config, num_envs),
        agent_config_source=source,
        resume_from=checkpoint,
        resume_iteration=_recorded_iteration(checkpoint, checkpoint_run),
        run_name=request.run_name,
        deterministic=request.deterministic,
        video_interval=request.video_interval,
        argv=request.argv,
    )


def plan_play(call: Call, request: PlayRequest) -> PlayPlan:
    """Validate an evaluation request and find its checkpoint."""
    _check_request_type(request, PlayRequest, "play")
    request = _normalised(request)
    target = _target(call, request)
    _check_int(request.num_episodes, "the number of episodes", minimum=1, flag="--num_episodes")
    _check_int(request.max_steps, "the number of steps", minimum=1, flag="--max_steps")
    checkpoint, checkpoint_run = _resolve_checkpoint(target, request, request.checkpoint or "latest")
    settled = _settle(call, target, request, checkpoint, checkpoint_run)
    agent, environment, _ = _configs(target, settled.algorithm, checkpoint_run, request.overrides)
    num_envs = request.num_envs or min(request.num_episodes, 64)
    return PlayPlan(
        **_task_fields(target, request, environment, num_envs, _resolve_seed(request.seed, agent.get("seed"))),
        **_library_fields(target, settled, agent, configs.library_config(agent), checkpoint_run, request.verbose),
        checkpoint=checkpoint,
        num_episodes=request.num_episodes,
        max_steps=request.max_steps or _default_max_steps(environment),
        deterministic=request.deterministic,
    )


def plan_export(call: Call, request: ExportRequest) -> ExportPlan:
    """Validate an export request, find its checkpoint and import the exporters."""
    _check_request_type(request, ExportRequest, "export")
    request = _normalised(request)
    formats = tuple(EXPORT_FORMATS) if request.format == "both" else (request.format,)
    if request.format != "both" and request.format not in EXPORT_FORMATS:
        choices = ", ".join([*EXPORT_FORMATS, "both"])
        raise InvalidArgument(
            f"--format {request.format!r} is not one of {choices}."
            f"{did_you_mean(str(request.format), [*EXPORT_FORMATS, 'both'])}"
        )
    _check_int(request.validation_steps, "the number of validation steps", minimum=1, flag="--validation_steps")
    target = _target(call, request)
    if request.ml_framework is not None and request.ml_framework != "torch":
        _check_framework(target.library, request.ml_framework)
        raise InvalidArgument(
            f"rlrun exports PyTorch policies only, not {request.ml_framework} ones; "
            f"export a {target.library.name} run trained with --ml_framework torch (drop --ml_framework)."
        )
    # Only PyTorch runs can be exported, so `latest` and `best` look among those alone.
    checkpoint, checkpoint_run = _resolve_checkpoint(target, request, request.checkpoint or "latest", "torch")
    settled = _settle(call, target, request, checkpoint, checkpoint_run)
    if settled.ml_framework != "torch":
        raise InvalidArgument(
            f"rlrun exports PyTorch policies only, and this {target.library.name} agent runs on "
            f"{settled.ml_framework}; train it with --ml_framework torch to export it."
        )
    call.import_modules(EXPORT_IMPORTS[: 3 if "onnx" in formats else 0] + ("onnxruntime",) * has("onnxruntime"))
    agent, environment, _ = _configs(target, settled.algorithm, checkpoint_run, request.overrides)
    return ExportPlan(
        **_task_fields(
            target, request, environment, request.num_envs or 8, _resolve_seed(request.seed, agent.get("seed"))
        ),
        **_library_fields(target, settled, agent, configs.library_config(agent), checkpoint_run, request.verbose),
        checkpoint=checkpoint,
        formats=formats,
        validation_steps=request.validation_steps,
    )


def plan_agent(call: Call, request: AgentRequest, kind: str) -> AgentPlan:
    """Validate a zero or random agent's request (no library, so no agent configuration)."""
    _check_request_type(request, AgentRequest, f"{kind}_agent")
    request = _normalised(request)
    _check_common(request)
    _check_int(request.num_episodes, "the number of episodes", minimum=1, flag="--num_episodes")
    _check_int(request.max_steps, "the number of steps", minimum=1, flag="--max_steps")
    if request.video:
        runs.check_log_root(request.log_root)
    import_core(call, request.video)
    from rlrun.envs import env_config, resolve_task

    task = resolve_task(request.task, call.import_modules)  # `module:id`: the module is imported
    _check_renderable(task, request.video)
    scoped = configs.split_overrides(request.overrides)
    if scoped["agent"]:
        raise InvalidArgument(
            f"the zero and random agents have no agent configuration: drop {'agent.' + scoped['agent'][0]!r}."
        )
    with env_errors(task):
        defaults = env_config(task)
    environment = configs.apply_overrides(defaults, scoped["env"], scope="env")
    return AgentPlan(
        task=task,
        device=_resolve_device(request.device),
        log_root=Path(request.log_root).absolute(),
        experiment=runs.experiment_name(task),
        env_config=environment,
        num_envs=request.num_envs or 4,
        seed=_resolve_seed(request.seed, None),
        vectorization=request.vectorization,
        video=request.video,
        video_length=request.video_length,
        threads=pick_threads(request.threads, request.num_envs or 4),
        kind=kind,
        num_episodes=request.num_episodes or (None if request.max_steps else 10),
        max_steps=request.max_steps or _default_max_steps(environment),
    )


# --- what the plans share -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """The task, library and device a library request names, resolved."""

    task: str
    library: Library
    adapter: Adapter
    device: str
    log_root: Path
    experiment: str


@dataclass(frozen=True)
class _Settled:
    """Algorithm and framework: asked for, else the checkpoint's, else the defaults."""

    algorithm: str
    ml_framework: str
    device: str


def _task_fields(
    target: _Target, request: TaskRequest, environment: dict[str, Any], num_envs: int, seed: int
) -> dict[str, Any]:
    return dict(
        task=target.task,
        log_root=target.log_root,
        experiment=target.experiment,
        env_config=environment,
        num_envs=num_envs,
        seed=seed,
        vectorization=request.vectorization,
        video=request.video,
        video_length=request.video_length,
        threads=pick_threads(request.threads, num_envs),
    )


def pick_threads(requested: int | None, num_envs: int, cores: int | None = None) -> int:
    """torch intra-op threads for a call: `requested`, else one thread per 16,384 environments, at most
    half the cores this process may use, and one on a machine of 2 cores or fewer.

    Small ops (a step of a few thousand environments, a small MLP's update) run fastest on one thread,
    and with more threads than free cores every op waits for a thread that another process holds: on 2
    shared cores, a training at torch's default ran up to 8x slower than at one thread
    (`benchmarks/shared_cpu.py`). Large batches on a large machine still get several threads. The
    caller's own setting comes back after the call (the `torch intra-op threads` guard).
    """
    if requested is not None:
        return requested
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores <= 2:
        return 1
    return max(1, min(cores // 2, num_envs // 16_384))


def _library_fields(
    target: _Target,
    settled: _Settled,
    agent: dict[str, Any],
    library_config: dict[str, Any],
    checkpoint_run: runs.Run | None,
    verbose: bool,
) -> dict[str, Any]:
    return dict(
        device=settled.device,
        library=target.library,
        adapter=target.adapter,
        algorithm=settled.algorithm,
        ml_framework=settled.ml_framework,
        agent_config=agent,
        library_config=library_config,
        checkpoint_run=checkpoint_run,
        verbose=verbose,
    )


def import_core(call: Call, video: bool) -> None:
    """Import what every call that runs a task needs (and the video writer's modules, with `video`)."""
    call.import_modules(CORE_IMPORTS)
    if resource_tracker_due():
        call.prepare(start_resource_tracker)
    if video:
        call.import_modules([name for name in VIDEO_IMPORTS if has(name.partition(".")[0])])


def resource_tracker_due() -> bool:
    """Whether the start method is `spawn` or `forkserver` and multiprocessing's resource tracker has not started."""
    import multiprocessing
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    running = getattr(tracker, "_pid", None) is not None
    return not running and multiprocessing.get_start_method(allow_none=True) in ("spawn", "forkserver")


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker process now, as an effect of the import phase: under `spawn`
    or `forkserver`, the first lock or queue a library makes would start it inside the call (tqdm's bar lock,
    tensorboardX's event queue), for the rest of the process. Stopping it after the call instead would unlink
    the semaphores of locks that live on (tqdm's), so it is started before, as a fresh process running the
    library would have it. Under `fork` (Linux's default) nothing needs it (`resource_tracker_due`)."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def _target(call: Call, request: LibraryRequest) -> _Target:
    """What train, play and export validate alike: numbers, task, library, device, log root."""
    _check_common(request)
    if request.experiment is not None:
        runs.check_name(request.experiment, "--experiment_name")
    runs.check_log_root(request.log_root)
    import_core(call, request.video)
    from rlrun.envs import resolve_task

    task = resolve_task(request.task, call.import_modules)  # `module:id`: the module is imported
    _check_renderable(task, request.video)
    library = _choose_library(call, task, request.library)
    return _Target(
        task=task,
        library=library,
        adapter=load_adapter(library),
        device=_resolve_device(request.device),
        log_root=Path(request.log_root).absolute(),
        experiment=request.experiment or runs.experiment_name(task),
    )


CASE_FREE_FIELDS = ("library", "algorithm", "ml_framework", "format", "vectorization", "device")
"""Fields whose values are names, compared without regard to case everywhere (`PPO`, `JAX`, `ONNX`)."""


def _normalised(request: RequestT) -> RequestT:
    """The request with every case-free name lower-cased."""
    changes = {
        name: getattr(request, name).lower()
        for name in CASE_FREE_FIELDS
        if isinstance(getattr(request, name, None), str) and getattr(request, name) != getattr(request, name).lower()
    }
    return dataclasses.replace(request, **changes) if changes else request


def _check_request_type(request: Any, expected: type, call: str) -> None:
    if not isinstance(request, expected):
        raise InvalidArgument(
            f"rlrun.{call} takes a {expected.__name__}, not {type(request).__name__}; "
            f"build the request with rlrun.{expected.__name__}(task=...)."
        )


def _check_int(value: Any, name: str, *, minimum: int, maximum: int | None = None, flag: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{flag} must be an integer, not {value!r}.")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise InvalidArgument(f"{flag} {value} is out of range: {name} must be {bound}.")


def _check_field_types(request: Any) -> None:
    """Every field of a request holds a value of its declared type (the API has no argparse to convert)."""
    import typing

    hints = typing.get_type_hints(type(request))
    for item in dataclasses.fields(request):
        value, kind = getattr(request, item.name), hints[item.name]
        allowed = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else (kind,)
        plain = tuple(typing.get_origin(option) or option for option in allowed)
        if tuple in plain:
            plain = (*plain, list)  # a list of words is as good as a tuple (and what JSON gives)
        if bool not in plain and isinstance(value, bool) and int in plain:
            ok = False
        else:
            ok = any(option is type(None) and value is None for option in allowed) or isinstance(
                value, tuple(option for option in plain if option is not type(None))
            )
        if ok and isinstance(value, tuple | list):
            ok = all(isinstance(word, str) for word in value)
        if not ok:
            names = " or ".join(getattr(option, "__name__", str(option)) for option in plain)
            names = names.replace("NoneType", "None")
            raise InvalidArgument(
                f"{type(request).__name__}.{item.name} must be {names}, not {value!r}; "
                f"pass {item.name}= a value of that type."
            )


def _check_common(request: TaskRequest) -> None:
    _check_field_types(request)
    if not isinstance(request.task, str) or not request.task:
        raise InvalidArgument(f"--task must name a task, not {request.task!r} (see `rlrun list`).")
    _check_int(request.num_envs, "the number of environments", minimum=1, maximum=MAX_NUM_ENVS, flag="--num_envs")
    _check_int(request.threads, "the number of threads", minimum=1, maximum=1024, flag="--threads")
    if request.seed != -1:
        _check_int(request.seed, "the seed", minimum=0, maximum=MAX_SEED, flag="--seed")
    if request.vectorization not in VECTORIZATION_MODES:
        raise InvalidArgument(
            f"--vectorization {request.vectorization!r} is not one of {', '.join(VECTORIZATION_MODES)}."
            f"{did_you_mean(str(request.vectorization), VECTORIZATION_MODES)}"
        )
    if request.video:
        _check_int(request.video_length, "the video length", minimum=1, flag="--video_length")
        if not has("moviepy"):
            raise MissingDependency(
                "recording videos needs moviepy, which is not installed: pip install 'rlrun[video]'"
            )
    if isinstance(request.overrides, str):
        raise InvalidArgument("overrides must be a sequence of 'agent.key=value' strings, not one string.")


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


def has(module: str) -> bool:
    """Whether `module` can be imported (found without importing it)."""
    return importlib.util.find_spec(module) is not None


def _jax_has_cuda() -> bool:
    """Whether a CUDA build of jaxlib is installed (found without importing or initialising JAX)."""
    return any(has(name) for name in ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_cuda12_pjrt"))


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

    with call.guarded(), env_errors(task):
        env = gymnasium.make(task)
        try:
            return type(env.action_space).__name__
        finally:
            env.close()


@contextlib.contextmanager
def env_errors(task: str) -> Iterator[None]:
    """Turn Gymnasium's "a dependency of this task is missing" into a one-line user error naming the extra."""
    import gymnasium

    try:
        yield
    except gymnasium.error.DependencyNotInstalled as error:
        raise MissingDependency(f"task {task!r} cannot be made here: {error}") from None


def _check_renderable(task: str, video: bool) -> None:
    """Refuse `--video` for a MuJoCo task when no OpenGL backend is chosen and there is no display."""
    if not video or os.environ.get("MUJOCO_GL") or os.environ.get("DISPLAY"):
        return
    import gymnasium

    spec = gymnasium.registry.get(task)
    if spec is not None and "mujoco" in str(spec.entry_point):
        raise MissingDependency(
            f"recording {task} needs an OpenGL backend for MuJoCo and this process has no display; "
            "set MUJOCO_GL=egl (or MUJOCO_GL=osmesa) in the environment, or drop --video."
        )


def _resolve_checkpoint(
    target: _Target, request: LibraryRequest, selector: str, framework: str | None = None
) -> tuple[Path, runs.Run | None]:
    """Find the checkpoint; runs of another algorithm or framework than the one asked for do not count."""
    if selector not in runs.SELECTORS:
        runs.check_path(selector, "--checkpoint")
    wanted = {
        "algorithm": request.algorithm and request.algorithm.lower(),
        "ml_framework": request.ml_framework or framework,
    }
    checkpoint, run = runs.resolve_checkpoint(
        selector,
        log_root=request.log_root,
        library=target.library.name,
        task=target.task,
        experiment=request.experiment,
        load_run=request.load_run,
        match={key: value for key, value in wanted.items() if value is not None},
    )
    manifest = run.manifest if run is not None else {}
    for key, expected, flag in (("task", target.task, "--task"), ("library", target.library.name, "--library")):
        if manifest.get(key, expected) != expected:
            raise InvalidArgument(
                f"checkpoint {str(checkpoint)!r} was trained on {key} {manifest[key]!r}, not {expected!r}; "
                f"pass {flag} {manifest[key]} or another checkpoint."
            )
    return checkpoint, run


def _settle(
    call: Call, target: _Target, request: LibraryRequest, checkpoint: Path | None, run: runs.Run | None
) -> _Settled:
    """Settle algorithm and framework (asked for, else the checkpoint's, else the defaults), import the
    library for that framework and check the checkpoint is one of its own."""
    manifest = run.manifest if run is not None else {}
    library, adapter = target.library, target.adapter
    framework = request.ml_framework or manifest.get("ml_framework") or library.frameworks[0]
    _check_framework(library, framework)
    device = target.device
    if framework == "jax" and request.device is None and device.startswith("cuda") and not _jax_has_cuda():
        device = "cpu"  # torch sees a GPU, but this JAX was installed for the CPU only
    call.import_modules(adapter.IMPORTS[framework])
    algorithm = request.algorithm or manifest.get("algorithm") or adapter.DEFAULT_ALGORITHM
    if algorithm.lower() not in adapter.ALGORITHMS:
        close = did_you_mean(algorithm.lower(), adapter.ALGORITHMS, listing=0)
        raise InvalidArgument(
            f"--algorithm {algorithm!r} is not one rlrun runs with {library.name}.{close} "
            f"Choose from: {', '.join(adapter.ALGORITHMS)}."
        )
    if checkpoint is not None:
        try:
            adapter.check_checkpoint(checkpoint)
        except CorruptCheckpoint as error:
            owner = _identify_checkpoint(checkpoint, other_than=library.name)
            if owner is None:
                raise
            raise InvalidArgument(
                f"checkpoint {str(checkpoint)!r} is a {owner} checkpoint, not a {library.name} one; "
                f"pass --library {owner}."
            ) from error
    return _Settled(algorithm=algorithm.lower(), ml_framework=framework, device=device)


def _check_framework(library: Library, framework: str) -> None:
    if framework not in library.frameworks:
        raise InvalidArgument(
            f"--ml_framework {framework!r} is not one {library.name} runs on: use {' or '.join(library.frameworks)}."
        )
    check_installed(library, framework)


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


def _configs(
    target: _Target, algorithm: str, run: runs.Run | None, overrides: tuple[str, ...], agent_config: str | None = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The agent and env configurations, overrides applied, and where the agent's came from: the run's own
    when continuing one, else the defaults (`configs.starting_config`); an `agent_config` file replaces either."""
    from rlrun.envs import env_config

    scoped = configs.split_overrides(overrides)
    saved = run.path / "params" if run is not None else None
    if saved is not None and (saved / "agent.yaml").is_file() and (saved / "env.yaml").is_file():
        import yaml

        agent = yaml.safe_load((saved / "agent.yaml").read_text(encoding="utf-8"))
        environment = yaml.safe_load((saved / "env.yaml").read_text(encoding="utf-8"))
        source = {"from": "run", "path": str(saved / "agent.yaml")}
    else:
        agent = source = None
        with env_errors(target.task):
            environment = env_config(target.task)
    if agent is None or agent_config is not None:
        agent, source = configs.starting_config(
            target.library.name,
            algorithm,
            target.task,
            path=agent_config,
            steps_per_iteration=target.adapter.env_steps_per_iteration,
        )
    return (
        configs.apply_overrides(agent, scoped["agent"], scope="agent"),
        configs.apply_overrides(environment, scoped["env"], scope="env"),
        source,
    )


def _steps_per_iteration(target: _Target, library_config: dict[str, Any], num_envs: int) -> int:
    """The adapter's env steps per iteration, which also checks the configuration; a key it needs and
    the configuration lacks (an `--agent_config` file of another layout) is a one-line user error."""
    try:
        return target.adapter.env_steps_per_iteration(library_config, num_envs)
    except UserError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        what = f"lacks the key {error.args[0]!r}" if isinstance(error, KeyError) else f"is not readable ({error})"
        raise InvalidArgument(
            f"the {target.library.name} agent configuration {what}; start from a run's params/agent.yaml "
            f"(rlrun train --library {target.library.name} writes one)."
        ) from None


def _recorded_iteration(checkpoint: Path | None, run: runs.Run | None) -> int:
    """The iteration the parent run recorded for the checkpoint being resumed (0 for a file outside a run)."""
    if checkpoint is None or run is None:
        return 0
    for entry in run.checkpoints:
        if (run.path / entry["file"]).resolve() == checkpoint.resolve():
            return int(entry.get("iteration") or 0)
    return 0


def _default_max_steps(environment: dict[str, Any]) -> int:
    """A bound on vector steps for tasks whose episodes might never end: 100 episode lengths."""
    return 100 * int(environment.get("max_episode_steps") or 1000)
