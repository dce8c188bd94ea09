"""A study's outputs: `trials.csv`, the plots of `optuna.visualization.matplotlib` as PNG, and `report.md`.

    write_trials(out, study.get_trials())          # -> <out>/trials.csv
    write_report(out, study, "sqlite:///...")      # -> <out>/report.md and <out>/plots/*.png

Optuna draws through pyplot and sets its "ggplot" style sheet with `plt.style.use`, which changes matplotlib's
global rcParams. Each figure is therefore drawn inside `matplotlib.rc_context()` (rcParams put back after it),
saved with its own Agg canvas, and closed, so that the pyplot figure list and rcParams are left as the caller
had them. Parameter importances use fANOVA when scikit-learn is installed, else PED-ANOVA (Optuna's own, NumPy
only); either needs two or more completed trials, and the report says why a plot is missing.

Every string from the study (its name, the searched keys and values, a failed trial's error) is escaped in
report.md (`rlrun.trust.text`): a study from elsewhere cannot put HTML, a link or an image into it.

Layers: imports `rlrun.trust` only; Optuna and matplotlib are imported inside the functions (`HEAVY_MODULES`
lists what a caller imports first, so that their import effects are not a hermetic call's).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.trust import paths
from rlrun.trust import text as safe

TRIALS_FILE = "trials.csv"
REPORT_FILE = "report.md"
PLOTS_DIR = "plots"
HEAVY_MODULES = (
    "numpy",
    "optuna",
    "optuna.importance",
    "optuna.visualization.matplotlib",
    "matplotlib.pyplot",
    "matplotlib.backends.backend_agg",
    "rlrun.reports.fonts",
)
COLUMNS = ("number", "state", "value", "duration_s", "env_steps", "wall_s", "error", "interrupted", "run_dirs")
"""The columns of trials.csv, with one `param.<key>` column per searched key after `value`."""


@dataclass(frozen=True)
class Figure:
    """One plot of the report: its file, what it shows, or why it is missing."""

    stem: str
    title: str
    caption: str
    path: Path | None
    missing: str = ""


def trial_rows(trials: Sequence[Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The columns and rows of trials.csv for Optuna `FrozenTrial`s, in trial order."""
    keys = sorted({key for trial in trials for key in trial.params})
    columns = [*COLUMNS[:3], *(f"param.{key}" for key in keys), *COLUMNS[3:]]
    rows = []
    for trial in sorted(trials, key=lambda item: item.number):
        attrs = trial.user_attrs
        duration = trial.duration.total_seconds() if trial.duration is not None else None
        row: dict[str, Any] = {
            "number": trial.number,
            "state": trial.state.name,
            "value": trial.value if trial.state.name in ("COMPLETE", "PRUNED") else None,
            "duration_s": None if duration is None else round(duration, 3),
            "env_steps": attrs.get("env_steps"),
            "wall_s": attrs.get("wall_s"),
            "error": attrs.get("error"),
            "interrupted": attrs.get("interrupted"),
            "run_dirs": ";".join(attrs.get("run_dirs", ())),
        }
        if trial.state.name == "PRUNED" and trial.intermediate_values:
            row["value"] = trial.intermediate_values[max(trial.intermediate_values)]
        for key in keys:
            row[f"param.{key}"] = trial.params.get(key)
        rows.append(row)
    return columns, rows


def write_trials(out: Path, trials: Sequence[Any]) -> Path:
    """Write `<out>/trials.csv` whole and atomically (a temporary file, then replace)."""
    columns, rows = trial_rows(trials)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if value is None else value for key, value in row.items()})
    path = out / TRIALS_FILE
    _write(path, buffer.getvalue())
    return path


def _write(path: Path, text: str) -> None:
    """Replace `path` with `text` whole, never writing through a link that has its name (a shared folder's)."""
    paths.replace_file(path, text)


