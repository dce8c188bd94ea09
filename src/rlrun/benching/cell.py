"""A bench cell: one training (and its evaluation) of a task by a run with a seed, as a result row.

`run_cell` is what every executor runs, in this process, in a pool worker or on a Ray node: a
module-level function of a picklable `Cell` that returns the cell's row and never raises for the
cell's own failures (a failed training is a `failed` row with its one-line error). The same cell
gives the same row (but for times) wherever it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlrun import api
from rlrun.api.requests import TrainRequest
from rlrun.benching.stored import Uploads, fetch
from rlrun.errors import TrainingStopped, UserError
from rlrun.runs import read_manifest
from rlrun.runs.metrics import IterationRow
from rlrun.runs.transfer import unpack_home
from rlrun.signals import inner
from rlrun.sweep import evaluation, one_line
from rlrun.trust.archive import MAX_ARCHIVE_BYTES, pack_folder

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
    "config_source",
    "attempts",
    "stored",
)
"""The columns of `results.jsonl`, one row per cell. `node_id` and `host` say where the cell ran: the Ray node's id
(None inline and in the process pool) and the machine's host name. `config_source`: where the cell's agent
configuration came from (`TrainResult.agent_config` less the params hashes), for the report's column. `attempts`:
how many times the cell ran in this bench (more than 1 after `--retries`; the note says why). `stored`: the URL of
the copy of the run folder in `--storage` (None without it)."""

RUN_ARCHIVE = "run_archive"
"""The key of a row that carries its run folder back from another node (never written to `results.jsonl`)."""

MAX_RUN_BYTES = MAX_ARCHIVE_BYTES
"""The most file bytes (256 MiB) a cell on another Ray node sends back as its run folder; a larger folder fails
the cell with the reason (write runs to a disk every node shares instead)."""


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
    resume: dict[str, Any] | None = None
    """The row this cell's earlier training left when Ctrl-C or SIGTERM stopped it (`STOPPED`): the cell goes on
    from that row's checkpoint for the iterations left, and its row counts both parts."""
    attempt: int = 1
    """Which run of the cell this is: 1, then one more for each retry of a failed attempt (`--retries`)."""
    failures: tuple[str, ...] = ()
    """The errors of the failed attempts before this one."""
    storage: str | None = None
    """Where the cell uploads its run folder when it ends (`--storage`), or None."""

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
            attempts=self.attempt,
            note=_note(self),
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
    uploads = None
    if cell.storage is not None:
        uploads = Uploads(cell.storage, Path(cell.request.log_root), experiment_parts(cell), cell.key)
    row = _train(cell, listener, uploads)
    row.update(node_id=place.node_id, host=place.host)
    if uploads is not None and row["run_dir"] is not None:
        try:
            row["stored"] = uploads.finish(row["run_dir"])
        except Exception as error:  # a filesystem's own errors (botocore's, ...) are not all OSErrors
            row.update(status="failed", error=f"uploading the run folder to --storage: {one_line(error)}")
    elif place.away and row["run_dir"] is not None:
        try:
            row[RUN_ARCHIVE] = pack_folder(row["run_dir"], MAX_RUN_BYTES)
        except (UserError, OSError) as error:
            row.update(status="failed", error=f"sending the run folder back: {one_line(error)}")
    return row


def experiment_parts(cell: Cell) -> tuple[str, str]:
    """The folder of the cell's run folders below its log root: `(<library>, <experiment>)`."""
    return str(cell.request.library), str(cell.request.experiment)


def _relative(run_dir: str, cell: Cell) -> tuple[str, ...]:
    """The parts of `run_dir` below the cell's log root (`<library>/<experiment>/<run>`)."""
    return Path(str(run_dir)).relative_to(cell.request.log_root).parts


def receive_run(row: dict[str, Any], cell: Cell, log_root: Path) -> dict[str, Any]:
    """`row` with the run folder it carries (a cell that ran on another node, see `run_cell`), or the one it
    uploaded to `--storage`, written into `log_root` (the driver's) at the same path relative to it as on that
    node, or beside it with a suffix when a run started in the same second here holds that name
    (`rlrun.runs.transfer`); `run_dir` and `checkpoint` name the driver's copy. A row without a folder is returned
    as it is; one whose folder is refused is failed with the reason. A folder already there with the same
    `run.json` is that run (it ran here, or on a disk the node and the driver share): it is kept."""
    row = dict(row)
    data = row.pop(RUN_ARCHIVE, None)
    stored = isinstance(row.get("stored"), str) and cell.storage is not None and row["run_dir"] is not None
    if not isinstance(data, bytes) and not stored:
        return row
    try:
        relative = _relative(str(row["run_dir"]), cell)
        if isinstance(data, bytes):
            what = f"the run folder sent back by {row['host']!r}"
            folder = unpack_home(data, log_root, relative, what, MAX_RUN_BYTES)
        else:
            assert cell.storage is not None
            folder = fetch(cell.storage, relative, log_root, f"the run folder {row['stored']}")
    except (UserError, OSError, ValueError) as error:
        return {**row, "status": "failed", "error": f"receiving the run folder: {one_line(error)}"}
    checkpoint = row.get("checkpoint")
    if checkpoint is not None:
        row["checkpoint"] = str(folder / Path(str(checkpoint)).relative_to(str(row["run_dir"])))
    row["run_dir"] = str(folder)
    return row


