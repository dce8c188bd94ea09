"""Run directories, the `run.json` manifest, atomic writes and checkpoint lookup.

Layout of one run (Isaac Lab's, so its users find their way):

    <log_root>/<library>/<experiment>/<YYYY-MM-DD_HH-MM-SS>[_<run_name>]/
        run.json            manifest: versions, task, seed, argv, status, checkpoints and their returns
        params/agent.yaml   the agent configuration the library received
        params/env.yaml     the task's keyword arguments
        <checkpoints>       in the library's own format and names (model_<iteration>.pt for RSL-RL)
        events.out.tfevents.*

Every file rlrun writes goes through a temporary file in the same directory, flush, fsync and
`os.replace`, so a reader sees the old file or the new one, never a partial one.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.errors import CheckpointNotFound, InvalidArgument

MANIFEST = "run.json"
MANIFEST_VERSION = 1
TIMESTAMP_FORMAT = "%Y-%m-%d_%H-%M-%S"
SELECTORS = ("latest", "best")
TEMPORARY_SUFFIX = ".rlrun-tmp"
STATUSES = ("running", "completed", "failed", "interrupted")


# --- atomic writes ------------------------------------------------------------------------------------------


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync it and move it over `path` atomically.

    On any exception (KeyboardInterrupt included) the temporary file is removed and `path` is untouched.
    """
    target = Path(path)
    sweep_temporaries(target.parent)
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.{os.getpid()}.", suffix=TEMPORARY_SUFFIX, dir=target.parent
    )
    os.close(handle)
    try:
        yield Path(temporary)
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


def sweep_temporaries(directory: Path) -> list[Path]:
    """Delete temporary files that a writer killed mid-write (SIGKILL, power loss) left in `directory`.

    A temporary file's name carries its writer's process id; only files of processes that no longer run
    are deleted, so a concurrent writer's file is left alone. They are never taken for checkpoints anyway:
    lookups only consider files that run.json lists.
    """
    removed = []
    for candidate in directory.glob(f".*{TEMPORARY_SUFFIX}"):
        parts = candidate.name.rsplit(".", 3)
        pid = int(parts[-3]) if len(parts) == 4 and parts[-3].isdigit() else None
        if pid is None or pid == os.getpid() or _running(pid):
            continue
        candidate.unlink(missing_ok=True)
        removed.append(candidate)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` atomically."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def atomic_save(path: str | os.PathLike[str], save: Callable[[str], Any]) -> None:
    """Call `save(temporary_path)` (e.g. `lambda p: torch.save(obj, p)`) and move the result to `path`."""
    with atomic_path(path) as temporary:
        save(str(temporary))


def _fsync_directory(directory: Path) -> None:
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:  # not every platform can open a directory
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


# --- run directories and manifests --------------------------------------------------------------------------


def new_run_dir(
    log_root: str | os.PathLike[str],
    library: str,
    experiment: str,
    run_name: str | None = None,
    now: _dt.datetime | None = None,
) -> Path:
    """Return a fresh, not yet existing run directory path (nothing is created).

    Two runs started in the same second get `_2`, `_3`, ... suffixes.
    """
    stamp = (now or _dt.datetime.now()).strftime(TIMESTAMP_FORMAT)
    base = Path(log_root).absolute() / library / experiment
    name = f"{stamp}_{run_name}" if run_name else stamp
    candidate, counter = base / name, 1
    while candidate.exists():
        counter += 1
        candidate = base / f"{name}_{counter}"
    return candidate


def check_name(value: str, what: str) -> str:
    """Reject names that would escape or break the run directory layout."""
    if not value or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", value):
        raise InvalidArgument(
            f"{what} {value!r} is not a valid directory name: use letters, digits, '.', '_', '+' and '-'."
        )
    return value


def experiment_name(task: str) -> str:
    """The default experiment name for a task: its id with namespace separators made path-safe."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", task)


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write `run.json` atomically."""
    atomic_write_text(run_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """Return the run's manifest, or None when it is missing or unreadable."""
    try:
        manifest = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string with microseconds (sorts chronologically)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Run:
    """A run directory and its manifest."""

    path: Path
    manifest: dict[str, Any]

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        """The checkpoints the manifest lists whose files exist, oldest first."""
        return [entry for entry in self.manifest.get("checkpoints", []) if (self.path / entry["file"]).is_file()]


def find_runs(
    log_root: str | os.PathLike[str],
    library: str,
    task: str,
    experiment: str | None = None,
    match: dict[str, Any] | None = None,
) -> list[Run]:
    """Return the runs of `library` on `task` under `log_root`, newest first (by manifest creation time).

    `match` keeps only runs whose manifest has these values (an absent key matches anything).
    """
    base = Path(log_root).absolute() / library
    if not base.is_dir():
        return []
    pattern = f"{experiment}/*/{MANIFEST}" if experiment else f"*/*/{MANIFEST}"
    runs = []
    for manifest_path in base.glob(pattern):
        manifest = read_manifest(manifest_path.parent)
        matches = manifest and manifest.get("library") == library and manifest.get("task") == task
        if matches and all(manifest.get(key, value) == value for key, value in (match or {}).items()):
            runs.append(Run(manifest_path.parent, manifest))
    return sorted(runs, key=lambda run: str(run.manifest.get("created_at", "")), reverse=True)


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
    - `best`: the checkpoint of that run with the highest mean episode return recorded when it was saved.
    - a path to an existing file is taken as is; its run (the manifest beside it), if any, is returned too.
    Only runs whose manifest names this library and task (and the `match` values) are considered.
    Raises `CheckpointNotFound`.
    """
    candidate = Path(selector).expanduser()
    if selector not in SELECTORS and candidate.is_file():
        manifest = read_manifest(candidate.absolute().parent)
        return candidate.absolute(), Run(candidate.absolute().parent, manifest) if manifest else None
    runs = find_runs(log_root, library, task, experiment, match)
    where = f"{Path(log_root).absolute() / library}"
    if load_run is not None:
        selected = [run for run in runs if run.path.name == load_run] or [
            run for run in runs if re.fullmatch(load_run, run.path.name)
        ]
        if not selected:
            names = ", ".join(run.path.name for run in runs[:5]) or "none"
            raise CheckpointNotFound(
                f"no run {load_run!r} of {library} on {task} under {where} (newest runs: {names}); "
                "pass --load_run with one of them or omit it."
            )
        runs = selected
    if selector not in SELECTORS:
        for run in runs:
            if (run.path / selector).is_file():
                return run.path / selector, run
        raise CheckpointNotFound(
            f"checkpoint {selector!r} is neither a file nor a checkpoint of a {library} run on {task} under "
            f"{where}; pass --checkpoint latest, best or an existing file."
        )
    for run in runs:
        checkpoints = run.checkpoints
        if not checkpoints:
            continue
        if selector == "best":
            scored = [entry for entry in checkpoints if entry.get("mean_return") is not None]
            entry = max(scored, key=lambda entry: entry["mean_return"]) if scored else checkpoints[-1]
        else:
            entry = checkpoints[-1]
        return run.path / entry["file"], run
    raise CheckpointNotFound(
        f"no {library} checkpoint for task {task} under {where}; train one first "
        f"(rlrun train --task {task} --library {library}) or pass --checkpoint PATH."
    )
