"""Finding runs and checkpoints under a log root: `--checkpoint latest|best|<file>` and `--load_run`.

Lookups read and never write. They trust only what run.json lists (a temporary file of an interrupted write
is never taken), and never skip a damaged run for an older one: they name it (`CorruptRun`).

A log root may be shared, so what a run folder holds is checked before it is believed (`rlrun.trust`):

- places: a run folder that, with its links followed, ends outside the log root is never read (it is named
  like a damaged run when it is the one asked for), and a checkpoint that ends outside its run folder is
  refused (`OutsidePath`);
- numbers: a `mean_return` that is not a finite number within `MAX_RETURN` of zero, or a `created_at` that
  does not parse or lies in the future (by more than `CLOCK_SLACK`), is ignored, and a one-line warning names
  the run (or, when nothing is left, the error does): a planted 1e308 never makes a run `best`, nor the year
  9999 a run `latest`.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rlrun.errors import CheckpointNotFound, InvalidArgument, UserError
from rlrun.runs.atomic import TEMPORARY_SUFFIX
from rlrun.runs.manifest import MANIFEST, Run, _load, _UnreadableRun, corrupt_run, experiment_name
from rlrun.trust import paths
from rlrun.trust.text import terminal

SELECTORS = ("latest", "best")
MAX_RETURN = 1e12
"""The largest mean episode return, in size, that `best` believes: beyond any benchmark's (Atari's highest
scores are in the millions), so a larger one is a damaged or planted run.json, not a training's result."""
CLOCK_SLACK = _dt.timedelta(hours=1)
"""How far in the future a run's `created_at` may lie and still count (clocks of machines sharing a log root)."""

_SomeRun = TypeVar("_SomeRun", bound="Run | _UnreadableRun")


@dataclass(frozen=True)
class _LinkedRun(_UnreadableRun):
    """A run folder that, with its links followed, ends outside the log root: never read; `error` says where."""

    error: UserError


def _refusal(run: _UnreadableRun) -> UserError:
    """The error that names a run that cannot be used: where it points, or what is wrong with its run.json."""
    return run.error if isinstance(run, _LinkedRun) else corrupt_run(run.path, run.problem)


def _matches(manifest: dict[str, Any], library: str, task: str, match: dict[str, Any]) -> bool:
    if manifest.get("library") != library or manifest.get("task") != task:
        return False
    return all(manifest.get(key, value) == value for key, value in match.items())


def _scan(
    log_root: str | os.PathLike[str], library: str, experiment: str | None
) -> tuple[list[Run], list[_UnreadableRun]]:
    """Every run directory with a run.json under `<log_root>/<library>/<experiment or any>/`: sound and not."""
    root = Path(log_root).absolute()
    base = root / library
    if not base.is_dir():
        return [], []
    home = paths.real(root)  # the log root may be a link (the user's choice): what is below stays inside it
    pattern = f"{experiment}/*/{MANIFEST}" if experiment else f"*/*/{MANIFEST}"
    sound: list[Run] = []
    unreadable: list[_UnreadableRun] = []
    for manifest_path in base.glob(pattern):
        run_dir = manifest_path.parent
        target = paths.real(run_dir)
        if not paths.is_inside(target, home):
            error = paths.outside("run folder", run_dir, target, home)
            unreadable.append(_LinkedRun(run_dir, "lies outside the log root", None, error))
            continue
        manifest, problem = _load(run_dir)
        if problem is None and manifest is not None:
            sound.append(Run(run_dir, manifest))
        else:
            unreadable.append(_UnreadableRun(run_dir, problem or "is not an object", manifest))
    return sound, unreadable


def _moment(run: Run | _UnreadableRun) -> float | None:
    """When the run was created (seconds since the epoch): -inf when nothing says, None when what says it does
    not parse or lies in the future (see `CLOCK_SLACK`)."""
    text = run.created_at
    if not text:
        return -math.inf
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    if moment > _dt.datetime.now(_dt.UTC) + CLOCK_SLACK:
        return None
    return moment.timestamp()


def _newest_first(runs: list[_SomeRun]) -> list[_SomeRun]:
    """The runs newest first by `created_at`; runs whose time is impossible (`_moment`) after all the others."""

    def key(run: Run | _UnreadableRun) -> tuple[bool, float, str]:
        moment = _moment(run)
        return moment is not None, -math.inf if moment is None else moment, run.path.name

    return sorted(runs, key=key, reverse=True)


