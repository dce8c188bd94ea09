"""Finding runs and checkpoints under a log root: `--checkpoint latest|best|<file>` and `--load_run`.

Lookups read and never write. They trust only what run.json lists (a temporary file of an interrupted write
is never taken), and never skip a damaged run for an older one: they name it (`CorruptRun`).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, TypeVar

from rlrun.errors import CheckpointNotFound, InvalidArgument
from rlrun.runs.atomic import TEMPORARY_SUFFIX
from rlrun.runs.manifest import MANIFEST, Run, _load, _UnreadableRun, corrupt_run, experiment_name

SELECTORS = ("latest", "best")

_SomeRun = TypeVar("_SomeRun", bound="Run | _UnreadableRun")


def _matches(manifest: dict[str, Any], library: str, task: str, match: dict[str, Any]) -> bool:
    if manifest.get("library") != library or manifest.get("task") != task:
        return False
    return all(manifest.get(key, value) == value for key, value in match.items())


def _scan(
    log_root: str | os.PathLike[str], library: str, experiment: str | None
) -> tuple[list[Run], list[_UnreadableRun]]:
    """Every run directory with a run.json under `<log_root>/<library>/<experiment or any>/`: sound and not."""
    base = Path(log_root).absolute() / library
    if not base.is_dir():
        return [], []
    pattern = f"{experiment}/*/{MANIFEST}" if experiment else f"*/*/{MANIFEST}"
    sound, unreadable = [], []
    for manifest_path in base.glob(pattern):
        manifest, problem = _load(manifest_path.parent)
        if problem is None and manifest is not None:
            sound.append(Run(manifest_path.parent, manifest))
        else:
            unreadable.append(_UnreadableRun(manifest_path.parent, problem or "is not an object", manifest))
    return sound, unreadable


def _newest_first(runs: list[_SomeRun]) -> list[_SomeRun]:
    return sorted(runs, key=lambda run: (run.created_at, run.path.name), reverse=True)


def find_runs(
    log_root: str | os.PathLike[str],
    library: str,
    task: str,
    experiment: str | None = None,
    match: dict[str, Any] | None = None,
) -> list[Run]:
    """Return the runs of `library` on `task` under `log_root`, newest first (by manifest creation time).

    `match` keeps only runs whose manifest has these values (an absent key matches anything). Runs whose
    run.json does not parse or is malformed are left out (`resolve_checkpoint` names them instead).
    """
    sound, _ = _scan(log_root, library, experiment)
    return _newest_first([run for run in sound if _matches(run.manifest, library, task, match or {})])


def _load_run_pattern(load_run: str) -> re.Pattern[str]:
    try:
        return re.compile(load_run)
    except re.error as error:
        raise InvalidArgument(
            f"--load_run {load_run!r} is neither a run folder name nor a valid regular expression ({error}); "
            "pass a run folder name, or escape the special characters (e.g. '\\[' for '[')."
        ) from None


def _file_run(path: Path) -> Run | None:
    """The run a checkpoint file belongs to: the run.json beside it, or one level up listing it (SKRL's
    `checkpoints/`). None for a file outside any run; `CorruptRun` when that run.json cannot be used."""
    for directory in (path.parent, path.parent.parent):
        if not (directory / MANIFEST).exists():
            continue
        manifest, problem = _load(directory)
        if problem is not None or manifest is None:
            raise corrupt_run(directory, problem or "is not an object")
        run = Run(directory, manifest)
        if directory == path.parent or any(
            entry["file"] == path.relative_to(directory).as_posix() for entry in run.checkpoints
        ):
            return run
        return None
    return None


def checkpoint_entry(run: Run, checkpoint: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The manifest's entry for `checkpoint` (a file of `run`): iteration, env_steps, mean_return, saved_at."""
    target = Path(checkpoint).absolute()
    for entry in run.checkpoints:
        if (run.path / entry["file"]).absolute() == target:
            return entry
    return None


