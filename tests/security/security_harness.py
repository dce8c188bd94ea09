"""What every case of the security corpus runs in: its workspace, the genuine runs it tampers with, and the
checks made around each call.

A workspace is one `tmp_path` laid out so that every place a call may write is known:

    cwd/       the working directory of the call (it must stay as it is)
    inputs/    the crafted files a colleague shared: agent configurations, specs, a hub folder (left as they are)
    outside/   where a planted link or a spec points, outside the log root and out folder (left as it is)
    logs/      the log root a call may write into
    out/       the bench or tune folder a call may write into

`tree` fingerprints every entry under the workspace (links not followed, files by content) so that a test can
say what a call changed. `Watchdog` stops a call that runs past its deadline or grows the process by gigabytes
(a YAML alias bomb that is expanded), so a hang is a failure and not a hung suite. `SwapAfterReads` replaces a
file after it has been opened k times (an audit hook), the way an attacker replaces a checkpoint between rlrun's check
and the library's own load; `ReadWatch` (the same hook) records every file a call opens or folder it lists in a
place it must not read. `lose_first_attempt` stands in for a bench cell's first attempt, lost with its node while
an attacker writes a run folder into the shared `--storage`. The census helpers read the leak detector's snapshots
through the noise that onnxruntime's telemetry threads make (as tests/test_bad_inputs.py does).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rlrun.hermetic import census, hermetic_call

TASK = "rlrun/Pendulum-v1"
EXPERIMENT = "rlrun_Pendulum-v1"

LIBRARIES: dict[str, dict[str, Any]] = {
    # corpus library -> rlrun's library folder, the flags that select it, overrides for a run of a moment
    "rsl_rl": {
        "folder": "rsl_rl",
        "flags": ("--library", "rsl_rl"),
        "small": ("agent.num_steps_per_env=8", "agent.actor.hidden_dims=[16,16]", "agent.critic.hidden_dims=[16,16]"),
    },
    "skrl": {
        "folder": "skrl",
        "flags": ("--library", "skrl", "--ml_framework", "torch"),
        "small": ("agent.agent.rollouts=8", "agent.agent.learning_epochs=1", "agent.agent.mini_batches=1"),
    },
    "skrl_jax": {
        "folder": "skrl",
        "flags": ("--library", "skrl", "--ml_framework", "jax"),
        "small": ("agent.agent.rollouts=8", "agent.agent.learning_epochs=1", "agent.agent.mini_batches=1"),
    },
    "sb3": {
        "folder": "sb3",
        "flags": ("--library", "sb3"),
        "small": ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]"),
    },
    "rl_games": {
        "folder": "rl_games",
        "flags": ("--library", "rl_games"),
        "small": ("agent.params.config.horizon_length=8", "agent.params.config.minibatch_size=16"),
    },
    "torchrl": {
        "folder": "torchrl",
        "flags": ("--library", "torchrl"),
        "small": ("agent.steps_per_env=8", "agent.minibatch_size=16", "agent.num_epochs=1"),
    },
}
"""The library paths the corpus covers (a corpus library is a library on one framework)."""


# --- the workspace ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Workspace:
    """One case's folders (see the module docstring) and the marker its payloads would create."""

    root: Path

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def marker(self) -> Path:
        """The file a payload that runs creates: its existence after a call proves code from a file ran."""
        return self.root / "PAYLOAD-RAN"

    def make(self) -> Workspace:
        for folder in (self.cwd, self.inputs, self.outside):
            folder.mkdir(parents=True, exist_ok=True)
        return self


Entry = tuple[str, Any]


def tree(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, Entry]:
    """Every entry under `root` (links not followed) by relative path: its kind and its content (a file's size
    and hash, a link's target), leaving out the subtrees `skip`."""
    entries: dict[str, Entry] = {}
    skipped = {os.fspath(path) for path in skip}
    for directory, folders, files in os.walk(root, followlinks=False):
        if directory in skipped:
            folders[:] = []
            continue
        for name in [*folders, *files]:
            path = os.path.join(directory, name)
            if path in skipped:
                continue
            relative = os.path.relpath(path, root)
            info = os.lstat(path)
            if os.path.islink(path):
                entries[relative] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                entries[relative] = ("folder", None)
            elif os.path.isfile(path):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest() if info.st_size < 64 << 20 else ""
                entries[relative] = ("file", (info.st_size, info.st_mtime_ns, digest))
            else:
                entries[relative] = ("other", info.st_mode)
    return entries


