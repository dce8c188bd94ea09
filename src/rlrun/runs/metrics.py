"""What a training records at every iteration, whatever the library: its row (`IterationRow`), the row's
`metrics.csv` columns, and the same rows as the run's `rlrun/*` TensorBoard scalars (`Curves`).

Each library names its own scalars differently (`Train/mean_reward`, `rollout/ep_rew_mean`,
`rewards/step`, ...), so the runs of two libraries cannot be laid over each other. Every run
therefore also writes the same three scalars, against env steps, from rlrun's own episode
statistics, one point per `metrics.csv` row. They go to an event file of their own in the run folder
(`events.out.tfevents.*.rlrun`), beside the library's, so TensorBoard shows them as the same run:

    tensorboard --logdir logs/rsl_rl     # one library's runs
    tensorboard --logdir logs            # every library's, the `rlrun/` section lays them over each other
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.csv"
METRICS_COLUMNS = ("iteration", "env_steps", "wall_s", "steps_per_s", "mean_return", "mean_length", "episodes")


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

CURVE_IMPORTS = (
    "torch.utils.tensorboard",
    "tensorboard.compat.proto.event_pb2",
    "tensorboard.compat.proto.summary_pb2",
    "tensorboard.summary.writer.record_writer",
)
"""What the writer imports (TensorBoard's event protos and record framing; torch's writer, which the libraries
use, imports the same): imported in the plan phase, before the capture."""

CURVES = {"rlrun/mean_return": "mean_return", "rlrun/mean_length": "mean_length", "rlrun/steps_per_s": "steps_per_s"}
"""Scalar tag -> the `IterationRow` field it plots; the x axis is the row's `env_steps`."""

FILE_SUFFIX = ".rlrun"
"""Ends the name of rlrun's event file, to tell it from the library's own in the same folder."""


class Curves:
    """The `rlrun/*` scalars of one run, one event per row (its three values), written when `IterationClock`
    writes its rows (at most once a second, see `rlrun.api.clock.WRITE_INTERVAL_S`).

    The events are framed and written in the caller's thread with TensorBoard's own `RecordWriter` and protos,
    which is what `SummaryWriter` does on a thread of its own, where it would compete with the training for the
    GIL. `add` writes into the file's buffer, `flush` to the file; `close` (in the training's `finally`) closes
    it.
    """

    def __init__(self) -> None:
        self._records: Any = None

    def open(self, run_dir: Path) -> None:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}{FILE_SUFFIX}"
        self._records = RecordWriter(open(run_dir / name, "xb"))  # noqa: SIM115 (closed by `close`)
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self._records.flush()

    def add(self, row: IterationRow, wall_time: float) -> None:
        """Plot `row` at its env steps, made at `wall_time` (a `time.time()`). A field that is None, like the return
        before any episode ended, is left out."""
        if self._records is None:
            return
        from tensorboard.compat.proto import event_pb2, summary_pb2

        values = [
            summary_pb2.Summary.Value(tag=tag, simple_value=value)
            for tag, name in CURVES.items()
            if (value := getattr(row, name)) is not None
        ]
        if values:
            summary = summary_pb2.Summary(value=values)
            self._write(event_pb2.Event(wall_time=wall_time, step=row.env_steps, summary=summary))

    def flush(self) -> None:
        if self._records is not None:
            self._records.flush()

    def close(self) -> None:
        if self._records is not None:
            records, self._records = self._records, None
            records.close()

    def _write(self, event: Any) -> None:
        self._records.write(event.SerializeToString())
