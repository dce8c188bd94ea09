"""Atomic writes: a reader sees the old file or the new one, never a partial one, whatever stops the writer.

Every file rlrun writes goes to a temporary file in a temporary folder beside it, is fsynced and moved over
its target with `os.replace`; then the target's directory is fsynced, so that the move itself survives a
power loss. Files that must land together (a checkpoint and the run.json that lists it) are written as one
batch (`atomic_paths`): every file is fsynced before the first move and each directory once after its
moves, instead of a directory fsync per file. Files get the mode the process's umask gives (0644 under
umask 022), as every other tool's output does.

Nothing is written through a link: a temporary folder is a new one (`os.mkdir` refuses a name that exists),
and `os.replace` puts the file in place of whatever has the target's name, a link included, instead of
following it.
"""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun.trust.paths import create_file

TEMPORARY_SUFFIX = ".rlrun-tmp"


@contextmanager
def atomic_paths(*paths: str | os.PathLike[str], moved: list[Path] | None = None) -> Iterator[tuple[Path, ...]]:
    """Yield one temporary path per path in `paths`; on success move each over its path, in the given order.

    Every temporary file is fsynced before the first move, so no move publishes a partial file; the moves are
    made in order, so a crash between two of them leaves the earlier files new and the later ones old, never
    the reverse (list a checkpoint before the run.json that names it). Each directory is fsynced once, after
    its last move and before any move into another directory, so a later file's move never reaches the disk
    before an earlier one's. `moved`, if given, receives each path once its move is done: what an exception
    in the middle left new.

    A temporary file has its path's own name, inside a temporary folder beside it (one folder per directory):
    writers that record the file's name in its content (`torch.save` names its archive after the file) write
    the same bytes as they would to the path itself. On any exception (KeyboardInterrupt included) every
    temporary folder is removed and the paths not yet moved are untouched.
    """
    with written_batch(*paths) as batch:
        yield batch.temporaries
    commit_batch(batch, moved if moved is not None else [], lambda _: None)


@dataclass
class Folders:
    """What a writer of many batches into the same directories keeps between them (a `RunRecord` keeps one for
    its run): the directories already swept of dead writers' temporaries (`sweep_temporaries`), the mode a new
    file gets in this process (`_new_file_mode`), and the temporary folders of committed batches, empty, for
    the next batches into their directory. Without it each batch sweeps and probes again, and makes and removes
    its own folders: a mkdir and a rmdir per directory, each journal work for the file system, a noticeable part
    of a checkpoint moment. The writer calls `release` once no batch is in flight.
    """

    swept: set[Path] = field(default_factory=set)
    mode: int | None = None
    free: dict[Path, list[Path]] = field(default_factory=dict)
    """Empty temporary folders by the directory they are in. Only the writer's thread takes one (`prepare`); a
    committer thread gives them back (`discard`)."""

    made: set[Path] = field(default_factory=set)
    """Every temporary folder this writer made, until it is removed."""

    def release(self) -> None:
        """Remove the free temporary folders, and what an interrupted batch left: a folder whose removal a second
        Ctrl-C cut short, or one made an instant before the Ctrl-C that stopped its batch."""
        self.free.clear()  # each free folder is one the writer made
        while self.made:
            _remove_folder(self.made.pop())


@contextmanager
def written_batch(*paths: str | os.PathLike[str], folders: Folders | None = None) -> Iterator[Batch]:
    """Yield a prepared `Batch` of `paths` for the caller to write its `temporaries`; should the writing raise
    (KeyboardInterrupt included), its temporary folders are removed. Commit it afterwards: `commit_batch`, or a
    committer's `submit`. `folders`: what earlier batches of the same writer learned (see `Folders`)."""
    batch = Batch(paths, folders)
    try:
        batch.prepare()
        yield batch
    except BaseException:
        batch.discard()
        raise


