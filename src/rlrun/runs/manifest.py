"""Run directories and their `run.json` manifests: claiming a directory, checking names, reading a run.

Layout of one run (Isaac Lab's, so its users find their way):

    <log_root>/<library>/<experiment>/<YYYY-MM-DD_HH-MM-SS>[_<run_name>]/
        run.json            manifest: versions, task, seed, argv, status, checkpoints and their returns
        params/agent.yaml   the agent configuration the library received
        params/env.yaml     the task's keyword arguments
        <checkpoints>       in the library's own format and names (model_<iteration>.pt for RSL-RL)
        events.out.tfevents.*

run.json is written atomically (`rlrun.runs.atomic`); a reader tells a sound one from a damaged one with
`manifest_problem`, so that lookups name a damaged run instead of skipping it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from rlrun.errors import CorruptRun, InvalidArgument
from rlrun.runs.atomic import atomic_write_text
from rlrun.trust import paths
from rlrun.trust.limits import UnreadableFile, read_json

MANIFEST = "run.json"
MANIFEST_VERSION = 1
TIMESTAMP_FORMAT = "%Y-%m-%d_%H-%M-%S"
MAX_SAME_SECOND = 10_000
"""Runs of one name that may start in one second (`_2` ... `_10000`); one more is refused."""


def new_run_dir(
    log_root: str | os.PathLike[str],
    library: str,
    experiment: str,
    run_name: str | None = None,
    now: _dt.datetime | None = None,
) -> Path:
    """Claim a new run directory: create it, empty, and return its path.

    The first run started in a second gets `<YYYY-MM-DD_HH-MM-SS>[_<run_name>]`; the runs started in the
    same second after it, in this process or any other, get `_2`, `_3`, ... . The claim is a `mkdir`
    that fails when the name exists (atomic on local filesystems and NFS), so two processes never get
    the same directory; the name says nothing about order, lookups order runs by `created_at`.

    The log root may be a link (the user's choice); the library and experiment folders under it must be real
    folders, and a link there is refused (`OutsidePath`): a shared log root's planted link would otherwise
    take the whole run elsewhere. `mkdir` never follows a link, so a planted run name is skipped like a taken one.
    """
    stamp = (now or _dt.datetime.now()).strftime(TIMESTAMP_FORMAT)
    base = paths.real_folders(log_root, library, experiment)
    name = f"{stamp}_{run_name}" if run_name else stamp
    for counter in range(1, MAX_SAME_SECOND + 1):
        candidate = base / (name if counter == 1 else f"{name}_{counter}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{MAX_SAME_SECOND} runs named {name!r} (with suffixes) already exist in {str(base)!r}")


MAX_NAME = 200
"""The longest experiment or run name: a file name holds 255 bytes, less the run directory's time stamp
(`YYYY-MM-DD_HH-MM-SS_`) and a same-second suffix (`_10000`), with room to spare."""


def check_name(value: str, what: str) -> str:
    """Reject names that would escape or break the run directory layout, or that no filesystem can hold."""
    if not value or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", value):
        raise InvalidArgument(
            f"{what} {value!r} is not a valid directory name: use letters, digits, '.', '_', '+' and '-'."
        )
    if len(value) > MAX_NAME:
        raise InvalidArgument(
            f"{what} {value[:40]!r}... is {len(value)} characters long; a directory name holds at most "
            f"{MAX_NAME} here: shorten it."
        )
    return value


MAX_PATH_PART = 255
"""Bytes in one file or folder name (NAME_MAX on Linux)."""


def check_path(value: str | os.PathLike[str], flag: str) -> Path:
    """`value` as a path no filesystem call will refuse outright (a NUL byte, a name over 255 bytes); else
    `InvalidArgument` naming the flag, the offending part and the fix."""
    text = os.fspath(value)
    if "\x00" in text:
        raise InvalidArgument(f"{flag} {text!r} holds a NUL byte, which no path can; remove it.")
    for part in Path(text).parts:
        if len(os.fsencode(part)) > MAX_PATH_PART:
            raise InvalidArgument(
                f"{flag}: the name {part[:40]!r}... is {len(os.fsencode(part))} bytes long; a file or folder name "
                f"holds at most {MAX_PATH_PART}: shorten it."
            )
    return Path(text)


def check_log_root(log_root: str | os.PathLike[str], flag: str = "--log_root") -> Path:
    """The log root as an absolute path, if rlrun can make run directories under it; else `InvalidArgument`
    naming the part that is in the way (a file, or a folder this process may not write to). Makes nothing."""
    root = check_path(log_root, flag).absolute()
    existing = root
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "is a file" if existing == root else f"is under {str(existing)!r}, which is a file"
        raise InvalidArgument(f"{flag} {str(root)!r} {where}; pass a folder (or a path where one can be made).")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidArgument(
            f"{flag} {str(root)!r} cannot be written: this process may not write to {str(existing)!r}; "
            "pass a folder you can write to."
        )
    return root


def experiment_name(task: str) -> str:
    """The default experiment name for a task: its id with namespace separators made path-safe."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", task)


