"""Run directories, the `run.json` manifest, atomic writes and checkpoint lookup.

Layout of one run (Isaac Lab's, so its users find their way):

    <log_root>/<library>/<experiment>/<YYYY-MM-DD_HH-MM-SS>[_<run_name>]/
        run.json            manifest: versions, task, seed, argv, status, checkpoints and their returns
        params/agent.yaml   the agent configuration the library received
        params/env.yaml     the task's keyword arguments
        <checkpoints>       in the library's own format and names (model_<iteration>.pt for RSL-RL)
        events.out.tfevents.*

Every file rlrun writes goes through a temporary file in the same directory, flush, fsync and
`os.replace`, so a reader sees the old file or the new one, never a partial one. Files and folders get
the modes the process's umask gives (0644 and 0755 under umask 022), as every other tool's output does.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from rlrun.errors import CheckpointNotFound, CorruptRun, InvalidArgument

MANIFEST = "run.json"
MANIFEST_VERSION = 1
TIMESTAMP_FORMAT = "%Y-%m-%d_%H-%M-%S"
SELECTORS = ("latest", "best")
TEMPORARY_SUFFIX = ".rlrun-tmp"
MAX_SAME_SECOND = 10_000
"""Runs of one name that may start in one second (`_2` ... `_10000`); one more is refused."""


# --- atomic writes ------------------------------------------------------------------------------------------


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync it and move it over `path` atomically.

    The temporary file has `path`'s own name, inside a temporary folder beside it: writers that record
    the file's name in its content (`torch.save` names its archive after the file) write the same bytes
    as they would to `path` itself. On any exception (KeyboardInterrupt included) the temporary folder
    is removed and `path` is untouched.
    """
    target = Path(path)
    sweep_temporaries(target.parent)
    folder: Path | None = None
    try:  # the folder is made inside the `try`: a Ctrl-C at any point after it exists still removes it
        folder = Path(
            tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=TEMPORARY_SUFFIX, dir=target.parent)
        )
        _WRITING.add(folder.name)
        temporary = folder / target.name
        mode = _new_file_mode(folder)
        yield temporary
        with open(temporary, "rb+") as written:
            os.fsync(written.fileno())
            if os.fstat(written.fileno()).st_mode & 0o7777 != mode:
                os.fchmod(written.fileno(), mode)
        os.replace(temporary, target)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
            _WRITING.discard(folder.name)
    _fsync_directory(target.parent)


_WRITING: set[str] = set()
"""The temporary folders this process is writing in now; `sweep_temporaries` removes this process's others
(left by an interrupt that came while one was being made or removed)."""


def _new_file_mode(folder: Path) -> int:
    """The mode a plain `open(path, "w")` gives a new file in this process: `0o666` less the umask.

    Found by making an empty file in `folder` rather than by `os.umask`, which can only be read by setting
    it, and a file another thread makes in between would get the wrong mode. `atomic_path` gives the written
    file this mode, so a run's files are as readable as any other tool's output (0644 under umask 022, 0600
    under 077) whatever the writer did: one that wrote through `mkstemp` would leave 0600.
    """
    probe = folder / ".mode"
    descriptor = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    try:
        return os.fstat(descriptor).st_mode & 0o7777
    finally:
        os.close(descriptor)
        probe.unlink()


