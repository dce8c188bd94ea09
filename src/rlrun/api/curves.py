"""One set of TensorBoard curves for every library: the `rlrun/*` scalars of a training run.

Each library names its own scalars differently (`Train/mean_reward`, `rollout/ep_rew_mean`,
`rewards/step`, ...), so the runs of two libraries cannot be laid over each other. Every run
therefore also writes the same three scalars, against env steps, from rlrun's own episode
statistics: the rows `IterationClock` appends to `metrics.csv`, one point per iteration. They go to
an event file of their own in the run folder (`events.out.tfevents.*.rlrun`), beside the
library's, so TensorBoard shows them as the same run:

    tensorboard --logdir logs/rsl_rl     # one library's runs
    tensorboard --logdir logs            # every library's, the `rlrun/` section lays them over each other
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlrun.api.iterations import IterationRow

CURVE_IMPORTS = ("torch.utils.tensorboard",)
"""What the writer imports (tensorboard, protobuf): imported in the plan phase, before the capture."""

CURVES = {"rlrun/mean_return": "mean_return", "rlrun/mean_length": "mean_length", "rlrun/steps_per_s": "steps_per_s"}
"""Scalar tag -> the `IterationRow` field it plots; the x axis is the row's `env_steps`."""

FLUSH_INTERVAL_S = 1.0
"""The event file is flushed at most this often while the run goes (and when it closes)."""

FILE_SUFFIX = ".rlrun"
"""Ends the name of rlrun's event file, to tell it from the library's own in the same folder."""


class Curves:
    """The `rlrun/*` scalars of one run, written as its iterations end.

    The writer's thread starts in `open` and is joined by `close`, which the training calls in `finally`:
    no thread outlives the call.
    """

    def __init__(self) -> None:
        self._writer: Any = None
        self._next_flush = 0.0

    def open(self, run_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(log_dir=str(run_dir), filename_suffix=FILE_SUFFIX)

    def add(self, row: IterationRow) -> None:
        """Plot `row` at its env steps (a field that is None, like the return before any episode ended, is left out)."""
        if self._writer is None:
            return
        for tag, name in CURVES.items():
            value = getattr(row, name)
            if value is not None:
                self._writer.add_scalar(tag, value, global_step=row.env_steps)
        now = time.monotonic()
        if now >= self._next_flush:  # a killed run keeps its curve up to the last second (metrics.csv, every row)
            self._next_flush = now + FLUSH_INTERVAL_S
            self._writer.flush()  # waits for the writer's thread: about 0.2 ms, too much for every short iteration

    def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()