def make_figures(study: Any, plots_dir: Path) -> list[Figure]:
    """Draw and save the optimisation history, the parameter importances and the parallel coordinates."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    figures = []
    history = "Objective value of every completed trial (dots) and the best so far (line), by trial number."
    figures.append(_draw(study, plots_dir, "history", "Optimisation history", history, _history, minimum=1))
    evaluator_name, evaluator = _importance_evaluator()
    importance = (
        f"How much of the objective's variation each searched key explains ({evaluator_name}, over the "
        "completed trials); a guide to what to search next, not a proof."
    )
    figures.append(
        _draw(study, plots_dir, "importances", "Parameter importances", importance, _importances(evaluator), 2)
    )
    coordinates = (
        "Each completed trial as a line through its searched values, coloured by its objective value (darker: "
        "better for a maximised objective; the palest blue is the worst trial, never white)."
    )
    figures.append(
        _draw(study, plots_dir, "parallel_coordinates", "Parallel coordinates", coordinates, _parallel, minimum=1)
    )
    return figures


def _history(study: Any) -> Any:
    from optuna.visualization.matplotlib import plot_optimization_history

    return plot_optimization_history(study)


def _importances(evaluator: Any) -> Any:
    def draw(study: Any) -> Any:
        from optuna.visualization.matplotlib import plot_param_importances

        return plot_param_importances(study, evaluator=evaluator)

    return draw


CMAP_FLOOR = 0.4
"""The share of Optuna's "Blues" map cut from its light end for the parallel coordinates: that end is near-white,
which draws the worst trials white on white; from 0.4 on every line is a visible mid blue or darker."""


def _parallel(study: Any) -> Any:
    from optuna.visualization.matplotlib import plot_parallel_coordinate

    axes = plot_parallel_coordinate(study)
    floor_colormap(axes)
    return axes


def floor_colormap(axes: Any) -> None:
    """Give the trial lines of Optuna's parallel-coordinate axes a colormap with a floor (no near-white end) and a
    thicker line: the colour bar follows the lines' map, so it shows the same scale."""
    import numpy as np
    from matplotlib.collections import LineCollection
    from matplotlib.colors import ListedColormap

    for collection in axes.collections:
        if isinstance(collection, LineCollection) and collection.get_array() is not None:
            base = collection.get_cmap()
            light_low = sum(base(0.0)[:3]) > sum(base(1.0)[:3])  # "Blues" (maximise) or "Blues_r" (minimise)
            span = np.linspace(CMAP_FLOOR, 1.0, 256) if light_low else np.linspace(0.0, 1.0 - CMAP_FLOOR, 256)
            floored = ListedColormap(base(span), name=f"{base.name}_floored")
            collection.set_cmap(floored)
            collection.set_linewidth(1.6)


def _importance_evaluator() -> tuple[str, Any]:
    """fANOVA (Optuna's default) when scikit-learn is installed, else PED-ANOVA, which needs NumPy only."""
    import importlib.util

    import optuna

    if importlib.util.find_spec("sklearn") is not None:
        return "fANOVA", optuna.importance.FanovaImportanceEvaluator(seed=0)
    return "PED-ANOVA; scikit-learn is not installed for fANOVA", optuna.importance.PedAnovaImportanceEvaluator()


