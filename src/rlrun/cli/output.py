"""What the command line prints: a result as text or JSON, and the lines that say where a run went and how
to continue it.

Paths, run folders, tasks and error messages may come from files (a run folder's name, a task read from
run.json): every line printed here has its control characters escaped (`rlrun.trust.text.terminal`), so a
name cannot move the cursor or rewrite the screen. JSON escapes them by itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlrun.errors import Failure, TrainingStopped, UserError
from rlrun.trust.text import terminal


def resume_hint(stop: TrainingStopped) -> str:
    """Where a stopped training's run is, and how to continue it (a bench: by running it again)."""
    if stop.bench is not None:
        where = "" if stop.run_dir is None else f"; the stopped cell's run is {relative(Path(str(stop.run_dir)))}"
        return (
            f"; bench {relative(Path(str(stop.bench)))}{where}; run the same rlrun bench command again to continue "
            "(finished cells are kept, the stopped one goes on from its checkpoint)"
        )
    if stop.run_dir is None:
        return ""
    run = Path(str(stop.run_dir))
    if stop.checkpoint is None:
        return f"; run {relative(run)} (no checkpoint was saved)"
    checkpoint = Path(str(stop.checkpoint))
    return (
        f"; run {relative(run)}, checkpoint {relative(checkpoint)}; continue it with the same "
        f"rlrun train command and --resume --load_run {terminal(run.name)} --checkpoint "
        f"{terminal(_inside(checkpoint, run))}"
    )


def _inside(path: Path, folder: Path) -> Path:
    """`path` relative to `folder` when it is inside it, else `path` itself."""
    try:
        return path.relative_to(folder)
    except ValueError:
        return path


def one_line(error: UserError | Failure) -> str:
    """A user error's (or a `Failure`'s) message on one line, whatever text (a library's reason, a path) it
    quotes, with its control characters escaped."""
    return terminal(" ".join(str(error).split()))


def render(result: Any, as_json: bool) -> str:
    return json_text(result) if as_json else "\n".join(terminal(line) for line in summary(result).split("\n"))


def summary(result: Any) -> str:
    from rlrun.api import ExportResult, TrainResult

    def number(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    if isinstance(result, TrainResult):
        returns = (
            f"mean return {number(result.mean_return)} over the last {min(result.episodes, 100)} episodes"
            if result.episodes
            else "no episode finished yet"
        )
        return (
            f"trained {result.library} on {result.task}: {result.iterations} iterations, "
            f"{result.env_steps:,} env steps in {result.wall_time_s:.1f} s ({result.steps_per_s:,.0f} steps/s), "
            f"{returns}\nrun: {relative(result.run_dir)}\ncheckpoint: {relative(result.checkpoint)}\n"
            + curves_line(result.run_dir)
        )
    if isinstance(result, ExportResult):
        lines = [f"exported the {result.library} policy of {relative(result.checkpoint)}:"]
        for path in result.files:
            error = result.max_abs_error.get(path.name)
            check = "not checked (install onnxruntime)" if error is None else f"max abs difference {error:.2e}"
            lines.append(f"  {relative(path)}  ({check} from the live policy)")
        return "\n".join(lines)
    who = f"with {result.library}" if result.checkpoint is not None else f"with the {result.library} agent"
    if not result.returns:
        return (
            f"no episode of {result.task} finished {who} within {result.env_steps:,} env steps; "
            "raise --max_steps (or drop it) to let episodes end"
        )
    played = (
        f"played {len(result.returns)} episodes of {result.task} {who}: "
        if result.checkpoint is not None
        else f"ran {len(result.returns)} episodes of {result.task} {who}: "
    )
    return (
        f"{played}mean return {number(result.mean_return)} ± {number(result.std_return)}, "
        f"mean length {number(result.mean_length)}"
        + (
            f"\ncheckpoint: {relative(result.checkpoint)}{saved_line(result.checkpoint_saved)}"
            if result.checkpoint is not None
            else ""
        )
    )


def saved_line(entry: dict[str, Any] | None) -> str:
    """What the run recorded of a checkpoint when it saved it (what `--checkpoint best` chooses by)."""
    if not entry:
        return ""
    parts = [f"iteration {entry['iteration']}"] if isinstance(entry.get("iteration"), int) else []
    score = entry.get("mean_return")
    if isinstance(score, (int, float)) and not isinstance(score, bool) and score == score:
        parts.append(f"training mean return {score:.1f} when saved")
    return f" ({', '.join(parts)})" if parts else ""


def curves_line(run_dir: Path) -> str:
    """How to view a training's curves: TensorBoard on its library's folder (`<log_root>/<library>`), which
    shows this run beside the library's others; every run has the same `rlrun/*` scalars."""
    library_dir = run_dir.parent.parent
    this = terminal(_inside(run_dir, library_dir))
    return f"curves: tensorboard --logdir {relative(library_dir)}  (this run: {this})"


def relative(path: Path | None) -> str:
    """`path` relative to the working folder when it is under it, for printing (control characters escaped)."""
    if path is None:
        return "-"
    try:
        return terminal(path.relative_to(Path.cwd()))
    except ValueError:
        return terminal(path)


def json_text(result: Any) -> str:
    from rlrun.runs import jsonable

    return json.dumps(jsonable(result, limit=None), indent=2)
