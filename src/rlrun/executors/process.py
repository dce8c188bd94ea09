"""The `process` executor: a pool of spawn-started worker processes, each serving many items.

Built on `multiprocessing` primitives, not `concurrent.futures.ProcessPoolExecutor` (which breaks the
whole pool when one worker dies). Each worker has its own duplex pipe: the parent sends it one item at a
time and waits on every busy worker's pipe and process sentinel together, so it always knows which item a
worker held when it died. No queue, so no feeder thread and no semaphore.

- A worker imports what it needs once and serves item after item (each a hermetic call in the bench).
- A worker that dies mid-item (SIGKILL, segfault, `os._exit`, out of memory) fails that item alone with
  one line (`worker died: killed by signal SIGKILL`, `worker died: exited with code 3`); the pool starts
  another worker and goes on. A worker that exits with code 1 before its first message (`READY`) is said to
  have died while starting, with the usual cause: a calling script without `if __name__ == "__main__":`.
- Workers ignore SIGINT: Ctrl-C goes to the whole foreground process group, and it is the parent that
  decides. SIGINT stays blocked from the moment a worker is started until it has set that up, so a
  worker still booting never prints a `KeyboardInterrupt` traceback.
- Leaving the context (normally, on an exception, on Ctrl-C) asks idle workers to exit, sends SIGTERM to
  busy ones (a hermetic training saves a checkpoint and stops), SIGKILLs whatever is left after `grace`
  seconds, and joins and closes everything: no thread, file descriptor or child process is left behind.
  Starting a spawn process also starts `multiprocessing`'s resource tracker (one more child process and
  descriptor, for the rest of the process's life); when the tracker was not running before the first
  pool started, the last pool to close stops it again, so that a pool leaves the process as it found it.
  (Code that registered its own semaphores or shared memory with that tracker in the meantime would see
  their names unlinked: start such code's tracker before the pool, or after it.)
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from multiprocessing import resource_tracker, util
from multiprocessing.connection import Connection, wait
from typing import Any

from rlrun.errors import InvalidArgument
from rlrun.executors.base import Executor, Finished, OnProgress, death_reason, describe_exception, reporting_to

GRACE_S = 5.0
"""How long busy workers have to stop after SIGTERM before they are killed."""

_CONTEXT = multiprocessing.get_context("spawn")

# ---------------------------------------------------------------------------------------------------------------
# The worker's side


def _serve(conn: Connection) -> None:
    """A worker's loop: receive `(index, pickled (function, item))`, reply `(index, ok, pickled value | error,
    last)`.

    Runs until the parent sends `None` or closes its end. An exception from `function` is replied as one line
    and the worker serves on; `KeyboardInterrupt` or `SystemExit` (a SIGTERM that the function turned into an
    exception, or the function's own) is replied too, with `last` set, then the worker exits (its state is
    unknown after it; the pool starts a new one)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    with conn:
        with contextlib.suppress(EOFError, OSError):
            conn.send(READY)
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return
            if message is None:
                return
            index, payload = message
            with reporting_to(functools.partial(_send_progress, conn)):
                ok, outcome, last = _serve_one(payload)
            try:
                conn.send((index, ok, outcome, last))
            except (EOFError, OSError):
                return
            if last:
                return


def _send_progress(conn: Connection, message: Any) -> None:
    """A `report` from the item's function, sent ahead of the item's reply (lost if the parent is gone)."""
    with contextlib.suppress(EOFError, OSError):
        conn.send((PROGRESS, message))


PROGRESS = "progress"
"""Marks a worker's progress message; an item's reply is a 4-tuple."""
READY = "ready"
"""A worker's first message: it started and runs its loop (spawn's start, its imports of the calling script's
main module included, went through)."""
UNGUARDED_MAIN = (
    "; it died while starting, before it ran anything: a script that runs rlrun with the process executor must "
    'call it under `if __name__ == "__main__":`, since each worker imports the script again (Python\'s own '
    "message is on stderr)"
)
"""Added to the reason of a worker that died before its `READY`: the usual cause is a script without the main
guard, whose module-level rlrun call the worker then runs, which multiprocessing refuses with exit code 1."""


def _serve_one(payload: bytes) -> tuple[bool, Any, bool]:
    """Run one item: whether it gave a value, the pickled value or the one-line error, and whether the worker
    must stop after replying."""
    try:
        function, item = pickle.loads(payload)
    except Exception as error:
        return False, f"the item could not be read in the worker: {describe_exception(error)}", False
    try:
        value = function(item)
    except Exception as error:
        return False, describe_exception(error), False
    except BaseException as error:
        return False, describe_exception(error), True
    try:
        return True, pickle.dumps(value, pickle.HIGHEST_PROTOCOL), False
    except Exception as error:
        return False, f"the result could not be sent back: {describe_exception(error)}", False


# ---------------------------------------------------------------------------------------------------------------
# The parent's side


class _Worker:
    """One worker process, the parent's end of its pipe, and the index of the item it holds (None: idle)."""

    def __init__(self, process: Any, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.index: int | None = None
        self.ready = False
        """Whether its `READY` came: it got through its start."""
        self.reason: str | None = None
        """Why the process ended, once it is released (joined and closed)."""

    def stop(self) -> None:
        """Ask an idle worker to exit; send SIGTERM to a busy one."""
        if self.index is None:
            with contextlib.suppress(OSError):
                self.conn.send(None)
        else:
            self.process.terminate()

    def release(self, grace: float | None = None) -> str:
        """Join the process (killing it if it does not end within `grace` seconds, default `GRACE_S`), close
        what it held, and return the reason it ended, for the item it held. Idempotent."""
        if self.reason is None:
            if self.process.exitcode is None:
                self.process.join(GRACE_S if grace is None else grace)
            if self.process.exitcode is None:
                self.process.kill()
                self.process.join()
            reason = death_reason(self.process.exitcode)
            if not self.ready and self.process.exitcode == 1:
                reason += UNGUARDED_MAIN
            self.conn.close()
            self.process.close()
            self.reason = reason
        return self.reason


def _tracker_pid() -> int | None:
    """The pid of this process's `multiprocessing` resource tracker, if it started one (private API: None
    where it changed)."""
    tracker = getattr(resource_tracker, "_resource_tracker", None)
    pid = getattr(tracker, "_pid", None)
    return pid if isinstance(pid, int) else None


class _Pools:
    """How many pools have workers now, and whether the resource tracker ran before the first one started."""

    lock = threading.Lock()
    open = 0
    tracker_was_running = True

    @classmethod
    def enter(cls) -> None:
        with cls.lock:
            if cls.open == 0:
                cls.tracker_was_running = _tracker_pid() is not None
            cls.open += 1

    @classmethod
    def leave(cls) -> None:
        with cls.lock:
            cls.open -= 1
            if cls.open or cls.tracker_was_running or _tracker_pid() is None:
                return
            if multiprocessing.active_children():  # someone else's processes may still use the tracker
                return
            stop = getattr(getattr(resource_tracker, "_resource_tracker", None), "_stop", None)
            if callable(stop):
                stop()


class _Pool:
    """The workers and the bookkeeping that `ProcessExecutor.close` and its finalizer share (the finalizer
    must not hold the executor itself)."""

    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self.entered = False

    def retire(self, workers: Sequence[_Worker]) -> None:
        """Stop these workers and release them, even when interrupted half-way."""
        workers = [worker for worker in workers if worker.reason is None]
        try:
            for worker in workers:
                worker.stop()
            deadline = time.monotonic() + GRACE_S
            for worker in workers:
                worker.process.join(max(0.0, deadline - time.monotonic()))
        finally:
            for worker in workers:
                with contextlib.suppress(ValueError):
                    self.workers.remove(worker)
                worker.release(grace=0.0)

    def shutdown(self) -> None:
        try:
            self.retire(self.workers)
        finally:
            if self.entered:
                self.entered = False
                _Pools.leave()


class ProcessExecutor(Executor):
    """A pool of `workers` spawn-started processes, each running one item at a time and many in a row.

    `function` and the items must pickle (a module-level function); the parent's `sys.path` and working
    directory reach the workers, so a function importable here is importable there. Workers start when a run
    needs them and stay until `close()`, serving later runs too. One run at a time.
    """

    name = "process"

    def __init__(self, workers: int | None = None) -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InvalidArgument(f"workers must be an integer >= 1, got {workers!r}.")
        self.workers = workers
        self._pool = _Pool()
        self._finalizer = util.Finalize(self, self._pool.shutdown, exitpriority=10)
        self._running = False
        self._closed = False

    @property
    def pids(self) -> tuple[int | None, ...]:
        """The process ids of the live workers (for tests and diagnostics)."""
        return tuple(worker.process.pid for worker in self._pool.workers)

    def close(self) -> None:
        self._closed = True
        self._finalizer()  # runs `_pool.shutdown` once, and unregisters it from the interpreter's exit

    # --- internals ---------------------------------------------------------------------------------------------

    def _run(
        self,
        function: Callable[[Any], Any],
        items: Sequence[Any],
        on_start: Callable[[int], None] | None,
        on_progress: OnProgress | None,
    ) -> Iterator[Finished]:
        pending = deque(range(len(items)))
        busy: list[_Worker] = []
        try:
            while pending or busy:
                while pending:
                    worker = self._idle_worker()
                    if worker is None:
                        break
                    index = pending.popleft()
                    failure = self._send(worker, index, function, items[index])
                    if failure is not None:
                        yield failure
                        continue
                    busy.append(worker)
                    if on_start is not None:
                        on_start(index)
                if not busy:
                    continue
                ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
                for worker in [w for w in busy if w.conn in ready or w.process.sentinel in ready]:
                    finished = self._receive(worker, on_progress)
                    if finished is None:  # progress only: the item runs on
                        continue
                    if worker.index is None:
                        busy.remove(worker)
                    yield finished
        finally:
            self._running = False
            if busy and not self._closed:
                self._pool.retire(busy)  # the run was given up: stop the items still running

    def _idle_worker(self) -> _Worker | None:
        """An idle live worker, a new one if the pool has room, else None."""
        for worker in list(self._pool.workers):
            if worker.index is not None:
                continue
            if worker.process.is_alive():
                return worker
            self._pool.retire([worker])  # died while idle (it held nothing)
        if len(self._pool.workers) < self.workers:
            return self._start_worker()
        return None

    def _start_worker(self) -> _Worker:
        if not self._pool.entered:
            _Pools.enter()
            self._pool.entered = True
        parent_conn, child_conn = _CONTEXT.Pipe(duplex=True)
        process = _CONTEXT.Process(target=_serve, args=(child_conn,), name="rlrun-worker", daemon=False)
        worker = _Worker(process, parent_conn)
        start_method = multiprocessing.get_start_method(allow_none=True)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                process.start()
            finally:
                child_conn.close()
                if start_method is None:  # spawning reads the default start method, which fixes it: unfix it
                    multiprocessing.set_start_method(None, force=True)
            self._pool.workers.append(worker)
        except BaseException:
            parent_conn.close()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a Ctrl-C that came meanwhile is raised now
        return worker

    def _send(self, worker: _Worker, index: int, function: Callable[[Any], Any], item: Any) -> Finished | None:
        """Give `worker` the item; return a `Finished` with the reason when it cannot be given."""
        try:
            payload = pickle.dumps((function, item), pickle.HIGHEST_PROTOCOL)
        except Exception as error:
            return Finished(index, error=f"the item could not be sent to a worker: {describe_exception(error)}")
        worker.index = index
        try:
            worker.conn.send((index, payload))
        except OSError:  # the worker died before it took the item
            self._pool.workers.remove(worker)
            return Finished(index, error=worker.release())
        return None

    def _receive(self, worker: _Worker, on_progress: OnProgress | None = None) -> Finished | None:
        """The outcome of the item `worker` holds, now that its pipe or its sentinel is ready; None when the pipe
        held only progress messages (each handed to `on_progress`) and the worker is still running."""
        index = worker.index
        assert index is not None
        message = None
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if isinstance(message, str) and message == READY:
                    worker.ready = True
                    message = None
                    continue
                if not (isinstance(message, tuple) and len(message) == 2 and message[0] == PROGRESS):
                    break
                if on_progress is not None:
                    on_progress(index, message[1])
                message = None
            else:
                if worker.process.is_alive():
                    return None
        except (EOFError, OSError):
            message = None
        if message is None:  # the pipe closed, or the process ended with nothing more to read: it died
            self._pool.workers.remove(worker)
            worker.index = None
            return Finished(index, error=worker.release())
        worker.index = None
        _, ok, payload, last = message
        if last:  # the worker leaves after this reply: give it no other item
            self._pool.workers.remove(worker)
            worker.release()
        if not ok:
            return Finished(index, error=payload)
        try:
            return Finished(index, value=pickle.loads(payload))
        except Exception as error:
            return Finished(index, error=f"the result could not be read here: {describe_exception(error)}")


__all__ = ["GRACE_S", "ProcessExecutor"]
