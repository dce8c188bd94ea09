"""Running a failed bench cell again (`--retries N`): from the last checkpoint its failed attempt left, else from
where the attempt started.

A cell's run folders are named by its key (`<time>_<key>`, the cell's run name), so the folders a failed attempt
made are those with that name that were not there before it ran (`run_folders`, taken before each round). Only
what a folder's run.json lists is believed, and only a checkpoint file inside the bench's log root is taken; the
retry then loads it as every checkpoint is loaded (`rlrun.train` with `resume`).

A cell that failed on another node (or whose node is gone) left its folder out of the driver's reach. With
`--storage`, its checkpoints were sent there as the training listed them (`rlrun.benching.stored`): the retry goes
on from the newest one the storage holds, copied below the log root of whatever node runs it. Without, it runs
again from where it started.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlrun.benching.cell import RESUME_REFUSED, Cell, experiment_parts
from rlrun.benching.stored import last_stored_checkpoint, local_folders, resumable, stored_folders
from rlrun.runs import read_manifest
from rlrun.trust import paths

Before = tuple[set[str], set[str]]
"""The names of a cell's run folders under the log root, and in `--storage` (empty without it)."""


def run_folders(cell: Cell, log_root: Path) -> set[str]:
    """The names of the run folders that trainings of `cell` made under `log_root` so far."""
    return local_folders(log_root.joinpath(*experiment_parts(cell)), cell.key)


def folders_before(cell: Cell, log_root: Path) -> Before:
    """The names of `cell`'s run folders so far, here and in its `--storage` (taken before each round)."""
    stored = set() if cell.storage is None else stored_folders(cell.storage, experiment_parts(cell), cell.key)
    return run_folders(cell, log_root), stored


def retry(cell: Cell, row: Mapping[str, Any], log_root: Path, before: Before) -> Cell:
    """`cell`'s next attempt after the failed one whose row is `row`: set to go on from the newest checkpoint that
    the attempt saved in a run folder made since `before` (`folders_before`), here, else in `--storage`, or from
    where the attempt started (the cell's own `resume`, if any) when it saved none, or from the start when the
    attempt refused the checkpoint it was to go on from (`RESUME_REFUSED`). The attempt's wall time is added to
    the cell's."""
    earlier = cell.resume or {"env_steps": 0, "iterations": 0, "wall_s": 0.0}
    spent = row.get("wall_s")
    wall = float(earlier["wall_s"]) + (float(spent) if isinstance(spent, int | float) else 0.0)
    failures = (*cell.failures, str(row.get("error") or "failed"))
    found = None if cell.seconds is not None else _last_checkpoint(cell, log_root, before[0])
    stored = None
    if found is None and cell.seconds is None and cell.storage is not None:
        names = stored_folders(cell.storage, experiment_parts(cell), cell.key) - before[1]
        budget = int(cell.request.max_iterations or 0)
        stored = last_stored_checkpoint(cell.storage, experiment_parts(cell), names, budget)
    if stored is not None:
        parts, file, iteration, env_steps = stored
        folder = log_root.joinpath(*parts)
        resume = {
            "checkpoint": str(folder.joinpath(*file.split("/"))),
            "iterations": iteration,
            "env_steps": int(earlier["env_steps"]) + env_steps,
            "wall_s": wall,
            "run_dir": str(folder),
            "stored": list(parts),
        }
    elif found is not None:
        folder, checkpoint, iteration, env_steps = found
        resume = {
            "checkpoint": str(checkpoint),
            "iterations": iteration,
            "env_steps": int(earlier["env_steps"]) + env_steps,
            "wall_s": wall,
            "run_dir": str(folder),
        }
    elif cell.resume is not None and not str(row.get("error") or "").startswith(RESUME_REFUSED):
        resume = {**cell.resume, "wall_s": wall}
    else:
        resume = None
    return dataclasses.replace(cell, resume=resume, attempt=cell.attempt + 1, failures=failures)


def _last_checkpoint(cell: Cell, log_root: Path, before: set[str]) -> tuple[Path, Path, int, int] | None:
    """(run folder, checkpoint, iteration, env steps) of the newest checkpoint listed in a run folder of `cell`
    made since `before`, with iterations still to go; None when there is none."""
    base = log_root.joinpath(*experiment_parts(cell))
    home = paths.real(log_root)
    budget = int(cell.request.max_iterations or 0)
    for name in sorted(run_folders(cell, log_root) - before, reverse=True):  # names start with the time: newest first
        folder = base / name
        for file, iteration, env_steps in resumable(read_manifest(folder), budget):
            checkpoint = folder / file
            if checkpoint.is_file() and paths.is_inside(paths.real(checkpoint), home):
                return folder, checkpoint, iteration, env_steps
    return None