RESUME_REFUSED = "resuming from --storage: "
"""How the error of an attempt that refused its stored checkpoint begins; its retry starts over
(`rlrun.benching.retries.retry`) instead of trying that checkpoint again."""

STOPPED = ("interrupted", "terminated")
"""The statuses of a cell that a signal stopped; the bench stops there, and its next run resumes the cell."""


def _train(
    cell: Cell, listener: Callable[[Cell, IterationRow], None] | None, uploads: Uploads | None
) -> dict[str, Any]:
    reached: list[IterationRow] = []
    started = time.perf_counter()
    earlier = cell.resume
    request = cell.request
    if earlier is not None:
        try:
            checkpoint = _resume_from(cell, earlier)
        except (UserError, OSError, ValueError) as error:
            unresumed = dataclasses.replace(cell, resume=None)  # its note must not say it resumed
            return unresumed.row(status="failed", error=f"{RESUME_REFUSED}{one_line(error)}", wall_s=0.0)
        request = dataclasses.replace(
            request,
            resume=True,
            checkpoint=checkpoint,
            load_run=None,
            max_iterations=max(1, int(request.max_iterations or 1) - int(earlier["iterations"])),
        )

    def on_iteration(row: IterationRow) -> bool:
        if listener is not None:
            listener(cell, row)
        if uploads is not None:
            uploads.seen()
        threshold = cell.threshold
        if not reached and threshold is not None and row.mean_return is not None and row.mean_return >= threshold:
            reached.append(row)
        return cell.seconds is not None and time.perf_counter() - started >= cell.seconds

    if uploads is not None:
        uploads.begin()
    try:
        with inner():  # a stopped cell is the bench's to report
            result = api.train(request, on_iteration=on_iteration)
    except TrainingStopped as stop:
        if stop.reason in STOPPED:
            stop.row = _stopped_row(cell, stop, time.perf_counter() - started)
        raise
    except (UserError, Exception) as error:
        return cell.row(status="failed", error=one_line(error), wall_s=time.perf_counter() - started)
    before = earlier or {"env_steps": 0, "iterations": 0, "wall_s": 0.0}
    row = cell.row(
        status="completed",
        env_steps=before["env_steps"] + result.env_steps,
        iterations=before["iterations"] + (request.max_iterations if earlier else result.iterations),
        wall_s=before["wall_s"] + result.wall_time_s,
        steps_per_s=result.steps_per_s,
        final_return=_finite(result.mean_return),
        time_to_threshold_s=reached[0].wall_s if reached else None,
        steps_to_threshold=reached[0].env_steps if reached else None,
        run_dir=str(result.run_dir),
        config_source={key: value for key, value in result.agent_config.items() if key != "sha256"},
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


def _resume_from(cell: Cell, earlier: dict[str, Any]) -> str:
    """The checkpoint a retry goes on from: the one its failed attempt left here, or, when that attempt's node is
    out of reach (`stored` names the folder in `--storage`), the one it sent there, copied below the log root
    (`rlrun.benching.stored.fetch`), then loaded as every checkpoint is."""
    checkpoint = str(earlier["checkpoint"])
    stored = earlier.get("stored")
    if stored is None or cell.storage is None or Path(checkpoint).is_file():
        return checkpoint
    parts = tuple(str(part) for part in stored)
    folder = fetch(cell.storage, parts, Path(cell.request.log_root), f"the stored run folder {'/'.join(parts)!r}")
    return str(folder / Path(checkpoint).relative_to(str(earlier["run_dir"])))


def _note(cell: Cell) -> str | None:
    """Where the cell's training went on from, and what its failed attempts died of."""
    earlier = cell.resume
    parts = [] if earlier is None else [f"resumed from {earlier['run_dir']} at iteration {earlier['iterations']}"]
    if cell.failures:
        parts.append(f"attempt {cell.attempt}; the earlier failed: {' | '.join(cell.failures)}")
    return "; ".join(parts) or None


def _stopped_row(cell: Cell, stop: TrainingStopped, wall: float) -> dict[str, Any]:
    """The row of a cell that a signal stopped: its run folder and last checkpoint, with the iterations and env
    steps that checkpoint holds (its run.json entry), added to an earlier part's when the cell was resuming."""
    before = cell.resume or {"env_steps": 0, "wall_s": 0.0}
    entry: dict[str, Any] = {}
    if stop.run_dir is not None and stop.checkpoint is not None:
        manifest = read_manifest(Path(str(stop.run_dir))) or {}
        name = Path(str(stop.checkpoint)).relative_to(str(stop.run_dir)).as_posix()
        entry = next((item for item in manifest.get("checkpoints", ()) if item.get("file") == name), {})
    saved = isinstance(entry.get("iteration"), int) and isinstance(entry.get("env_steps"), int)
    return cell.row(
        status=stop.reason,
        error=f"{stop.reason}: rerun the bench to continue this cell from its checkpoint",
        wall_s=before["wall_s"] + wall,
        run_dir=None if stop.run_dir is None else str(stop.run_dir),
        checkpoint=str(stop.checkpoint) if saved else None,
        iterations=entry.get("iteration") if saved else None,
        env_steps=before["env_steps"] + entry["env_steps"] if saved else None,
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
