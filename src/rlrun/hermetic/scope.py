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

The import phase (`Call.import_modules`), and what an import may change. Importing a library
changes some globals once per process: it adds logger handlers (SKRL), raises torch's print
precision and dynamo limits (rl_games), registers Gymnasium envs. Those effects stay: they belong
to the import, the library relies on them, and it would not redo them on the next call. Three things
an import may not change, because they are the caller's and the caller would see them move on
the first call only:
- the caller's random streams: `random`, NumPy's global generator and torch's CPU generator (each
  where it is already imported) are put back after the imports; SB3 and SKRL's JAX modules draw
  from them while they import;
- the caller's multiprocessing start method: TorchRL sets `spawn` as it is imported, which would change
  how every process, lock and semaphore the caller makes afterwards works (a `tqdm` bar's lock then starts
  multiprocessing's resource tracker); it is put back after the imports;
- the caller's warning behaviour: the imports run under `warnings.catch_warnings()`, so filters
  they add are dropped with it, and a warning they raise is recorded in `Call.import_warnings`
  instead of being shown or, under a caller's `simplefilter("error")`, raised. Those warnings are
  about the library's own code (rl_games' use of `torch.jit.script_method`), not the caller's.
Everything the call itself does afterwards is restored by the guards, whatever it is.
"""

from __future__ import annotations

import importlib
import multiprocessing
import random
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
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
            if guard.restore is not None and guard.available():
                saved.append((guard, guard.capture()))
    except BaseException:
        restore_all(saved)  # a capture with side effects (the atexit recorder) must be undone
        raise
    return saved


def restore_all(saved: list[tuple[Guard, Any]]) -> list[tuple[str, BaseException]]:
    """Restore in reverse order; every restorer runs, and failures are returned, not raised."""
    failures = []
    for guard, state in saved[::-1]:  # a slice keeps the element type, which mypy's `reversed` loses to Any here
        if guard.restore is None:  # never the case: `capture_all` keeps only restorable guards
            continue
        try:
            guard.restore(state)
        except BaseException as error:
            failures.append((guard.name, error))
    return failures


@contextmanager
def _caller_streams_kept() -> Iterator[None]:
    """Put the caller's random streams back after the block: `random`, and NumPy's and torch's CPU generators
    where they are imported already (a generator a module creates as it is imported is not the caller's); and
    the caller's multiprocessing start method."""
    numpy, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    states = (
        random.getstate(),
        None if numpy is None else numpy.random.get_state(),
        None if torch is None else torch.get_rng_state(),
    )
    method = multiprocessing.get_start_method(allow_none=True)
    try:
        yield
    finally:
        if multiprocessing.get_start_method(allow_none=True) != method:
            multiprocessing.set_start_method(method, force=True)
        random.setstate(states[0])
        if numpy is not None:
            numpy.random.set_state(states[1])
        if torch is not None:
            torch.set_rng_state(states[2])


class Call:
    """One hermetic call in progress: imports, the guarded run and the leak detector's bookkeeping."""

    def __init__(self, check_leaks: bool) -> None:
        self.check_leaks = check_leaks
        self.reports: list[str] = []
        self.import_warnings: list[warnings.WarningMessage] = []
        """Warnings raised while `import_modules` imported (recorded, never shown; see the module docstring)."""
        self._baseline: census.Snapshot | None = census.snapshot() if check_leaks else None

    def import_modules(self, names: Iterable[str]) -> None:
        """Import modules before capture, so their import-time effects are not taken for the call's.

        The imports keep the caller's random streams and warning behaviour (see the module docstring).
        """
        missing = [name for name in names if name not in sys.modules]
        if not missing:
            return
        if self._baseline is not None:
            self.reports += census.compare(self._baseline, census.snapshot(), what="the call")
        with _caller_streams_kept(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # record each one; "always" also leaves the modules' registries alone
            try:
                for name in missing:
                    importlib.import_module(name)
            finally:
                self.import_warnings += caught
        if self._baseline is not None:
            self._baseline = census.snapshot()

    def prepare(self, effect: Callable[[], None]) -> None:
        """Run `effect`, a once-per-process setup a library would otherwise do on first use inside the call (an
        import effect that is not an import), before capture, like `import_modules`."""
        if self._baseline is not None:
            self.reports += census.compare(self._baseline, census.snapshot(), what="the call")
        effect()
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
