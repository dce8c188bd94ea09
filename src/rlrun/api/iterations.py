"""What a training call does at every environment step, whatever the library: the iteration clock.

`IterationClock` is the `on_step` hook of rlrun's episode statistics. At every iteration boundary
(every `env_steps_per_iteration` env steps) it makes a row, the same columns for every library, asks the
caller's `on_iteration` whether to go on, and writes the row to the run's `metrics.csv` and as the run's
`rlrun/*` TensorBoard scalars (`rlrun.api.curves`): the first row at once, later ones at most once a
second (`WRITE_INTERVAL_S`), and every row when the training ends, however it ends. A killed run keeps
its rows up to the last second. At any step it raises `TrainingStopped` once a stop was
asked for: by `on_iteration`, or by a first Ctrl-C (SIGINT) or SIGTERM, which `stop_signals` turns
into a request instead of an exception in the middle of the library's update. A second signal
stops at once. The adapter saves a checkpoint as the exception passes through it.
"""

from __future__ import annotations

import contextlib
import csv
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from rlrun.api.curves import Curves
from rlrun.errors import TrainingStopped

PROGRESS_INTERVAL_S = 0.1
"""How often, at most, a step hands the progress display its figures."""

WRITE_INTERVAL_S = 1.0
"""How often, at most, the rows made since the last write go to `metrics.csv` and the curves while a training
runs. Written as it was made, a row's csv line, flush and TensorBoard event (its protobuf and the record's CRC,
in pure Python) took some 110 us between two steps of a training (20 us on their own: the code runs cold),
8 ms of a 4-second rl_games call (73 iterations); written together, a second's rows take about 30 us each."""

METRICS_FILE = "metrics.csv"
METRICS_COLUMNS = ("iteration", "env_steps", "wall_s", "steps_per_s", "mean_return", "mean_length", "episodes")
SIGNAL_REASONS = {"SIGINT": "interrupted", "SIGTERM": "terminated"}


@dataclass(frozen=True)
class IterationRow:
    """One row of `metrics.csv`: the state of a training at the end of an iteration."""

    iteration: int
    """Iterations completed, counted on from the parent run's when resuming."""
    env_steps: int
    """Env steps of this run (not its parent's)."""
    wall_s: float
    steps_per_s: float
    mean_return: float | None
    """Mean return of the last 100 finished episodes (None before the first)."""
    mean_length: float | None
    episodes: int


OnIteration = Callable[[IterationRow], bool | None]
"""Called after every iteration; returning True stops the training there (a pruner's verdict)."""


class IterationClock:
    """The training's `on_step` hook: metrics rows at iteration boundaries, progress, stop requests.

    A stop requested at a step (by `on_iteration` at a boundary, or by a signal) is raised at the next
    step, so that the library finishes the update of the iteration that just ended and its checkpoint
    holds it.
    """

    def __init__(
        self,
        env_steps_per_iteration: int,
        first_iteration: int = 0,
        on_iteration: OnIteration | None = None,
        progress: Any = None,
    ) -> None:
        self.per_iteration = env_steps_per_iteration
        self.first_iteration = first_iteration
        self.on_iteration = on_iteration
        self.progress = progress
        self.stop_reason: str | None = None
        self.immediate = False
        """While True (the library is training), a second signal stops at once instead of at the next step."""
        self.rows: list[IterationRow] = []
        self._next = env_steps_per_iteration
        self._next_update = 0.0
        self._next_write = 0.0  # the first row is written at once
        self._unwritten: list[tuple[IterationRow, float]] = []  # rows and their times, not yet in the files
        self._started = time.perf_counter()
        self._file: TextIO | None = None
        self._writer: Any = None
        self.curves = Curves()

    def open(self, run_dir: Path) -> None:
        """Start `metrics.csv` (its header now, the rows as they are written) and the `rlrun/*` curves in the run
        directory; `close` writes what is left and closes both, even after a failed `open`."""
        self._file = open(run_dir / METRICS_FILE, "w", encoding="utf-8", newline="")  # noqa: SIM115
        self._writer = csv.writer(self._file)
        self._writer.writerow(METRICS_COLUMNS)
        self._file.flush()
        self.curves.open(run_dir)
        self._started = time.perf_counter()

    def request_stop(self, reason: str = "stopped") -> None:
        """Stop the training at its next env step (a first Ctrl-C, SIGTERM or a pruner)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """The span in which a second signal interrupts at once: the library's own training."""
        self.immediate = True
        try:
            yield
        finally:
            self.immediate = False

    def __call__(self, stats: Any) -> None:
        if self.stop_reason is not None:
            raise TrainingStopped(self.stop_reason)
        boundary = stats.env_steps >= self._next
        if self.progress is not None:
            now = time.monotonic()
            if boundary or now >= self._next_update:  # a display redraws a few times a second: no need for more
                self._next_update = now + PROGRESS_INTERVAL_S
                self.progress.update(stats.env_steps, stats.mean_return())
        if boundary:
            while stats.env_steps >= self._next:
                self._next += self.per_iteration
            row = self._row(stats)
            if self.on_iteration is not None and self.on_iteration(row):
                self.request_stop("stopped")

    def _row(self, stats: Any) -> IterationRow:
        wall = time.perf_counter() - self._started
        row = IterationRow(
            iteration=self.first_iteration + stats.env_steps // self.per_iteration,
            env_steps=stats.env_steps,
            wall_s=round(wall, 4),
            steps_per_s=round(stats.env_steps / wall, 1) if wall > 0 else 0.0,
            mean_return=stats.mean_return(),
            mean_length=stats.mean_length(),
            episodes=stats.episodes,
        )
        self.rows.append(row)
        if self._file is not None:
            self._unwritten.append((row, time.time()))
            now = time.monotonic()
            if now >= self._next_write:
                self._next_write = now + WRITE_INTERVAL_S
                self._write()
        return row

    def _write(self) -> None:
        """Write the rows not yet written, to `metrics.csv` and the curves, and flush both."""
        unwritten, self._unwritten = self._unwritten, []
        for row, wall_time in unwritten:
            self._writer.writerow(["" if value is None else value for value in vars(row).values()])
            self.curves.add(row, wall_time)
        self._file.flush()
        self.curves.flush()

    def close(self) -> None:
        try:
            if self._file is not None and self._unwritten:
                self._write()
        finally:
            try:
                self.curves.close()
            finally:
                if self._file is not None:
                    self._file.close()
                    self._file = None


class InterruptLatch:
    """A Ctrl-C before a training takes signals itself (planning, imports, a tuner's storage), kept until it
    is acted on.

    Python raises a signal's `KeyboardInterrupt` in whatever code runs when it arrives, a weakref callback or
    a finalizer of the garbage collector included, and there it prints "Exception ignored" and drops it: a
    Ctrl-C during a tune trial's first imports was lost once and the study ran to its end with exit status 0.
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
def stop_signals(clock: IterationClock) -> Iterator[None]:
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