class Batch:
    """The files of one `atomic_paths` batch: `prepare` makes their temporary folders, the caller writes
    `temporaries`, `commit` fsyncs and moves them in order, `discard` removes what is left, and
    `fsync_last_directory` makes the last move durable. `BackgroundCommits` runs the last three on a thread."""

    def __init__(self, paths: tuple[str | os.PathLike[str], ...], known: Folders | None = None) -> None:
        self.targets = [Path(path) for path in paths]
        if not self.targets or len(set(self.targets)) != len(self.targets):
            raise ValueError(f"atomic_paths needs distinct paths, got {[str(path) for path in self.targets]}")
        self.folders: dict[Path, Path] = {}  # a target directory -> the temporary folder beside it
        self.temporaries: tuple[Path, ...] = ()
        self._reuse = known is not None  # the writer keeps its folders between batches (and releases them)
        self._known = known if known is not None else Folders()
        self._mode = 0
        self._committed = False

    def prepare(self) -> None:
        """Make the temporary folders (call it inside a `try` whose `finally` discards: a Ctrl-C at any point
        after a folder exists still removes it)."""
        known = self._known
        for target in self.targets:
            if target.parent not in self.folders:
                if target.parent not in known.swept:
                    sweep_temporaries(target.parent)
                    known.swept.add(target.parent)
                free = known.free.setdefault(target.parent, [])
                if free:  # a committed batch's folder, empty: its files were moved
                    self.folders[target.parent] = free.pop()
                    continue
                folder = _new_folder(target, known.made)
                self.folders[target.parent] = folder
                _WRITING.add(folder.name)
        if known.mode is None:
            known.mode = _new_file_mode(next(iter(self.folders.values())))
        self._mode = known.mode
        self.temporaries = tuple(self.folders[target.parent] / target.name for target in self.targets)

    def commit(self, moved: list[Path] | None = None) -> None:
        """Fsync every written temporary, then move each over its target in order (see `atomic_paths`)."""
        for temporary in self.temporaries:  # plain descriptors: few system calls (see `BackgroundCommits`)
            descriptor = os.open(temporary, os.O_RDONLY)
            try:
                if os.fstat(descriptor).st_mode & 0o7777 != self._mode:
                    os.fchmod(descriptor, self._mode)  # before the fsync, which then makes the mode durable
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        targets = self.targets
        for index, (temporary, target) in enumerate(zip(self.temporaries, targets, strict=True)):
            os.replace(temporary, target)
            if moved is not None:
                moved.append(target)
            if index + 1 < len(targets) and targets[index + 1].parent != target.parent:
                _fsync_directory(target.parent)  # before a move elsewhere can reach the disk first
        self._committed = True

    def discard(self) -> None:
        """Remove the temporary folders, or give them back to the writer's `Folders` once the batch is committed
        (every file moved out)."""
        folders, self.folders = self.folders, {}
        try:
            for directory, folder in folders.items():
                if self._committed and self._reuse:
                    self._known.free[directory].append(folder)
                else:
                    _remove_folder(folder)
                    self._known.made.discard(folder)
        finally:
            if not self._reuse:  # a batch of its own: what an interrupt above or in `prepare` left goes now
                self._known.release()

    def fsync_last_directory(self) -> None:
        _fsync_directory(self.targets[-1].parent)


def commit_batch(batch: Batch, moved: list[Path], then: Callable[[list[Path]], None]) -> None:
    """Commit a written `batch` (see `Batch`), discard its folders, call `then(moved)` with the paths moved
    whether or not the commit completed, and fsync its last folder once it did."""
    try:
        batch.commit(moved)
    finally:
        batch.discard()
        then(moved)
    batch.fsync_last_directory()


class ForegroundCommits:
    """`BackgroundCommits`' interface for a writer that commits each batch at once, in its own thread: `submit`
    returns once the batch is in place and raises what its commit raised."""

    def submit(self, batch: Batch, moved: list[Path], then: Callable[[list[Path]], None]) -> None:
        commit_batch(batch, moved, then)

    def wait(self) -> None:
        """Nothing is ever in flight."""


