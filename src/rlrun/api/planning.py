"""Planning: a request validated into a complete, typed plan before anything changes.

Each call kind has its plan type (`rlrun.api.plans`: TrainPlan, PlayPlan, ExportPlan, AgentPlan), built once
and whole: every number checked, the task resolved, the library chosen and imported, the device,
seed, checkpoint, algorithm, framework and configurations settled. Planning imports what the call
will need (import effects belong to the import, see `rlrun.hermetic.scope`) but changes nothing
else and makes no directory; a request it rejects raises a `UserError` and leaves no trace.

The checks of a request's own values are `rlrun.api.checks`; what a request resolves to once its task and
library are known (checkpoint, algorithm and framework, configurations) is `rlrun.api.resolution`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlrun import configs, runs
from rlrun.api.checks import (
    MAX_NUM_ENVS,
    MAX_SEED,
    check_common,
    check_int,
    check_request_type,
    has,
    normalised,
    pick_threads,
    resolve_device,
    resolve_seed,
)
from rlrun.api.imports import (
    EXPORT_IMPORTS,
    import_core,
    import_tasks,
)
from rlrun.api.plans import AgentPlan, ExportPlan, PlayPlan, TrainPlan
from rlrun.api.requests import (
    EXPORT_FORMATS,
    AgentRequest,
    ExportRequest,
    LibraryRequest,
    PlayRequest,
    TaskRequest,
    TrainRequest,
)
from rlrun.api.resolution import (
    Settled,
    Target,
    early,
    env_errors,
    recorded_iteration,
    resolve_checkpoint,
    resolve_configs,
    settle,
    steps_per_iteration,
)
from rlrun.configs.fitting import fit_minibatch
from rlrun.configs.provenance import ran
from rlrun.errors import InvalidArgument, MissingDependency, UnsupportedTask, UserError, did_you_mean
from rlrun.hermetic import Call
from rlrun.libraries import Library, check_installed, check_sees, get_library, libraries_for, load_adapter
from rlrun.libraries.base import minibatch_keys
from rlrun.runs.metrics import CURVE_IMPORTS

Early = Callable[[Target], None]
"""A call kind's checks from data alone (`rlrun.api.resolution.early`), run before torch is imported."""
AGENTS = ("zero", "random")
"""The agents that need no library (`rlrun zero`, `rlrun random`)."""


# --- the plan of each call kind -----------------------------------------------------------------------------


def plan_train(call: Call, request: TrainRequest) -> TrainPlan:
    """Validate a training request; with `resume`, find the checkpoint and take the run's configuration."""
    check_request_type(request, TrainRequest, "train")
    request = normalised(request)
    target = _target(
        call, request, early(request, (request.checkpoint or "latest") if request.resume else None, writes=True)
    )
    check_int(request.max_iterations, "the number of iterations", minimum=1, flag="--max_iterations")
    if request.run_name is not None:
        runs.check_name(request.run_name, "--run_name")
    if request.video:
        check_int(request.video_interval, "the video interval", minimum=1, flag="--video_interval")
    checkpoint: Path | None = None
    checkpoint_run: runs.Run | None = None
    if request.resume or request.checkpoint is not None or request.load_run is not None:
        if not request.resume:
            raise InvalidArgument("--checkpoint and --load_run continue a run only with --resume; add --resume.")
        checkpoint, checkpoint_run = resolve_checkpoint(target, request, request.checkpoint or "latest")
    settled = settle(call, target, request, checkpoint, checkpoint_run)
    call.import_modules(CURVE_IMPORTS)  # the run's rlrun/* TensorBoard curves
    agent, environment, source = resolve_configs(
        target, settled.algorithm, checkpoint_run, request.overrides, request.agent_config
    )
    num_envs = request.num_envs or agent.get("num_envs", 1)
    check_int(num_envs, "the number of environments", minimum=1, maximum=MAX_NUM_ENVS, flag="agent.num_envs")
    check_int(agent.get("max_iterations"), "the number of iterations", minimum=1, flag="agent.max_iterations")
    if request.seed is None and agent.get("seed") != -1:
        check_int(agent.get("seed"), "the seed", minimum=0, maximum=MAX_SEED, flag="agent.seed")
    seed = resolve_seed(request.seed, agent.get("seed"))
    max_iterations = request.max_iterations or int(agent.get("max_iterations", 1))
    agent, fitted = fit_minibatch(
        agent,
        key=minibatch_keys(target.adapter).get(settled.algorithm),
        num_envs=num_envs,
        source=source.get("from"),
        overrides=request.overrides,
        steps=target.adapter.env_steps_per_iteration,
        minimum=2,  # SB3 refuses a minibatch of 1
    )
    # What runs is what the run records: its params/agent.yaml, fed back through --agent_config, repeats it.
    agent = ran(agent, num_envs=num_envs, max_iterations=max_iterations, seed=seed)
    library_config = configs.library_config(agent)
    return TrainPlan(
        **_task_fields(call, target, request, environment, num_envs, seed),
        **_library_fields(target, settled, agent, library_config, checkpoint_run, request.verbose),
        max_iterations=max_iterations,
        env_steps_per_iteration=steps_per_iteration(target, library_config, num_envs),
        agent_config_source={**source, "overrides": list(request.overrides), **({"fitted": fitted} if fitted else {})},
        resume_from=checkpoint,
        resume_iteration=recorded_iteration(checkpoint, checkpoint_run),
        run_name=request.run_name,
        deterministic=request.deterministic,
        video_interval=request.video_interval,
        argv=request.argv,
    )