def _timeless(runs: list[_SomeRun], selector: str, warn: bool) -> list[_SomeRun]:
    """The runs whose `created_at` is impossible (`_moment`), each named in a one-line warning (with `warn`):
    they count as the oldest runs."""
    ignored = [run for run in runs if _moment(run) is None]
    for run in ignored if warn else ():
        _warn(
            f"--checkpoint {selector} ignores the created_at {run.created_at[:40]!r} of run {str(run.path)!r}: it "
            "does not parse or lies in the future, so the run counts as the oldest."
        )
    return ignored


def _warn(note: str) -> None:
    # One line (no source line under it), and no `__warningregistry__` written into a module.
    warnings.warn_explicit(note, UserWarning, "rlrun", 0)


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
        name = path.relative_to(directory).as_posix()
        if directory == path.parent or any(entry["file"] == name for entry in run.checkpoints):
            run.file(name)  # a run's checkpoint ends inside its run folder
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
    """The entry's `mean_return` when it is a finite number within `MAX_RETURN` of zero, else None."""
    value = entry.get("mean_return")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -MAX_RETURN <= value <= MAX_RETURN:
        return None  # NaN fails the comparison too; an int too large for a float is compared exactly
    return float(value)


def _scored(runs: list[Run], warn: bool) -> list[tuple[float, float, int, Run, dict[str, Any]]]:
    """Every checkpoint with a believable score: (score, the run's time, index, run, entry); the runs that
    claim an impossible score are named in a one-line warning each (with `warn`)."""
    scored = []
    for run in runs:
        moment = _moment(run)
        ignored = []
        for index, entry in enumerate(run.checkpoints):
            score = _score(entry)
            if score is not None:
                scored.append((score, -math.inf if moment is None else moment, index, run, entry))
            elif entry.get("mean_return") is not None:
                ignored.append(f"{entry['file']!r} ({_shown(entry['mean_return'])})")
        if ignored and warn:
            _warn(
                f"--checkpoint best ignores run {str(run.path)!r}: the mean_return of {', '.join(ignored[:3])}"
                f"{' and more' if len(ignored) > 3 else ''} is not a finite number within {MAX_RETURN:g} of zero."
            )
    return scored


def _shown(value: Any) -> str:
    """A claimed score as the warning shows it: its repr, or an integer's size when it is very long."""
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)


def resolve_checkpoint(
    selector: str,
    *,
    log_root: str | os.PathLike[str],
    library: str,
    task: str,
    experiment: str | None = None,
    load_run: str | None = None,
    match: dict[str, Any] | None = None,
    warn: bool = True,
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
    A run folder that ends outside the log root counts as a damaged run, and a checkpoint that ends outside
    its run folder is refused (`OutsidePath`); an impossible `mean_return` or `created_at` is ignored, with a
    warning (see the module docstring; `warn=False` finds the same checkpoint without the warnings).
    Raises `CheckpointNotFound`, `CorruptRun`, `OutsidePath` or `InvalidArgument` (a `load_run` that is not
    a regex).
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
            names = ", ".join(terminal(run.path.name) for run in _newest_first(runs)[:5]) or "none"
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
                    raise _refusal(run)
                return run.file(selector), run
        raise CheckpointNotFound(
            f"checkpoint {selector!r} is neither a file nor a checkpoint of a {library} run on {task} under "
            f"{where}; pass --checkpoint latest, best or an existing file."
        )
    timeless = _timeless(ordered, selector, warn)
    if selector == "best":
        if broken:
            raise _refusal(_newest_first(broken)[0])
        scored = _scored(runs, warn)
        if scored:  # the highest return; on a tie the newer run's, then the later checkpoint
            _, _, _, run, entry = max(scored, key=lambda item: item[:3])
            return run.file(entry["file"]), run
    for run in ordered:
        if isinstance(run, _UnreadableRun):
            raise _refusal(run)
        checkpoints = run.checkpoints
        if checkpoints:
            return run.file(checkpoints[-1]["file"]), run
    ignored = (
        f" (runs whose created_at does not parse or lies in the future: "
        f"{', '.join(repr(str(run.path)) for run in timeless[:3])}{' and more' if len(timeless) > 3 else ''})"
        if timeless
        else ""
    )
    raise CheckpointNotFound(
        f"no {library} checkpoint for task {task} under {where}{ignored}; train one first "
        f"(rlrun train --task {task} --library {library}) or pass --checkpoint PATH."
    )
