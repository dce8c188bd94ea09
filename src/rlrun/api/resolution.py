"""What a library request resolves to once its task and library are known, before anything changes.

The checkpoint (`latest`, `best` or a path) and the run it belongs to; the algorithm and framework (asked for,
else the checkpoint's, else the library's defaults), with the library imported for that framework; the agent
and env configurations, overrides applied; the iteration a resumed run starts from. Planning
(`rlrun.api.planning`) builds each call's plan from these.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun import configs, runs
from rlrun.api.checks import jax_has_cuda
from rlrun.api.requests import LibraryRequest
from rlrun.configs.checks import check_value
from rlrun.errors import CorruptCheckpoint, InvalidArgument, MissingDependency, UserError, did_you_mean
from rlrun.hermetic import Call
from rlrun.libraries import LIBRARIES, Library, check_installed, load_adapter
from rlrun.libraries.base import Adapter
from rlrun.trust import paths
from rlrun.trust.limits import read_yaml


@dataclass(frozen=True)
class Target:
    """The task, library and device a library request names, resolved."""

    task: str
    library: Library
    adapter: Adapter
    device: str
    log_root: Path
    experiment: str


@dataclass(frozen=True)
class Settled:
    """Algorithm and framework: asked for, else the checkpoint's, else the defaults."""

    algorithm: str
    ml_framework: str
    device: str


@contextlib.contextmanager
def env_errors(task: str) -> Iterator[None]:
    """Turn Gymnasium's "a dependency of this task is missing" into a one-line user error naming the extra."""
    import gymnasium

    try:
        yield
    except gymnasium.error.DependencyNotInstalled as error:
        raise MissingDependency(f"task {task!r} cannot be made here: {error}") from None


def resolve_checkpoint(
    target: Target, request: LibraryRequest, selector: str, framework: str | None = None, warn: bool = True
) -> tuple[Path, runs.Run | None]:
    """Find the checkpoint; runs of another algorithm or framework than the one asked for do not count
    (`warn=False`: without the warnings about runs it ignores, for a check that is repeated)."""
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
        warn=warn,
    )
    manifest = run.manifest if run is not None else {}
    for key, expected, flag in (("task", target.task, "--task"), ("library", target.library.name, "--library")):
        if manifest.get(key, expected) != expected:
            raise InvalidArgument(
                f"checkpoint {str(checkpoint)!r} was trained on {key} {manifest[key]!r}, not {expected!r}; "
                f"pass {flag} {manifest[key]} or another checkpoint."
            )
    return checkpoint, run


def settle(
    call: Call, target: Target, request: LibraryRequest, checkpoint: Path | None, run: runs.Run | None
) -> Settled:
    """Settle algorithm and framework (asked for, else the checkpoint's, else the defaults), import the
    library for that framework and check the checkpoint is one of its own."""
    manifest = run.manifest if run is not None else {}
    library, adapter = target.library, target.adapter
    framework = request.ml_framework or manifest.get("ml_framework") or library.frameworks[0]
    check_framework(library, framework)
    device = target.device
    if framework == "jax" and request.device is None and device.startswith("cuda") and not jax_has_cuda():
        device = "cpu"  # torch sees a GPU, but this JAX was installed for the CPU only
    call.import_modules(adapter.IMPORTS[framework])
    algorithm = request.algorithm or manifest.get("algorithm") or adapter.DEFAULT_ALGORITHM
    check_algorithm(target, algorithm)
    if checkpoint is not None:
        # A run's checkpoint is read only from inside the run folder as it was when the run was found.
        with paths.confined(run.home if run is not None else None):
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
    return Settled(algorithm=algorithm.lower(), ml_framework=framework, device=device)


def check_algorithm(target: Target, algorithm: str) -> None:
    if algorithm.lower() not in target.adapter.ALGORITHMS:
        close = did_you_mean(algorithm.lower(), target.adapter.ALGORITHMS, listing=0)
        raise InvalidArgument(
            f"--algorithm {algorithm!r} is not one rlrun runs with {target.library.name}.{close} "
            f"Choose from: {', '.join(target.adapter.ALGORITHMS)}."
        )


def early(
    request: LibraryRequest, checkpoint: str | None, framework: str | None = None, *, writes: bool = False
) -> Callable[[Target], None]:
    """The checks a library request's names and files allow before torch is imported (`checkpoint`: the selector
    of the checkpoint the call reads, or None; `framework`: the only one the call takes, export's torch; `writes`:
    the call makes a run folder, a training): the checkpoint and its run, the framework and the algorithm, the
    library and experiment folders a new run goes into (real folders, never links), and a training's agent
    overrides against its starting configuration. Planning repeats each in full after."""

    def check(target: Target) -> None:
        library = target.library
        if writes:
            paths.check_folders(target.log_root, library.name, target.experiment, what="run folder")
        if framework is not None and request.ml_framework not in (None, framework):
            check_framework(library, request.ml_framework)
            raise InvalidArgument(
                f"rlrun exports PyTorch policies only, not {request.ml_framework} ones; "
                f"export a {library.name} run trained with --ml_framework {framework} (drop --ml_framework)."
            )
        try:
            run = None
            if checkpoint is not None:
                run = resolve_checkpoint(target, request, checkpoint, framework, warn=False)[1]
        except UserError:
            if framework is not None and checkpoint in runs.SELECTORS and request.ml_framework is None:
                _other_framework(target, request, checkpoint, framework)
            raise
        manifest = run.manifest if run is not None else {}
        check_framework(library, request.ml_framework or manifest.get("ml_framework") or library.frameworks[0])
        algorithm = (request.algorithm or manifest.get("algorithm") or target.adapter.DEFAULT_ALGORITHM).lower()
        check_algorithm(target, algorithm)
        scoped = configs.split_overrides(request.overrides)
        agent_config = getattr(request, "agent_config", None)
        if run is None and scoped["agent"]:
            # RL Zoo's entry (SB3 on a Gymnasium id) mapped for its keys only, with any step count (the sb3 adapter's
            # imports SB3); planning maps and checks it in full, and says once if it refuses it.
            from rlrun.envs.atari import is_atari  # rlrun.envs imports Gymnasium: in the call's import phase

            with warnings.catch_warnings(action="ignore"):
                task, one = target.task, lambda c, n: 1
                agent, _ = configs.starting_config(
                    library.name, algorithm, task, path=agent_config, steps_per_iteration=one, atari=is_atari(task)
                )
            configs.apply_overrides(agent, scoped["agent"], scope="agent")

    return check


