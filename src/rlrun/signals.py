"""Ctrl-C and SIGTERM during a training: a first signal is a stop request at the next step, a second stops at
once; a Ctrl-C that arrives before the training takes signals itself is kept until it is acted on.
"""

from __future__ import annotations

import contextlib
import contextvars
import signal
import threading
from collections.abc import Iterator
from typing import Any, Protocol

from rlrun.errors import TrainingStopped

SIGNAL_REASONS = {"SIGINT": "interrupted", "SIGTERM": "terminated"}


class Stoppable(Protocol):
    """What a signal stops: a training's clock (`rlrun.api.clock.IterationClock`)."""

    stop_reason: str | None
    immediate: bool

    def request_stop(self, reason: str) -> None: ...


class InterruptLatch:
    """A Ctrl-C before a training takes signals itself (planning, imports, a tuner's storage), kept until it
    is acted on.

    Python raises a signal's `KeyboardInterrupt` in whatever code runs when it arrives, a weakref callback or
    a finalizer of the garbage collector included, and there it prints "Exception ignored" and drops it: a
    Ctrl-C during a tune trial's first imports could be lost, and the study run to its end with exit status 0.
    Within `installed()`, SIGINT still raises `KeyboardInterrupt` at once (as Python's own handler does) and
    is also remembered: `stop_signals` turns a remembered one into a stop request as the training starts, and
    `check` raises it again at a tuner's safe points. Only Python's default handler is replaced, only in the
    main thread, and it comes back afterwards; a nested `installed()` shares the outer one's memory. Install
    it outside a hermetic call (`rlrun.train`, the command line) or after its import phase (a tune worker):
    the leak detector compares the handlers around the import phase too.
    """

    def __init__(self) -> None:
        self.received = False

    @contextlib.contextmanager
    def installed(self) -> Any:
        if (
            threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        ):
            yield
            return
        self.received = False
        signal.signal(signal.SIGINT, self._handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.received = False

    def _handler(self, number: int, frame: Any) -> None:
        self.received = True
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.received:
            raise KeyboardInterrupt


LATCH = InterruptLatch()


@contextlib.contextmanager
def stop_signals(clock: Stoppable) -> Iterator[None]:
    """Within the block, a first SIGINT or SIGTERM asks `clock` to stop (the library finishes its step and the
    adapter saves a checkpoint); a second one stops at once while the library trains (`clock.interruptible`),
    and is only noted elsewhere (the run's last manifest write). Only the main thread can take signals;
    elsewhere this does nothing. The caller's handlers come back afterwards (the signal guard would restore
    them too)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    if LATCH.received:  # a Ctrl-C that Python dropped before this block (in a finalizer during the imports)
        clock.request_stop(SIGNAL_REASONS["SIGINT"])

    def handler(number: int, frame: Any) -> None:
        reason = SIGNAL_REASONS[signal.Signals(number).name]
        if clock.stop_reason is not None and clock.immediate:
            raise TrainingStopped(reason)
        clock.request_stop(reason)

    for name in SIGNAL_REASONS:
        number = getattr(signal, name)
        previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back for the block (a manifest's last write), then deliver them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    numbers = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, numbers)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


_OUTERMOST: contextvars.ContextVar[bool] = contextvars.ContextVar("rlrun_signals_outermost", default=False)


@contextlib.contextmanager
def termination_delivered() -> Iterator[None]:
    """Around the outermost rlrun call of a thread (`rlrun.train`, `rlrun.bench`, `rlrun.tune`, `rlrun.main`): a
    SIGTERM that stopped the call is raised again once the call has saved its checkpoint and restored every
    guard, so that it reaches the caller's own disposition. By default the process ends with it, as it would
    have without rlrun; a handler of the caller's runs (and, if it returns, `TrainingStopped` goes on). Calls
    inside it (a bench's cells, a tune's trials, `inner`) leave the signal to the outermost. The console command
    does not deliver it: it exits 143 (`rlrun.cli.console`)."""
    if _OUTERMOST.get():
        yield
        return
    token = _OUTERMOST.set(True)
    terminated = False
    try:
        yield
    except TrainingStopped as stop:
        terminated = stop.reason == "terminated"
        raise
    finally:
        _OUTERMOST.reset(token)
        if terminated and threading.current_thread() is threading.main_thread():
            signal.raise_signal(signal.SIGTERM)


@contextlib.contextmanager
def inner() -> Iterator[None]:
    """Within the block, rlrun's calls are not outermost (`termination_delivered`): a worker's cell or trial, whose
    stop its executor reports."""
    token = _OUTERMOST.set(True)
    try:
        yield
    finally:
        _OUTERMOST.reset(token)