def changes(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    """What differs between two `tree`s: each path added, removed or changed."""
    lines = [f"added {path}" for path in sorted(after.keys() - before.keys())]
    lines += [f"removed {path}" for path in sorted(before.keys() - after.keys())]
    lines += [f"changed {path}" for path in sorted(before.keys() & after.keys()) if before[path] != after[path]]
    return lines


# --- genuine runs -------------------------------------------------------------------------------------------


class GenuineRuns:
    """One tiny genuine run of `rlrun/Pendulum-v1` per corpus library, trained on first use (session-wide)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._runs: dict[str, Path] = {}
        self._benches: dict[str, Path] = {}

    def run(self, library: str) -> Path:
        """The run folder of `library`'s genuine run (do not change it: copy it, see `copy_run`)."""
        if library not in self._runs:
            import rlrun

            flags = LIBRARIES[library]["flags"]
            request = rlrun.TrainRequest(
                task=TASK,
                library=flags[1],
                ml_framework=flags[3] if len(flags) > 2 else None,
                num_envs=2,
                max_iterations=1,
                log_root=str(self.root / library),
                overrides=LIBRARIES[library]["small"],
            )
            result = rlrun.train(request)
            assert result.checkpoint is not None, f"the genuine {library} run saved no checkpoint"
            self._runs[library] = result.run_dir
        return self._runs[library]

    def bench(self, library: str, spec: dict[str, Any]) -> Path:
        """The out folder of a genuine bench of `spec` (one cell of `library`), run on first use (`spec` is the same
        at every call for a library; do not change the folder: copy it). The folder is named `out`, as a case's, so
        that its run folders lie where a case's bench puts them (`<out>/runs/<library>/out/...`)."""
        if library not in self._benches:
            import json

            import rlrun
            from rlrun.benching import load_spec

            folder = self.root / f"bench-{library}"
            folder.mkdir(parents=True)
            path = folder / "bench.yaml"
            path.write_text(json.dumps(spec), encoding="utf-8")  # JSON is YAML
            result = rlrun.bench(load_spec(path, out=str(folder / "out")))
            assert result.completed == 1, f"the genuine {library} bench did not complete: {result.rows}"
            self._benches[library] = result.out
        return self._benches[library]


def copy_run(genuine: Path, logs: Path, library: str, name: str | None = None, experiment: str = EXPERIMENT) -> Path:
    """A copy of a genuine run folder at `<logs>/<library folder>/<experiment>/<name>` (the genuine name if None)."""
    target = logs / LIBRARIES[library]["folder"] / experiment / (name or genuine.name)
    shutil.copytree(genuine, target, symlinks=True)
    return target


def last_checkpoint(run: Path) -> Path:
    """The newest checkpoint that `run`'s run.json lists."""
    import json

    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    return run / manifest["checkpoints"][-1]["file"]


# --- a call that cannot hang the suite ----------------------------------------------------------------------


class RanAway(BaseException):
    """Raised in the main thread when a call runs past its deadline or grows the process past its memory bound
    (a `BaseException`, so that rlrun's own `except Exception` does not turn it into an exit code)."""


def _rss_bytes(statm: int) -> int:
    """The resident set size, read from `statm`, a descriptor of `/proc/self/statm` held open for the whole
    block: a file opened and closed at each look would be seen by a census that lists open descriptors."""
    return int(os.pread(statm, 4096, 0).split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Watchdog:
    """Stops a call (SIGALRM to the main thread, whose handler raises `RanAway`) once it has run `seconds` since
    `arm()` or grown the process's resident memory by `grow_bytes`. The thread and the handler exist for the
    whole block, before the census and after it, so the leak detector sees neither come or go."""

    def __init__(self, seconds: float, grow_bytes: int = 2 << 30) -> None:
        self.seconds, self.grow_bytes = seconds, grow_bytes
        self.reason: str | None = None
        self._armed: tuple[float, int] | None = None
        self._stop = threading.Event()
        self._main = threading.main_thread().ident

    def __enter__(self) -> Watchdog:
        self._statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        self._previous = signal.signal(signal.SIGALRM, self._raise)
        self._thread = threading.Thread(target=self._watch, name="security-corpus-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(5)
        signal.signal(signal.SIGALRM, self._previous)
        os.close(self._statm)

    def arm(self) -> None:
        self.reason = None
        self._armed = (time.monotonic(), _rss_bytes(self._statm))

    def disarm(self) -> None:
        self._armed = None

    def _raise(self, signum: int, frame: Any) -> None:
        if self._armed is not None or self.reason is not None:
            raise RanAway(self.reason or "stopped")

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            armed = self._armed
            if armed is None or self.reason is not None:
                continue
            elapsed, grown = time.monotonic() - armed[0], _rss_bytes(self._statm) - armed[1]
            if elapsed > self.seconds:
                self.reason = f"the call ran past its {self.seconds:.0f} s deadline"
            elif grown > self.grow_bytes:
                self.reason = f"the call grew the process by {grown >> 20} MiB"
            if self.reason is not None and self._main is not None:
                signal.pthread_kill(self._main, signal.SIGALRM)


# --- replacing a file between two reads, and watching what a call reads -------------------------------------

_SWAPS: list[SwapAfterReads] = []
"""The swaps armed now (the audit hook below reads them; an audit hook cannot be removed, so there is one)."""
_WATCHES: list[ReadWatch] = []
"""The read watches armed now."""
_HOOKED = False
_READS = ("open", "os.listdir", "os.scandir")
"""The audit events of a file opened (`open()`, `os.open`) or a folder listed."""


def _on_audit(event: str, args: tuple[Any, ...]) -> None:
    if event not in _READS or not (_SWAPS or _WATCHES) or not args:
        return
    if not isinstance(args[0], str | bytes | os.PathLike):
        return
    try:
        opened = os.path.realpath(os.fsdecode(args[0]))
    except (TypeError, ValueError, OSError):
        return
    for watch in list(_WATCHES):
        watch.reading(event, opened)
    if event == "open":
        for swap in list(_SWAPS):
            swap.opening(opened)


def _hook() -> None:
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(_on_audit)
        _HOOKED = True


class SwapAfterReads:
    """Replace `path` with `replacement` (an atomic rename) right before it is opened for the `reads + 1`-th
    time: an attacker who shares the folder swaps a checkpoint after rlrun read it and before the library opens
    it again. The opens are seen through a Python audit hook ("open": every `open()` and `os.open`), in the
    thread that opens, so the swap lands exactly between two opens; the hook is inert outside this block."""

    def __init__(self, path: Path, replacement: Path, reads: int) -> None:
        self.path, self.replacement, self.reads = path, replacement, reads
        self.target = os.path.realpath(path)
        self.opens = 0
        self.swapped = threading.Event()

    def __enter__(self) -> SwapAfterReads:
        _hook()
        _SWAPS.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _SWAPS.remove(self)

    def opening(self, opened: str) -> None:
        if opened != self.target or self.swapped.is_set():
            return
        if self.opens == self.reads:
            os.replace(self.replacement, self.path)
            self.swapped.set()
        self.opens += 1


class ReadWatch:
    """Records each file opened and each folder listed under `folders` (links followed) while the block runs, in
    any thread (the audit hook above: `open()`, `os.open`, `os.listdir`, `os.scandir`): a call that refuses or
    ignores a link to outside, or a run folder outside the log root, must not have read it first. A `stat` is no
    read (a check that a path is a file, or where a link points, is how a call finds out it must not read it)."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self.folders = tuple(os.path.realpath(folder) for folder in folders)
        self.reads: list[str] = []

    def __enter__(self) -> ReadWatch:
        _hook()
        _WATCHES.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _WATCHES.remove(self)

    def reading(self, event: str, path: str) -> None:
        if any(path == folder or path.startswith(folder + os.sep) for folder in self.folders):
            self.reads.append(f"{event} {path}")


# --- a bench cell's attempt lost with its node ----------------------------------------------------------------

STORED_AT = "2099-01-01_00-00-{n:02d}_{key}"
"""The name a run folder planted in `--storage` takes: a cell's (`<time>_<key>`), newer than any real one."""


def lose_first_attempt(folder: Path, storage: Path) -> Callable[..., dict[str, Any]]:
    """A stand-in for `rlrun.benching.run.run_cell` (what `rlrun bench` runs per cell) for `bench --retries N
    --storage STORAGE`: each cell's first attempt is lost with its node (its row is a failed one, as a dead
    worker's is, and it leaves nothing under the log root), and meanwhile an attacker who shares the storage writes
    `folder` (a run folder or a link, copied as it is) where that attempt would have sent its run folder:
    `<storage>/<library>/<experiment>/<STORED_AT>`. The retry reads it back as the attempt's (`retries.retry`,
    `rlrun.benching.stored`); every later attempt is the real `run_cell`. A call run twice plants a newer copy."""
    import shutil

    from rlrun.benching.cell import experiment_parts, run_cell

    planted = [0]

    def run(cell: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if cell.attempt > 1:
            return run_cell(cell, *args, **kwargs)
        target = storage.joinpath(*experiment_parts(cell), STORED_AT.format(n=planted[0], key=cell.key))
        planted[0] += 1
        target.parent.mkdir(parents=True, exist_ok=True)
        if folder.is_symlink():
            os.symlink(os.readlink(folder), target)
        else:
            shutil.copytree(folder, target, symlinks=True)
        return cell.row(status="failed", error="worker died: the corpus lost this attempt's node", wall_s=0.0)

    return run


# --- the leak detector's census, through onnxruntime's noise (as in tests/test_bad_inputs.py) ---------------

FILES = "open file descriptors"
TRANSIENT = ("anon_inode:[eventfd]", "socket:[")
"""Descriptors that onnxruntime's telemetry threads open and close every few seconds once it is imported."""

_ENTRY = r"\(\d+, '(?:anon_inode:\[eventfd\]|socket:\[\d+\])'\)"
_CUT = r"(?:\(\d*(?:, '?(?:[as][^\n\]]*)?)?)?\.\.\."
_LIST = rf"\[(?:{_ENTRY}(?:, {_ENTRY})*\]|(?:{_ENTRY}, )*{_CUT})"
NOISE_REPORT = re.compile(
    rf"open file descriptors was modified by the call: (?:added|removed) {_LIST}(?:, removed {_LIST})?"
)


def is_noise(stderr: str) -> bool:
    """Whether rlrun's own leak detector (exit 1) reported that noise alone."""
    reports = [line for line in stderr.splitlines() if " was modified by the call: " in line]
    return (
        "rlrun: the call left global state changed:" in stderr
        and len(reports) == 1
        and bool(NOISE_REPORT.fullmatch(reports[0].strip()))
    )


def leaks_since(before: census.Snapshot, timeout: float = 3.0) -> list[str]:
    """`census.compare(before, now)`, less that noise."""
    after = census.settle(before)
    deadline = time.monotonic() + timeout
    while _transient_only(before, after) and _added(before, after) and time.monotonic() < deadline:
        time.sleep(0.02)
        after = census.snapshot()
    if _transient_only(before, after) and not _added(before, after):
        return []
    return census.compare(before, after)


def _added(before: census.Snapshot, after: census.Snapshot) -> set[tuple[int, str]]:
    return set(after.get(FILES, ())) - set(before.get(FILES, ()))


def _transient_only(before: census.Snapshot, after: census.Snapshot) -> bool:
    changed = {name for name in before if name in after and before[name] != after[name]}
    difference = set(before.get(FILES, ())) ^ set(after.get(FILES, ()))
    return changed == {FILES} and all(target.startswith(TRANSIENT) for _, target in difference)


def warm_up() -> None:
    """Import, once, everything a corpus call may import, through a call's import phase (import effects belong
    to the import, not to a call, and the census is taken before each call)."""
    from rlrun.api import imports
    from rlrun.libraries import LIBRARIES as TABLE
    from rlrun.libraries import load_adapter
    from rlrun.reports import HEAVY_MODULES

    names = [*imports.CORE_IMPORTS, *imports.EXPORT_IMPORTS, *HEAVY_MODULES]
    names += ["onnxruntime", "rlrun.executors", "sqlalchemy.engine", "sqlalchemy.exc", "rlrun.tuning.worker"]
    if imports.has("optuna"):
        from rlrun.reports.tune import HEAVY_MODULES as TUNE_HEAVY_MODULES

        names += list(TUNE_HEAVY_MODULES)
    for library in TABLE.values():
        if library.installed:
            names += load_adapter(library).IMPORTS["torch"]
    with hermetic_call(name="security corpus warm-up") as call:
        call.import_modules([name for name in names if imports.has(name.partition(".")[0])])
