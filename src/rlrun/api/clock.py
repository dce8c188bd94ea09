"""What a training call does at every environment step, whatever the library: the iteration clock.

`IterationClock` is the `on_step` hook of rlrun's episode statistics. At every iteration boundary
(every `env_steps_per_iteration` env steps) it makes a row, the same columns for every library, asks the
caller's `on_iteration` whether to go on, and writes the row to the run's `metrics.csv` and as the run's
`rlrun/*` TensorBoard scalars (`rlrun.runs.metrics`): the first row at once, later ones at most once a
second (`WRITE_INTERVAL_S`), and every row when the training ends, however it ends. A killed run keeps
its rows up to the last second. At any step it raises `TrainingStopped` once a stop was
asked for: by `on_iteration`, or by a signal (`rlrun.signals`). The adapter saves a checkpoint as the
exception passes through it.
"""

from __future__ import annotations

import contextlib
import csv
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rlrun.errors import TrainingStopped
from rlrun.runs.metrics import METRICS_COLUMNS, METRICS_FILE, Curves, IterationRow, OnIteration

if TYPE_CHECKING:
    from rlrun.envs import EpisodeStatistics

PROGRESS_INTERVAL_S = 0.1
"""How often, at most, a step hands the progress display its figures."""

WRITE_INTERVAL_S = 1.0
"""How often, at most, the rows made since the last write go to `metrics.csv` and the curves while a training
runs: a row's csv line, flush and TensorBoard event cost far less written together than one at a time between
two steps of the library."""


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

    def __call__(self, stats: EpisodeStatistics) -> None:
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

    def _row(self, stats: EpisodeStatistics) -> IterationRow:
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
                self._write(self._file)
        return row

    def _write(self, file: TextIO) -> None:
        """Write the rows not yet written, to `metrics.csv` (`file`) and the curves, and flush both."""
        unwritten, self._unwritten = self._unwritten, []
        for row, wall_time in unwritten:
            self._writer.writerow(["" if value is None else value for value in vars(row).values()])
            self.curves.add(row, wall_time)
        file.flush()
        self.curves.flush()

    def close(self) -> None:
        try:
            if self._file is not None and self._unwritten:
                self._write(self._file)
        finally:
            try:
                self.curves.close()
            finally:
                if self._file is not None:
                    self._file.close()
                    self._file = None