def sweep_temporaries(directory: Path) -> list[Path]:
    """Delete temporary files that a writer killed mid-write (SIGKILL, power loss) left in `directory`.

    A temporary file's name carries its writer's process id; only files of processes that no longer run, and
    this process's own that it is not writing in, are deleted, so a concurrent writer's file is left alone.
    They are never taken for checkpoints anyway: lookups only consider files that run.json lists.
    """
    removed = []
    for candidate in directory.glob(f".*{TEMPORARY_SUFFIX}"):
        parts = candidate.name.rsplit(".", 3)
        pid = int(parts[-3]) if len(parts) == 4 and parts[-3].isdigit() else None
        if pid is None or (pid == os.getpid() and candidate.name in _WRITING) or (pid != os.getpid() and _running(pid)):
            continue
        if candidate.is_dir():
            shutil.rmtree(candidate, ignore_errors=True)
        else:
            candidate.unlink(missing_ok=True)  # a temporary file of an earlier rlrun
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
    """Claim a new run directory: create it, empty, and return its path.

    The first run started in a second gets `<YYYY-MM-DD_HH-MM-SS>[_<run_name>]`; the runs started in the
    same second after it, in this process or any other, get `_2`, `_3`, ... . The claim is a `mkdir`
    that fails when the name exists (atomic on local filesystems and NFS), so two processes never get
    the same directory; the name says nothing about order, lookups order runs by `created_at`.
    """
    stamp = (now or _dt.datetime.now()).strftime(TIMESTAMP_FORMAT)
    base = Path(log_root).absolute() / library / experiment
    base.mkdir(parents=True, exist_ok=True)
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


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write `run.json` atomically."""
    atomic_write_text(run_dir / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """Return the run's manifest, or None when it is missing or unreadable (malformed ones are returned)."""
    try:
        manifest = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
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
    """The parsed run.json of `run_dir` (a dict, or None when it is not one) and its problem (None: sound)."""
    try:
        text = (run_dir / MANIFEST).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"
    except OSError as error:
        return None, f"cannot be read ({error.strerror or type(error).__name__})"
    try:
        manifest = json.loads(text)
    except ValueError as error:
        return None, f"does not parse as JSON ({error})"
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


def _newest_first(runs: list[Any]) -> list[Any]:
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
        named = [run for run in [*runs, *broken] if run.path.name == load_run]
        if not named:
            pattern = _load_run_pattern(load_run)
            named = [run for run in [*runs, *broken] if pattern.fullmatch(run.path.name)]
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
    ordered = _newest_first([*runs, *broken])
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


# --- the record of a training run ---------------------------------------------------------------------------


class RunRecord:
    """A training run's directory and its manifest, written atomically at every change.

    `create` claims the run directory, writes `params/agent.yaml`, `params/env.yaml` and a first
    `run.json` with status `running`; `add_checkpoint` records each checkpoint the library saves;
    `finish` sets the final status.
    """

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.dir = directory
        self.manifest = manifest

    @classmethod
    def create(
        cls,
        log_root: Path,
        library: str,
        experiment: str,
        run_name: str | None,
        manifest: dict[str, Any],
        params: dict[str, str],
    ) -> RunRecord:
        """Claim a new run directory and write its parameter files (name -> YAML text) and manifest."""
        record = cls(
            new_run_dir(log_root, library, experiment, run_name),
            {
                "version": MANIFEST_VERSION,
                **manifest,
                "created_at": utc_now(),
                "status": "running",
                "checkpoints": [],
            },
        )
        (record.dir / "params").mkdir(parents=True)
        for name, text in params.items():
            atomic_write_text(record.dir / "params" / name, text)
        record.write()
        return record

    def write(self) -> None:
        write_manifest(self.dir, self.manifest)

    def add_checkpoint(self, name: str, **fields: Any) -> None:
        """List checkpoint file `name` (replacing an entry of the same file, saved again) and rewrite run.json."""
        entries = self.manifest["checkpoints"]
        entries[:] = [entry for entry in entries if entry["file"] != name]
        entries.append({"file": name, **fields, "saved_at": utc_now()})
        self.write()

    def finish(self, status: str, **fields: Any) -> None:
        self.manifest.update(status=status, finished_at=utc_now(), **fields)
        self.write()


def versions(distribution: str, version: str | None) -> dict[str, str | None]:
    """The versions a manifest records: rlrun, the library's distribution, torch, Gymnasium and Python."""
    import importlib.metadata
    import sys

    def installed(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "rlrun": installed("rlrun"),
        distribution: version,
        "torch": installed("torch"),
        "gymnasium": installed("gymnasium"),
        "python": sys.version.split()[0],
    }


def jsonable(result: Any, limit: int | None = 1000) -> dict[str, Any]:
    """A result dataclass as a JSON-ready dict: paths as strings, sequences as lists, those of `limit`
    items or more left out (None: none)."""
    import dataclasses

    def plain(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, (tuple, list)):
            return [plain(item) for item in value]
        return value

    return {
        key: plain(value)
        for key, value in dataclasses.asdict(result).items()
        if limit is None or not isinstance(value, (tuple, list)) or len(value) < limit
    }