def _score(entry: dict[str, Any]) -> float | None:
    value = entry.get("mean_return")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def resolve_checkpoint(
    selector: str,
    *,
    log_root: str | os.PathLike[str],
    library: str,
    task: str,
    experiment: str | None = None,
    load_run: str | None = None,
    match: dict[str, Any] | None = None,
) -> tuple[Path, Run | None]:
    """Turn `--checkpoint` (`latest`, `best`, a file path, or a file name inside `--load_run`) into a file.

    - `latest`: the newest checkpoint of the newest run of this library and task (or of `load_run`).
    - `best`: the checkpoint with the highest mean episode return recorded when it was saved, across all
      those runs (a resumed run's unscored checkpoints never beat its parent's scored ones); when none is
      scored, the same as `latest`.
    - a path to an existing file is taken as is; its run (the run.json beside it, or one level up listing
      it), if any, is returned too.
    - `load_run`: a run folder name, else a regular expression its whole name matches.
    Only runs whose manifest names this library and task (and the `match` values) are considered. A run
    whose run.json does not parse or is malformed is never skipped for an older one: when it is the run
    asked for (the newest for `latest`, any for `best`, one `load_run` names), `CorruptRun` names it. Such
    a run counts when its manifest readably names this library and task, or else when it lies in this
    task's experiment folder (`experiment`, or the task's default) or `load_run` names it. Temporary files
    of interrupted writes (`*.rlrun-tmp`) are never taken: only files that run.json lists count for
    `latest` and `best`, and a checkpoint path through a temporary is refused.
    Raises `CheckpointNotFound`, `CorruptRun` or `InvalidArgument` (a `load_run` that is not a regex).
    """
    match = match or {}
    where = f"{Path(log_root).absolute() / library}"
    if any(part.endswith(TEMPORARY_SUFFIX) for part in Path(selector).parts):
        raise CheckpointNotFound(
            f"checkpoint {selector!r} is a temporary file left by an interrupted write, not a checkpoint; "
            "pass --checkpoint latest, best or a checkpoint file."
        )
    candidate = Path(selector).expanduser()
    if selector not in SELECTORS and candidate.is_file():
        return candidate.absolute(), _file_run(candidate.absolute())
    sound, unreadable = _scan(log_root, library, experiment)
    runs = [run for run in sound if _matches(run.manifest, library, task, match)]
    broken = [run for run in unreadable if run.could_be(library, task, match)]
    if load_run is not None:
        candidates: list[Run | _UnreadableRun] = [*runs, *broken]
        named = [run for run in candidates if run.path.name == load_run]
        if not named:
            pattern = _load_run_pattern(load_run)
            named = [run for run in candidates if pattern.fullmatch(run.path.name)]
        if not named:
            names = ", ".join(run.path.name for run in _newest_first(runs)[:5]) or "none"
            raise CheckpointNotFound(
                f"no run {load_run!r} of {library} on {task} under {where} (newest runs: {names}); "
                "pass --load_run with one of them or omit it."
            )
        runs = [run for run in named if isinstance(run, Run)]
        broken = [run for run in named if isinstance(run, _UnreadableRun)]
    else:  # a run that does not say whose it is counts where this task's runs live
        home = experiment or experiment_name(task)
        broken = [run for run in broken if run.identified() or run.path.parent.name == home]
    ordered: list[Run | _UnreadableRun] = _newest_first([*runs, *broken])
    if selector not in SELECTORS:
        for run in ordered:
            if (run.path / selector).is_file():
                if isinstance(run, _UnreadableRun):
                    raise corrupt_run(run.path, run.problem)
                return run.path / selector, run
        raise CheckpointNotFound(
            f"checkpoint {selector!r} is neither a file nor a checkpoint of a {library} run on {task} under "
            f"{where}; pass --checkpoint latest, best or an existing file."
        )
    if selector == "best":
        if broken:
            newest = _newest_first(broken)[0]
            raise corrupt_run(newest.path, newest.problem)
        scored = [
            (score, run.created_at, index, run, entry)
            for run in runs
            for index, entry in enumerate(run.checkpoints)
            if (score := _score(entry)) is not None
        ]
        if scored:  # the highest return; on a tie the newer run's, then the later checkpoint
            _, _, _, run, entry = max(scored, key=lambda item: item[:3])
            return run.path / entry["file"], run
    for run in ordered:
        if isinstance(run, _UnreadableRun):
            raise corrupt_run(run.path, run.problem)
        checkpoints = run.checkpoints
        if checkpoints:
            return run.path / checkpoints[-1]["file"], run
    raise CheckpointNotFound(
        f"no {library} checkpoint for task {task} under {where}; train one first "
        f"(rlrun train --task {task} --library {library}) or pass --checkpoint PATH."
    )