def _other_framework(target: Target, request: LibraryRequest, selector: str, framework: str) -> None:
    """Raise what stands in the way when `selector` finds a run of another framework than `framework` only."""
    try:
        _, run = resolve_checkpoint(target, request, selector, warn=False)
    except UserError:
        return
    other = run.manifest.get("ml_framework") if run is not None else None
    if run is not None and other not in (None, framework):
        raise InvalidArgument(
            f"the {selector} {target.library.name} run on {target.task} ({run.path.name}) runs on {other}, and rlrun "
            f"exports PyTorch policies only; train one with --ml_framework {framework} to export it."
        )


def check_framework(library: Library, framework: str) -> None:
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


def resolve_configs(
    target: Target, algorithm: str, run: runs.Run | None, overrides: tuple[str, ...], agent_config: str | None = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The agent and env configurations, overrides applied, and where the agent's came from: the run's own
    when continuing one, else the defaults (`configs.starting_config`); an `agent_config` file replaces either."""
    from rlrun.envs import env_config

    scoped = configs.split_overrides(overrides)
    # A run's params are read only where they lie inside its folder, links followed (`OutsidePath` otherwise).
    saved = (
        None if run is None else [run.file(f"params/{name}", "configuration") for name in ("agent.yaml", "env.yaml")]
    )
    agent: dict[str, Any] | None = None
    source: dict[str, Any] = {}
    if run is not None and saved is not None and saved[0].is_file() and saved[1].is_file():
        with paths.confined(run.home):
            agent = saved_config(saved[0])
            environment = saved_config(saved[1])
        with env_errors(target.task):
            check_saved_env(environment, env_config(target.task), saved[1])
        source = {"from": "run", "path": str(saved[0])}
    else:
        with env_errors(target.task):
            environment = env_config(target.task)
    if agent is None or agent_config is not None:
        from rlrun.envs.atari import is_atari

        agent, source = configs.starting_config(
            target.library.name,
            algorithm,
            target.task,
            path=agent_config,
            steps_per_iteration=target.adapter.env_steps_per_iteration,
            atari=is_atari(target.task),
        )
    check_code(target, agent, str(source.get("path") or "the agent configuration"))
    merged = configs.apply_overrides(agent, scoped["agent"], scope="agent")
    if scoped["agent"]:
        check_code(target, merged, "override")
    return merged, configs.apply_overrides(environment, scoped["env"], scope="env"), source


def check_code(target: Target, agent: dict[str, Any], origin: str) -> None:
    """Refuse (`UnsafeConfig`, one line) an agent configuration that selects code outside the library's tables
    or names an import path (`rlrun.trust.names`): a run's `params/agent.yaml`, an `--agent_config` file or an
    override is data, and no string of it reaches the library unless the table allows it. `origin` names the
    file, or `"override"`."""
    from rlrun.libraries.base import code_tables
    from rlrun.trust.names import check_config

    names, source = code_tables(target.adapter)
    check_config(agent, names, source, library=target.library.name, origin=origin)


SAVED_FIX = "repair it from a copy of the run, or pass --checkpoint or --load_run to use another run"
"""What to do about a run whose `params/*.yaml` cannot be used."""


def saved_config(path: Path) -> dict[str, Any]:
    """A run's `params/agent.yaml` or `params/env.yaml`: a mapping of string keys, read as data with the limits
    of `rlrun.trust.limits` (a run folder may come from someone else)."""
    config = read_yaml(path, "run file")
    if not isinstance(config, dict) or not all(isinstance(key, str) for key in config):
        kinds = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
        kind = (
            "nothing"
            if config is None
            else "a mapping with keys that are not strings"
            if isinstance(config, dict)
            else kinds.get(type(config), type(config).__name__)
        )
        raise InvalidArgument(f"run file {str(path)!r} holds {kind}, not a mapping of keys; {SAVED_FIX}.")
    return config


def check_saved_env(environment: dict[str, Any], known: dict[str, Any], path: Path) -> None:
    """Refuse a run's env.yaml key that the task's constructor does not take (`known`: `env_config`'s keys), or
    a value that cannot stand where the task's default stands, before the constructor sees them."""
    for key, value in environment.items():
        if key not in known:
            raise InvalidArgument(
                f"run file {str(path)!r} sets {key!r}, which the task does not take."
                f"{did_you_mean(key, known, listing=0)} Its keys: {', '.join(sorted(known))}; {SAVED_FIX}."
            )
        check_value(known, value, key, "env", origin=f"run file {str(path)!r}")


def steps_per_iteration(target: Target, library_config: dict[str, Any], num_envs: int) -> int:
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


def recorded_iteration(checkpoint: Path | None, run: runs.Run | None) -> int:
    """The iteration the parent run recorded for the checkpoint being resumed (0 for a file outside a run)."""
    if checkpoint is None or run is None:
        return 0
    for entry in run.checkpoints:
        if (run.path / entry["file"]).resolve() == checkpoint.resolve():
            return int(entry.get("iteration") or 0)
    return 0