def manifest_text(manifest: dict[str, Any]) -> str:
    """run.json's text for `manifest`: indented, keys sorted, anything JSON lacks as its string."""
    return json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n"


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write `run.json` atomically."""
    atomic_write_text(run_dir / MANIFEST, manifest_text(manifest))


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """Return the run's manifest, or None when it is missing or unreadable (malformed ones are returned), or a
    link that ends outside its run folder (never read)."""
    if not paths.is_inside(paths.real(run_dir / MANIFEST), paths.real(run_dir)):
        return None
    try:
        manifest = read_json(run_dir / MANIFEST, MANIFEST)
    except UnreadableFile:
        return None
    return manifest if isinstance(manifest, dict) else None


def manifest_problem(manifest: Any) -> str | None:
    """What makes a parsed run.json unusable for lookups, as the end of a sentence; None when it is sound.

    Lookups need `library` and `task` strings and a `checkpoints` list (absent: none yet) of objects
    with a `file` path inside the run; `iteration`, `env_steps` (integers) and `mean_return` (a number)
    are optional and may be null.
    """
    if not isinstance(manifest, dict):
        return f"holds {_json_type(manifest)}, not an object"
    for key in ("library", "task"):
        if not isinstance(manifest.get(key), str):
            return f"has {key} {_short(manifest.get(key))}, not a string"
    if not isinstance(manifest.get("created_at", ""), str):
        return f"has created_at {_short(manifest['created_at'])}, not a string"
    entries = manifest.get("checkpoints", [])
    if not isinstance(entries, list):
        return f"has checkpoints {_short(entries)}, not a list"
    for index, entry in enumerate(entries):
        where = f"checkpoints[{index}]"
        if not isinstance(entry, dict):
            return f"has {where} {_short(entry)}, not an object"
        name = entry.get("file")
        if not isinstance(name, str) or not name:
            return f"has {where} without a 'file' name"
        parts = PurePosixPath(name).parts
        if PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name:
            return f"has {where} file {name!r}, which is not a path inside the run"
        for key, kinds in (("iteration", (int,)), ("env_steps", (int,)), ("mean_return", (int, float))):
            value = entry.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
                return f"has {where} {key} {_short(value)}, not a number"
    return None


def _json_type(value: Any) -> str:
    names = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 40) -> str:
    """`value` as JSON, shortened to one short line."""
    text = json.dumps(value, default=str, ensure_ascii=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _load(run_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The parsed run.json of `run_dir` (a dict, or None when it is not one) and its problem (None: sound).
    A run.json that is a link ending outside its run folder is not read: that is its problem."""
    source, home = paths.real(run_dir / MANIFEST), paths.real(run_dir)
    if not paths.is_inside(source, home):
        return None, f"is a link to {str(source)!r}, outside the run folder"
    try:  # bounded: a size cap, nesting depth, UTF-8 (`rlrun.trust.limits`)
        manifest = read_json(run_dir / MANIFEST, MANIFEST)
    except UnreadableFile as error:
        return None, error.problem
    return (manifest if isinstance(manifest, dict) else None), manifest_problem(manifest)