def _draw(study: Any, plots_dir: Path, stem: str, title: str, caption: str, draw: Any, minimum: int) -> Figure:
    """Draw one figure with Optuna inside an rcParams context, save it as PNG, close it; or say why not."""
    import warnings

    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from optuna.trial import TrialState

    path = plots_dir / f"{stem}.png"
    completed = sum(trial.state == TrialState.COMPLETE for trial in study.get_trials(deepcopy=False))
    if completed < minimum:
        path.unlink(missing_ok=True)
        return Figure(stem, title, caption, None, f"needs {minimum} or more completed trials ({completed} so far)")
    figure = None
    try:
        with matplotlib.rc_context(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's ExperimentalWarning for its matplotlib plots
            axes = draw(study)
            figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
            figure.set_size_inches(8, 5)
            FigureCanvasAgg(figure)
            image = io.BytesIO()
            figure.savefig(image, format="png", dpi=100, bbox_inches="tight")
            paths.replace_file(path, image.getvalue())
    except Exception as error:
        path.unlink(missing_ok=True)
        reason = " ".join(str(error).split()) or type(error).__name__
        return Figure(stem, title, caption, None, f"{type(error).__name__}: {reason}")
    finally:
        if figure is not None:
            plt.close(figure)
    return Figure(stem, title, caption, path)


def render(study: Any, storage: str, figures: Sequence[Figure], out: Path, best: Any = None) -> str:
    """report.md: the study's counts, the best trial, the top trials, the figures. `best` is the best trial as
    the tuner chose it (a study is a shared file: Optuna's own `best_trial` would take a trial written into it
    by hand); None: no best trial is named."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    states = {state: sum(trial.state == state for trial in trials) for state in TrialState}
    interrupted = sum(trial.state == TrialState.FAIL and "error" not in trial.user_attrs for trial in trials)
    lines = [f"# Study {safe.code(study.study_name)}", ""]
    lines.append(
        f"{len(trials)} trials: {states[TrialState.COMPLETE]} completed, {states[TrialState.PRUNED]} pruned, "
        f"{states[TrialState.FAIL] - interrupted} failed, {interrupted} interrupted (run again in their place), "
        f"{states[TrialState.RUNNING]} running. Objective: {study.direction.name.lower()}."
    )
    dashboard = safe.code(f"optuna-dashboard {_dashboard_target(storage, out)}")
    lines += ["", f"Storage: {safe.code(storage)}; browse it with {dashboard}.", ""]
    completed = [trial for trial in trials if trial.state == TrialState.COMPLETE]
    if best is not None:
        lines += [f"## Best trial: {best.number}, value {_number(best.value)}", ""]
        lines += [
            f"- {safe.code(key)} = {safe.code(json.dumps(value) if not isinstance(value, str) else value)}"
            for key, value in best.params.items()
        ]
        lines += ["", "Its complete agent configuration is `best.yaml`.", ""]
    finite = [trial for trial in completed if isinstance(trial.value, int | float) and math.isfinite(trial.value)]
    if finite:
        reverse = study.direction.name == "MAXIMIZE"
        ranked = sorted(finite, key=lambda trial: trial.value, reverse=reverse)[:10]
        keys = sorted({key for trial in ranked for key in trial.params})
        header = " | ".join(safe.code(key, table=True) for key in keys)
        lines += ["## Top trials", "", f"| trial | value | {header} |"]
        lines.append("|---:|---:|" + "---|" * len(keys))
        for trial in ranked:
            shown = " | ".join(_value(trial.params.get(key)) for key in keys)
            lines.append(f"| {trial.number} | {_number(trial.value)} | {shown} |")
        lines.append("")
    else:
        lines += ["No trial has completed yet, so there is no best trial and no `best.yaml`.", ""]
    failed = [trial for trial in trials if trial.state == TrialState.FAIL and "error" in trial.user_attrs]
    if failed:
        lines += ["## Failed trials", ""]
        lines += [f"- trial {trial.number}: {safe.markdown(trial.user_attrs['error'])}" for trial in failed]
        lines.append("")
    lines += ["## Figures", ""]
    for figure in figures:
        if figure.path is None:
            lines += [f"- {safe.markdown(figure.title)}: not drawn ({safe.markdown(figure.missing)}).", ""]
            continue
        relative = figure.path.relative_to(out).as_posix()
        title = safe.markdown(figure.title)
        lines += [f"### {title}", "", f"![{title}]({relative})", "", f"*{safe.markdown(figure.caption)}*", ""]
    return "\n".join(lines)


def _dashboard_target(storage: str, out: Path) -> str:
    prefix = "sqlite:///"
    if storage.startswith(prefix):
        path = Path(storage[len(prefix) :])
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return storage


def _number(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def _value(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else safe.code(value, table=True)


def write_report(out: Path, study: Any, storage: str, best: Any = None) -> Path:
    """Draw the figures into `<out>/plots/` and write `<out>/report.md` (atomically); return its path. `best`: as
    in `render`."""
    figures = make_figures(study, paths.output_folder(out, PLOTS_DIR))
    path = out / REPORT_FILE
    _write(path, render(study, storage, figures, out, best))
    return path


__all__ = ["HEAVY_MODULES", "TRIALS_FILE", "make_figures", "render", "trial_rows", "write_report", "write_trials"]