def plan_play(call: Call, request: PlayRequest) -> PlayPlan:
    """Validate an evaluation request and find its checkpoint."""
    check_request_type(request, PlayRequest, "play")
    request = normalised(request)
    target = _target(call, request, early(request, request.checkpoint or "latest"))
    check_int(request.num_episodes, "the number of episodes", minimum=1, flag="--num_episodes")
    check_int(request.max_steps, "the number of steps", minimum=1, flag="--max_steps")
    checkpoint, checkpoint_run = resolve_checkpoint(target, request, request.checkpoint or "latest")
    settled = settle(call, target, request, checkpoint, checkpoint_run)
    agent, environment, _ = resolve_configs(target, settled.algorithm, checkpoint_run, request.overrides)
    num_envs = request.num_envs or min(request.num_episodes, 64)
    return PlayPlan(
        **_task_fields(call, target, request, environment, num_envs, resolve_seed(request.seed, agent.get("seed"))),
        **_library_fields(target, settled, agent, configs.library_config(agent), checkpoint_run, request.verbose),
        checkpoint=checkpoint,
        num_episodes=request.num_episodes,
        max_steps=request.max_steps or _default_max_steps(environment),
        deterministic=request.deterministic,
    )


def plan_export(call: Call, request: ExportRequest) -> ExportPlan:
    """Validate an export request, find its checkpoint and import the exporters."""
    check_request_type(request, ExportRequest, "export")
    request = normalised(request)
    formats = tuple(EXPORT_FORMATS) if request.format == "both" else (request.format,)
    if request.format != "both" and request.format not in EXPORT_FORMATS:
        choices = ", ".join([*EXPORT_FORMATS, "both"])
        raise InvalidArgument(
            f"--format {request.format!r} is not one of {choices}."
            f"{did_you_mean(str(request.format), [*EXPORT_FORMATS, 'both'])}"
        )
    check_int(request.validation_steps, "the number of validation steps", minimum=1, flag="--validation_steps")
    # `early` refuses another --ml_framework than torch, before the checkpoint is looked for.
    target = _target(call, request, early(request, request.checkpoint or "latest", "torch"))
    # Only PyTorch runs can be exported, so `latest` and `best` look among those alone.
    checkpoint, checkpoint_run = resolve_checkpoint(target, request, request.checkpoint or "latest", "torch")
    settled = settle(call, target, request, checkpoint, checkpoint_run)
    if settled.ml_framework != "torch":
        raise InvalidArgument(
            f"rlrun exports PyTorch policies only, and this {target.library.name} agent runs on "
            f"{settled.ml_framework}; train it with --ml_framework torch to export it."
        )
    call.import_modules(EXPORT_IMPORTS[: 3 if "onnx" in formats else 0] + ("onnxruntime",) * has("onnxruntime"))
    agent, environment, _ = resolve_configs(target, settled.algorithm, checkpoint_run, request.overrides)
    return ExportPlan(
        **_task_fields(
            call, target, request, environment, request.num_envs or 8, resolve_seed(request.seed, agent.get("seed"))
        ),
        **_library_fields(target, settled, agent, configs.library_config(agent), checkpoint_run, request.verbose),
        checkpoint=checkpoint,
        formats=formats,
        validation_steps=request.validation_steps,
    )