def corrupt_run(run_dir: Path, problem: str) -> CorruptRun:
    """The one-line error for a run whose run.json `problem` (see `manifest_problem`) makes it unusable."""
    return CorruptRun(
        f"run {str(run_dir)!r} cannot be used: its {MANIFEST} {problem}; repair or delete "
        f"{str(run_dir / MANIFEST)!r} (or the run folder), or pass --load_run to choose another run."
    )


def read_run(run_dir: str | os.PathLike[str]) -> Run:
    """The run in `run_dir`; raises `CorruptRun`, naming it, when its run.json is missing, does not parse or is
    malformed."""
    path = Path(run_dir).absolute()
    if not (path / MANIFEST).exists():
        raise CorruptRun(f"{str(path)!r} is not a run folder (no {MANIFEST}); pass a run folder or checkpoint.")
    manifest, problem = _load(path)
    if problem is not None or manifest is None:
        raise corrupt_run(path, problem or "is missing")
    return Run(path, manifest)


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string with microseconds (sorts chronologically)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


def _created_at(run_dir: Path, manifest: dict[str, Any] | None) -> str:
    """When the run was created, as `utc_now` writes it: the manifest's `created_at`, else the time in the
    directory name, else the time run.json was last written (for runs whose manifest cannot be read)."""
    value = manifest.get("created_at") if manifest is not None else None
    if isinstance(value, str):
        return value
    try:
        stamp = _dt.datetime.strptime(run_dir.name[: len("YYYY-MM-DD_HH-MM-SS")], TIMESTAMP_FORMAT)
        return stamp.astimezone(_dt.UTC).isoformat(timespec="microseconds")
    except ValueError:
        pass
    try:
        written = (run_dir / MANIFEST).stat().st_mtime
    except OSError:
        return ""
    return _dt.datetime.fromtimestamp(written, _dt.UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Run:
    """A run directory and its manifest."""

    path: Path
    manifest: dict[str, Any]
    home: Path = field(init=False, repr=False, compare=False)
    """The run folder with its links followed, as it was when the run was found: the files of the run are read
    only from inside it (`trust.paths.confined`), so a folder swapped for a link later is not followed."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", paths.real(self.path))

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        """The checkpoints the manifest lists whose files exist, oldest first (malformed entries left out)."""
        entries = self.manifest.get("checkpoints")
        return [
            entry
            for entry in (entries if isinstance(entries, list) else [])
            if isinstance(entry, dict)
            and isinstance(entry.get("file"), str)
            and entry["file"]
            and (self.path / entry["file"]).is_file()
        ]

    @property
    def created_at(self) -> str:
        return _created_at(self.path, self.manifest)

    def file(self, name: str, what: str = "checkpoint") -> Path:
        """The path of the run's file `name` (a path inside the run), refused (`OutsidePath`, naming `what`)
        when, with its links followed, it ends outside the run folder."""
        return paths.inside(self.path / name, self.home, what)


@dataclass(frozen=True)
class _UnreadableRun:
    """A run directory whose run.json does not parse or is malformed; `manifest` is the parsed dict, if any."""

    path: Path
    problem: str
    manifest: dict[str, Any] | None

    @property
    def created_at(self) -> str:
        return _created_at(self.path, self.manifest)

    def could_be(self, library: str, task: str, match: dict[str, Any]) -> bool:
        """Whether this might be a run of `library` on `task` with the `match` values (unknown: it might)."""
        manifest = self.manifest or {}
        wanted = {"library": library, "task": task, **match}
        return all(manifest[key] == value for key, value in wanted.items() if isinstance(manifest.get(key), str))

    def identified(self) -> bool:
        """Whether the manifest says, readably, which library and task the run is of."""
        return self.manifest is not None and all(isinstance(self.manifest.get(k), str) for k in ("library", "task"))
