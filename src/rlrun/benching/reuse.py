"""What a bench run again takes from the rows its folder already holds: the completed cells it does not train
again (`reusable`), and the stopped cells it goes on with from their checkpoints (`resuming`).

`results.jsonl` is data, and a bench folder may be shared: a row is believed only as far as the run folder it
names vouches for it. A `completed` row is reused only when its run folder lies inside the bench's log root and
its run.json says that run, of that cell, completed with the row's return, env steps and checkpoint; else the
cell trains again, with a one-line warning that names the row and why. (A row's `eval_return` comes from
`rlrun.play`, which writes no run.json: it cannot be checked, and is believed with the rest of a row that is.)
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlrun.benching.cell import STOPPED, Cell
from rlrun.benching.planning import BenchPlan
from rlrun.runs import read_manifest
from rlrun.trust import paths
from rlrun.trust.limits import whole_number
from rlrun.trust.text import terminal


def reusable(row: Mapping[str, Any] | None, cell: Cell, plan: BenchPlan) -> bool:
    """Whether the earlier `row` of `cell` is a completed cell that this bench takes as it is (see the module
    docstring); a `completed` row that its run folder does not vouch for is refused with a warning."""
    if row is None or row.get("status") != "completed":
        return False
    problem = _unvouched(row, cell, plan.log_root)
    if problem is not None:
        note = (
            f"{plan.out / 'results.jsonl'}: the completed row of {cell.request.task} x {cell.run} x seed "
            f"{cell.request.seed} is not reused: {problem}; the cell trains again."
        )
        warnings.warn_explicit(terminal(note), UserWarning, "rlrun", 0)  # one line, no registry written
    return problem is None


def _unvouched(row: Mapping[str, Any], cell: Cell, log_root: Path) -> str | None:
    """Why the run folder that a completed `row` names does not vouch for it, or None when it does."""
    run_dir = row.get("run_dir")
    if not isinstance(run_dir, str) or not Path(run_dir).is_absolute():
        return "it names no run folder"
    folder = Path(run_dir)
    if not paths.is_inside(paths.real(folder), paths.real(log_root)):
        return f"its run folder {run_dir!r} lies outside the bench's log root"
    manifest = read_manifest(folder)
    if manifest is None:
        return f"its run folder {run_dir!r} holds no readable run.json"
    result = manifest.get("result")
    if manifest.get("run_name") != cell.key or manifest.get("status") != "completed" or not isinstance(result, dict):
        return f"the run.json in {run_dir!r} is not a completed training of this cell"
    mean = result.get("mean_return")
    final = mean if isinstance(mean, float) and math.isfinite(mean) else None
    if row.get("final_return") != final:
        return f"its final return {row.get('final_return')!r} is not its run's ({final!r})"
    steps, ran = row.get("env_steps"), result.get("env_steps")
    resumed = manifest.get("parent") is not None  # the row adds the parts before the run's own steps
    if not (whole_number(steps) and whole_number(ran) and (steps >= ran if resumed else steps == ran)):
        return f"its env steps {steps!r} are not its run's ({ran!r})"
    checkpoint, saved = row.get("checkpoint"), result.get("checkpoint")
    if (checkpoint is None) != (saved is None):
        return "its checkpoint is not its run's"
    if isinstance(checkpoint, str) and isinstance(saved, str) and isinstance(result.get("run_dir"), str):
        # compared inside the folder: a run that another Ray node sent home moved with its folder
        mine = Path(checkpoint).relative_to(folder) if Path(checkpoint).is_relative_to(folder) else None
        theirs = Path(saved).relative_to(result["run_dir"]) if Path(saved).is_relative_to(result["run_dir"]) else None
        if mine is None or mine != theirs or not (folder / mine).is_file():
            return f"its checkpoint {checkpoint!r} is not its run's"
    return None


def resuming(cell: Cell, row: Mapping[str, Any] | None, plan: BenchPlan) -> Cell:
    """`cell`, set to go on from its earlier row when a signal stopped it there (`STOPPED`) with a checkpoint inside
    the bench's log root and iterations to go; else the cell as planned (trained from the start). A row is data:
    its checkpoint is only a path to look at, read as every checkpoint is."""
    if plan.force or row is None or row.get("status") not in STOPPED or cell.seconds is not None:
        return cell
    checkpoint, iterations, env_steps = row.get("checkpoint"), row.get("iterations"), row.get("env_steps")
    if not (isinstance(checkpoint, str) and whole_number(iterations) and whole_number(env_steps)):
        return cell
    path = Path(checkpoint)
    inside = path.is_absolute() and paths.is_inside(paths.real(path), paths.real(plan.log_root)) and path.is_file()
    if not inside or not 0 < iterations < int(cell.request.max_iterations or 0):
        return cell
    spent = row.get("wall_s")
    wall = float(spent) if isinstance(spent, int | float) and math.isfinite(spent) and spent >= 0 else 0.0
    earlier = {"checkpoint": checkpoint, "iterations": iterations, "env_steps": env_steps, "wall_s": wall}
    return dataclasses.replace(cell, resume={**earlier, "run_dir": str(row.get("run_dir"))})