def plan_agent(call: Call, request: AgentRequest, kind: str) -> AgentPlan:
    """Validate a zero or random agent's request (no library, so no agent configuration)."""
    check_request_type(request, AgentRequest, f"{kind}_agent")
    request = normalised(request)
    check_common(request)
    check_int(request.num_episodes, "the number of episodes", minimum=1, flag="--num_episodes")
    check_int(request.max_steps, "the number of steps", minimum=1, flag="--max_steps")
    if request.num_episodes is not None and request.max_steps is not None:
        raise InvalidArgument(
            f"--num_episodes {request.num_episodes} and --max_steps {request.max_steps} both bound the run; "
            "give one of them."
        )
    if request.video:
        runs.check_log_root(request.log_root)
    import_tasks(call)
    from rlrun.envs import env_config, resolve_task

    task = resolve_task(request.task, call.import_modules)  # `module:id`: the module is imported
    _check_renderable(task, request.video)
    scoped = configs.split_overrides(request.overrides)
    if scoped["agent"]:
        raise InvalidArgument(
            f"the zero and random agents have no agent configuration: drop {'agent.' + scoped['agent'][0]!r}."
        )
    _check_env_keys(call, task, scoped["env"])
    import_core(call, request.video)
    with env_errors(task):
        defaults = env_config(task)
    environment = configs.apply_overrides(defaults, scoped["env"], scope="env")
    return AgentPlan(
        task=task,
        device=resolve_device(request.device),
        log_root=Path(request.log_root).absolute(),
        experiment=runs.experiment_name(task),
        env_config=environment,
        num_envs=request.num_envs or 4,
        seed=resolve_seed(request.seed, None),
        vectorization=_vectorization(call, task, request, environment),
        video=request.video,
        video_length=request.video_length,
        threads=pick_threads(request.threads, request.num_envs or 4),
        kind=kind,
        num_episodes=request.num_episodes or (None if request.max_steps else 10),
        max_steps=request.max_steps or _default_max_steps(environment),
    )


# --- what the plans share -----------------------------------------------------------------------------------


def _vectorization(call: Call, task: str, request: TaskRequest, environment: dict[str, Any]) -> str:
    from rlrun.envs.envpool import resolve_vectorization

    vectorization, video = request.vectorization, request.video
    return resolve_vectorization(task, vectorization, environment, video=video, import_modules=call.import_modules)


def _task_fields(
    call: Call, target: Target, request: TaskRequest, environment: dict[str, Any], num_envs: int, seed: int
) -> dict[str, Any]:
    return dict(
        task=target.task,
        log_root=target.log_root,
        experiment=target.experiment,
        env_config=environment,
        num_envs=num_envs,
        seed=seed,
        vectorization=_vectorization(call, target.task, request, environment),
        video=request.video,
        video_length=request.video_length,
        threads=pick_threads(request.threads, num_envs),
    )


def _library_fields(
    target: Target,
    settled: Settled,
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


def _target(call: Call, request: LibraryRequest, early: Early | None = None) -> Target:
    """What train, play and export validate alike: numbers, task, library, device, log root. `early(target)`
    checks what the call kind can check from data (names, files) before torch is imported; its target's
    `device` is not resolved yet."""
    check_common(request)
    if request.experiment is not None:
        runs.check_name(request.experiment, "--experiment_name")
    runs.check_log_root(request.log_root)
    import_tasks(call)
    from rlrun.envs import resolve_task

    task = resolve_task(request.task, call.import_modules)  # `module:id`: the module is imported
    _check_renderable(task, request.video)
    library = _choose_library(call, task, request.library)
    target = Target(
        task=task,
        library=library,
        adapter=load_adapter(library),
        device="",
        log_root=Path(request.log_root).absolute(),
        experiment=request.experiment or runs.experiment_name(task),
    )
    if early is not None:
        early(target)
    _check_env_keys(call, task, configs.split_overrides(request.overrides)["env"])
    import_core(call, request.video, request.ml_framework)
    return dataclasses.replace(target, device=resolve_device(request.device))


def _check_env_keys(call: Call, task: str, dotlist: list[str]) -> None:
    """Check `env.` overrides before torch is imported: a Gymnasium id's against its keywords (its env module
    only), a native task's against those its env class's source declares (`static_env_config`: its module imports
    torch). Where neither can be read, planning checks them after `import_core`."""
    if not dotlist:
        return
    from rlrun.envs import env_config, env_module
    from rlrun.envs.signatures import static_env_config

    module = env_module(task)
    with env_errors(task):
        if module is not None:
            call.import_modules([module])
            configs.apply_overrides(env_config(task), dotlist, scope="env")
        elif (static := static_env_config(task)) is not None:
            configs.apply_overrides(static, dotlist, scope="env")


def _choose_library(call: Call, task: str, name: str | None) -> Library:
    from rlrun.envs import NATIVE_TASKS
    from rlrun.envs.atari import is_atari

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
        candidates = [get_library(n) for n in libraries_for(space, images=is_atari(task))]
        installed = [library for library in candidates if library.installed]
        if not installed:
            hint = f"install one of: {', '.join(c.install_hint for c in candidates)}" if candidates else ""
            raise UnsupportedTask(f"no installed library can act in {task}'s {space} action space; {hint}".rstrip())
        library = installed[0]
    check_sees(library, task, is_atari(task))
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


def _default_max_steps(environment: dict[str, Any]) -> int:
    """A bound on vector steps for tasks whose episodes might never end: 100 episode lengths."""
    return 100 * int(environment.get("max_episode_steps") or 1000)