class BackgroundCommits:
    """Commits written batches on one thread, in the order given, while the writer goes on.

    A batch's files are written by the caller (`torch.save` into the page cache: fast); what remains, fsyncing
    each file and its folders and moving them into place, mostly waits for the disk, without the GIL, and in
    the caller would hold up a training that saves a checkpoint every few iterations (SKRL saves two at a
    time). One committer thread ("rlrun-commit", started by the first `submit`) takes
    the batches from a queue in submission order; after a failed commit the later batches are discarded,
    never moved (their run.json would list the failed one's file). At most `IN_FLIGHT` batches are in flight
    at once: `submit` waits for the oldest beyond that. `wait` returns once none is, joining the thread and
    raising what a commit raised (once): a writer calls it before its last write, so no thread outlives the
    call (a Ctrl-C while it waits is held until the commits are done, then raised).

    A commit is not free for the writer's thread: each system call it makes releases the GIL and takes it
    back, and while the training holds it, taking it back forces a switch. So `Batch` makes few calls per
    commit (plain descriptors and `os.rmdir`, not `open()` and `shutil.rmtree`), and one thread commits every
    batch: a thread per batch costs more (`start` waits until the new thread runs, a wait for the scheduler
    when the other core is busy; `benchmarks/checkpoint_moments.py`).
    """

    IN_FLIGHT = 4

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Batch, list[Path], Callable[[list[Path]], None]] | None]
        self._queue = queue.SimpleQueue()
        self._slots = threading.Semaphore(self.IN_FLIGHT)  # taken by `submit`, given back as a batch is done
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, batch: Batch, moved: list[Path], then: Callable[[list[Path]], None]) -> None:
        """Commit `batch` (discarding its folders, fsyncing its last folder) after the batches before it, then
        call `then(moved)` with the paths that were moved, whether or not the commit completed. A Ctrl-C while
        it waits for the oldest batch (`IN_FLIGHT` of them in flight) is raised once this one is submitted."""
        interrupted = _held(self._slots.acquire)
        self._queue.put((batch, moved, then))
        if self._thread is None:
            self._thread = threading.Thread(target=self._commit_all, name="rlrun-commit", daemon=False)
            self._thread.start()
        if interrupted:  # a Ctrl-C while the oldest commit finished: raised now, this batch still on its way
            raise KeyboardInterrupt

    def wait(self) -> None:
        thread, self._thread = self._thread, None
        interrupted = False
        if thread is not None:
            self._queue.put(None)  # the thread's last item: it ends after the batches before it
            interrupted = _held(thread.join)
        error, self._error = self._error, None
        if error is not None:
            raise error
        if interrupted:
            raise KeyboardInterrupt

    def _commit_all(self) -> None:
        while (item := self._queue.get()) is not None:
            batch, moved, then = item
            try:
                if self._error is not None:  # an earlier batch failed: this one's run.json would list its file
                    batch.discard()
                else:
                    commit_batch(batch, moved, then)
            except BaseException as error:  # raised in the writer by its next `wait`
                self._error = error
            finally:
                self._slots.release()


def _held(wait: Callable[[], object]) -> bool:
    """Call `wait` (a blocking join or acquire) until it returns, holding a Ctrl-C that comes meanwhile; return
    whether one came."""
    interrupted = False
    while True:
        try:
            wait()
            return interrupted
        except KeyboardInterrupt:
            interrupted = True


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync it and move it over `path` atomically (a batch
    of one, see `atomic_paths`)."""
    with atomic_paths(path) as (temporary,):
        yield temporary


_WRITING: set[str] = set()
"""The temporary folders this process is writing in now; `sweep_temporaries` removes this process's others
(left by an interrupt that came while one was being made or removed)."""


def _new_file_mode(folder: Path) -> int:
    """The mode a plain `open(path, "w")` gives a new file in this process: `0o666` less the umask.

    Found by making an empty file in `folder` rather than by `os.umask`, which can only be read by setting
    it, and a file another thread makes in between would get the wrong mode. `atomic_paths` gives the written
    files this mode, so a run's files are as readable as any other tool's output (0644 under umask 022, 0600
    under 077) whatever the writer did: one that wrote through `mkstemp` would leave 0600.
    """
    probe = folder / ".mode"
    descriptor = create_file(probe)
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
        if candidate.is_dir() and not candidate.is_symlink():
            shutil.rmtree(candidate, ignore_errors=True)
        else:
            candidate.unlink(missing_ok=True)  # a temporary file of an earlier rlrun, or a link (never followed)
        removed.append(candidate)
    return removed


def _new_folder(target: Path, made: set[Path]) -> Path:
    """Make a new temporary folder beside `target` (mode 0700, as `tempfile.mkdtemp` makes it), named for it and
    this process. It is added to `made` before it exists, so an interrupt at any point leaves no folder that
    the writer does not know of."""
    for _ in range(100):
        folder = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMPORARY_SUFFIX}"
        made.add(folder)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            made.discard(folder)
            continue
        return folder
    raise FileExistsError(f"no free name for a temporary folder beside {str(target)!r}")


def _remove_folder(folder: Path) -> None:
    try:
        os.rmdir(folder)  # empty once committed: one system call
    except OSError:  # files left by a write that failed, or by an interrupted commit
        shutil.rmtree(folder, ignore_errors=True)
    _WRITING.discard(folder.name)


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
