"""A bench cell: one training (and its evaluation) of a task by a run with a seed, as a result row.

`run_cell` is what every executor runs, in this process, in a pool worker or on a Ray node: a
module-level function of a picklable `Cell` that returns the cell's row and never raises for the
cell's own failures (a failed training is a `failed` row with its one-line error). The same cell
gives the same row (but for times) wherever it runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from rlrun import api
from rlrun.api.metrics import IterationRow
from rlrun.api.requests import TrainRequest
from rlrun.errors import UserError
from rlrun.sweep import evaluation, one_line

ROW_FIELDS = (
    "key",
    "task",
    "library",
    "algorithm",
    "ml_framework",
    "variant",
    "run",
    "seed",
    "status",
    "error",
    "env_steps",
    "iterations",
    "wall_s",
    "steps_per_s",
    "final_return",
    "eval_return",
    "threshold",
    "time_to_threshold_s",
    "steps_to_threshold",
    "run_dir",
    "checkpoint",
    "note",
    "node_id",
    "host",
)
"""The columns of `results.jsonl`, one row per cell. `node_id` and `host` say where the cell ran: the Ray node's id
(None inline and in the process pool) and the machine's host name."""


@dataclass(frozen=True)
class Cell:
    """One cell of a bench, fully resolved: the training request and what to do around it."""

    key: str
    """A digest of everything that decides the cell's outcome (`cell_key`): the resume key."""
    run: str
    """The run's label: `library/algorithm[/framework][variant]`."""
    variant: str
    request: TrainRequest
    eval_episodes: int
    seconds: float | None
    """A wall-clock budget: the training stops at the first iteration past it."""
    threshold: float | None
    """The task's reward threshold, for time and env steps to reach it."""

    def row(self, **fields: Any) -> dict[str, Any]:
        """This cell's result row with `fields` filled in (every column present)."""
        request = self.request
        row: dict[str, Any] = dict.fromkeys(ROW_FIELDS)
        row.update(
            key=self.key,
            task=request.task,
            library=request.library,
            algorithm=request.algorithm,
            ml_framework=request.ml_framework,
            variant=self.variant,
            run=self.run,
            seed=request.seed,
            threshold=self.threshold,
        )
        row.update(fields)
        return row


def cell_key(request: TrainRequest, eval_episodes: int, seconds: float | None) -> str:
    """16 hex digits of SHA-256 over the fully resolved request (log paths and argv aside)."""
    decisive = {
        name: value
        for name, value in asdict(request).items()
        if name not in ("log_root", "argv", "experiment", "run_name", "verbose")
    }
    decisive.update(eval_episodes=eval_episodes, seconds=seconds)
    text = json.dumps(decisive, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_cell(cell: Cell, listener: Callable[[Cell, IterationRow], None] | None = None) -> dict[str, Any]:
    """Train (and evaluate) one cell as hermetic calls in this process; return its row. `listener(cell, row)`
    hears every iteration (a progress display, in the process that runs the cell)."""
    from rlrun.executors import where

    place = where()
    row = _train(cell, listener)
    row.update(node_id=place.node_id, host=place.host)
    return row


def _train(cell: Cell, listener: Callable[[Cell, IterationRow], None] | None) -> dict[str, Any]:
    reached: list[IterationRow] = []
    started = time.perf_counter()

    def on_iteration(row: IterationRow) -> bool:
        if listener is not None:
            listener(cell, row)
        threshold = cell.threshold
        if not reached and threshold is not None and row.mean_return is not None and row.mean_return >= threshold:
            reached.append(row)
        return cell.seconds is not None and time.perf_counter() - started >= cell.seconds

    try:
        result = api.train(cell.request, on_iteration=on_iteration)
    except (UserError, Exception) as error:
        return cell.row(status="failed", error=one_line(error), wall_s=time.perf_counter() - started)
    row = cell.row(
        status="completed",
        env_steps=result.env_steps,
        iterations=result.iterations,
        wall_s=result.wall_time_s,
        steps_per_s=result.steps_per_s,
        final_return=_finite(result.mean_return),
        time_to_threshold_s=reached[0].wall_s if reached else None,
        steps_to_threshold=reached[0].env_steps if reached else None,
        run_dir=str(result.run_dir),
        checkpoint=None if result.checkpoint is None else str(result.checkpoint),
    )
    if cell.eval_episodes and result.checkpoint is not None:
        request = cell.request
        try:
            played = api.play(evaluation(request, result.checkpoint, cell.eval_episodes))
        except (UserError, Exception) as error:
            row.update(status="failed", error=f"evaluation: {one_line(error)}")
        else:
            row["eval_return"] = _finite(played.mean_return)
    return row


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
