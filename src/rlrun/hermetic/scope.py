"""The hermetic scope: one call at a time, imports first, then capture, run and restore.

    with hermetic_call(check_leaks=None) as call:    # one call per process at a time
        request = parse(argv)                         # parse and validate: changes nothing
        call.import_modules(["torch", "rsl_rl"])      # import effects belong to the import
        with call.guarded():                          # capture every guard
            run(request)                              # the library changes what it likes
                                                      # restore in reverse order, each isolated

A restorer that fails does not stop the others and never masks the call's own exception (its
error is attached to that exception as a note); when the call itself succeeded, the restore
failures are raised together as `RestoreFailed`. `KeyboardInterrupt` and `SystemExit` are
restored for, then propagate unchanged.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from rlrun.errors import ConcurrentCall, LeakDetected, RestoreFailed
from rlrun.hermetic import census
from rlrun.hermetic.registry import GUARDS, Guard

_state_lock = threading.Lock()
_owner: int | None = None
_owner_name = ""
_depth = 0


def capture_all() -> list[tuple[Guard, Any]]:
    """Capture every available restorable guard, in registry order."""
    saved = []
    try:
        for guard in list(GUARDS):
            if guard.restored and guard.available():
                saved.append((guard, guard.capture()))
    except BaseException:
        restore_all(saved)  # a capture with side effects (the atexit recorder) must be undone
        raise
    return saved


def restore_all(saved: list[tuple[Guard, Any]]) -> list[tuple[str, BaseException]]:
    """Restore in reverse order; every restorer runs, and failures are returned, not raised."""
    failures = []
    for guard, state in reversed(saved):
        try:
            guard.restore(state)  # type: ignore[misc]  # only restorable guards are captured
        except BaseException as error:
            failures.append((guard.name, error))
    return failures


class Call:
    """One hermetic call in progress: imports, the guarded run and the leak detector's bookkeeping."""

    def __init__(self, check_leaks: bool) -> None:
        self.check_leaks = check_leaks
        self.reports: list[str] = []
        self._baseline: census.Snapshot | None = census.snapshot() if check_leaks else None

    def import_modules(self, names: Iterable[str]) -> None:
        """Import modules before capture, so their import-time effects are not taken for the call's."""
        missing = [name for name in names if name not in sys.modules]
        if not missing:
            return
        if self._baseline is not None:
            self.reports += census.compare(self._baseline, census.snapshot(), what="the call")
        for name in missing:
            importlib.import_module(name)
        if self._baseline is not None:
            self._baseline = census.snapshot()

    @contextmanager
    def guarded(self) -> Iterator[None]:
        """Capture every guard, run the block, restore every guard; see the module docstring."""
        saved = capture_all()
        try:
            yield
        except BaseException as error:
            for name, failure in restore_all(saved):
                error.add_note(f"rlrun: restoring {name} failed too: {failure!r}")
            raise
        failures = restore_all(saved)
        interrupts = [failure for _, failure in failures if not isinstance(failure, Exception)]
        if interrupts:  # Ctrl+C during the restore: everything else was still restored
            raise interrupts[0]
        if failures:
            details = "; ".join(f"{name}: {failure!r}" for name, failure in failures)
            raise RestoreFailed(f"could not restore {len(failures)} guarded global(s): {details}")

    def finish(self) -> list[str]:
        """Compare the process with the snapshot taken after the last import and return the reports."""
        if self._baseline is not None:
            self.reports += census.compare(self._baseline, census.settle(self._baseline))
            self._baseline = None
        return self.reports


@contextmanager
def hermetic_call(*, check_leaks: bool | None = None, name: str = "rlrun") -> Iterator[Call]:
    """Run one call: refuse a concurrent one from another thread, and check for leaks if asked.

    Nested calls on the thread that holds the call are allowed; each one guards its own span.
    With the leak detector on, differences found after a successful call raise `LeakDetected`;
    after a failed call they are attached to its exception as a note.
    """
    global _owner, _owner_name, _depth
    me = threading.get_ident()
    with _state_lock:
        if _owner is not None and _owner != me:
            raise ConcurrentCall(
                f"{name}: another rlrun call ({_owner_name}) is running in thread {_owner}; rlrun guards "
                "process-global state, so one process runs one call at a time. Run parallel calls in "
                "separate processes: concurrent.futures.ProcessPoolExecutor(mp_context="
                "multiprocessing.get_context('spawn')), Ray or torchrun."
            )
        if _owner is None:
            _owner, _owner_name = me, name
        _depth += 1
    try:
        call = Call(census.leak_check_requested(check_leaks))
        try:
            yield call
        except BaseException as error:
            for report in call.finish():
                error.add_note(f"rlrun leak detector: {report}")
            raise
        reports = call.finish()
        if reports:
            raise LeakDetected("\n".join(reports))
    finally:
        with _state_lock:
            _depth -= 1
            if _depth == 0:
                _owner, _owner_name = None, ""
