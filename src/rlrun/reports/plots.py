"""The report's figures, drawn with matplotlib's object API only.

Each function returns a `Plot`: a `matplotlib.figure.Figure` with its own `FigureCanvasAgg` (never
pyplot, never `matplotlib.use`), so drawing leaves matplotlib's global state (backend, rcParams, the
pyplot figure list) as the caller had it. `save_plot` writes PNG and SVG. Every figure carries a
caption that says what it measures; the same caption goes under the image in report.md.
matplotlib is imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlrun.reports.aggregate import CurveBand, RunSummary, TaskSummary
from rlrun.reports.profile import Profile
from rlrun.trust import paths

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# matplotlib's "tab10" palette, fixed here so that a run has the same colour in every figure
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
FORMATS = ("png", "svg")
RETURN_LABEL = "mean training return (last 100 episodes)"
STEM = re.compile(r"curves_.+|(throughput|performance_profile)(_\d+)?")


@dataclass
class Plot:
    """A figure of the report: `stem` names its files, `title` heads it, `caption` says what it measures."""

    stem: str
    title: str
    caption: str
    figure: Figure
    task: str | None = None  # the task of a learning-curve figure
    files: tuple[Path, ...] = ()


def slug(text: str) -> str:
    """A file-name-safe form of a task id (`rlrun/CartPole-v1` -> `rlrun_CartPole-v1`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.") or "task"


def run_colors(runs: Sequence[str]) -> dict[str, str]:
    """A colour per run, in order, cycling through the palette."""
    return {run: PALETTE[i % len(PALETTE)] for i, run in enumerate(dict.fromkeys(runs))}


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _decorate(figure: Figure, title: str, caption: str) -> None:
    figure.suptitle(title, fontsize=12, fontweight="bold")
    width = int(figure.get_figwidth() * 13)  # characters of 8-point text that fit the figure's width
    figure.supxlabel("\n".join(textwrap.wrap(caption, width)), fontsize=8, color="#333333")


def _legend(figure: Figure) -> None:
    """One legend entry per label over all axes, outside the axes on the right."""
    entries: dict[str, Artist] = {}
    for axes in figure.axes:
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    if entries:
        figure.legend(
            list(entries.values()), list(entries), loc="outside right upper", fontsize=8, title="run", title_fontsize=8
        )


def _seed_span(counts: Sequence[int]) -> str:
    counts = sorted(set(counts))
    if not counts:
        return "0 seeds"
    if len(counts) == 1:
        return f"{counts[0]} seed{'s' if counts[0] != 1 else ''}"
    return f"{counts[0]}-{counts[-1]} seeds"


def _band(axes: Axes, band: CurveBand, color: str, label: str) -> None:
    if len(band.x) == 1:  # one grid point: the IQM as a point with its interval as an error bar, no band
        axes.plot(band.x, band.iqm, color=color, label=label, linestyle="none", marker="o")
        if band.n > 1:
            low, high = band.iqm[0] - band.low[0], band.high[0] - band.iqm[0]
            axes.errorbar(band.x, band.iqm, yerr=[[low], [high]], fmt="none", ecolor=color, capsize=3)
        return
    axes.plot(band.x, band.iqm, color=color, label=label, linewidth=1.8)
    if band.n > 1:
        axes.fill_between(band.x, band.low, band.high, color=color, alpha=0.2, linewidth=0)


def _seed_ends(axes: Axes, band: CurveBand, ends: Sequence[float], color: str) -> None:
    """A tick on the IQM line where each seed's training ended (a collection, not a line): after the first
    tick, some seeds' values are held, not measured."""
    import numpy as np

    if band.n < 2 or len(band.x) < 2 or len(set(ends)) < 2:
        return
    xs = [x for x in ends if band.x[0] <= x <= band.x[-1]]
    axes.scatter(xs, np.interp(xs, band.x, band.iqm), marker="|", s=120, color=color, linewidths=1.5, zorder=3)


def _count_formatter() -> Any:
    """Tick labels for counts that stay short: 50k, 1.5M."""
    from matplotlib.ticker import FuncFormatter

    def short(value: float, _: int) -> str:
        for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= size:
                return f"{value / size:g}{suffix}"
        return f"{value:g}"

    return FuncFormatter(short)


def _points(axes: Axes, run: RunSummary, index: int, color: str) -> None:
    """Each seed's only point (index 0: env steps, 1: wall seconds) as a marker: no line, no band."""
    xs = [point[index] for point in run.seed_points]
    ys = [point[2] for point in run.seed_points]
    axes.plot(xs, ys, color=color, label=run.run, linestyle="none", marker="o", markersize=6, alpha=0.85)


def learning_curve_plot(task: TaskSummary, colors: dict[str, str] | None = None) -> Plot:
    """Return against env steps (left) and against wall seconds (right): per run, the IQM line and its CI band.

    Each axes holds exactly one line per run that has a curve; the reward threshold, when the task has one,
    is a dashed horizontal rule (a collection, not a line)."""
    colors = colors or run_colors([r.run for r in task.runs])
    figure = _new_figure(12.0, 5.0)
    by_steps, by_wall = figure.subplots(1, 2)
    drawn = [r for r in task.runs if r.curve_steps is not None or r.curve_wall is not None or r.seed_points]
    for run in drawn:
        color = colors.get(run.run, PALETTE[0])
        if run.seed_points:
            _points(by_steps, run, 0, color)
            _points(by_wall, run, 1, color)
            continue
        if run.curve_steps is not None:
            _band(by_steps, run.curve_steps, color, run.run)
        if run.curve_wall is not None:
            _band(by_wall, run.curve_wall, color, run.run)
            _seed_ends(by_wall, run.curve_wall, run.wall_ends, color)
    by_steps.xaxis.set_major_formatter(_count_formatter())
    for axes, xlabel in ((by_steps, "env steps"), (by_wall, "wall time of training (s)")):
        axes.set_xlabel(xlabel)
        axes.set_ylabel(RETURN_LABEL)
        axes.grid(True, alpha=0.3)
        if task.threshold is not None:
            left, right = axes.get_xlim()
            axes.hlines(task.threshold, left, right, colors="#555555", linestyles="dashed", linewidth=1)
            axes.set_xlim(left, right)
    by_steps.set_title("return vs env steps", fontsize=10)
    by_wall.set_title("return vs wall time", fontsize=10)
    _legend(figure)
    missing = [r.run for r in task.runs if r not in drawn and r.seeds]
    banded = [r for r in drawn if not r.seed_points]
    caption = "Training end to end: mean return of the last 100 training episodes against env steps (left) and "
    caption += "against wall seconds of the whole training (right)"
    if banded:
        caption += (
            f"; line: IQM over seeds, band: 95% stratified-bootstrap CI (rliable) over "
            f"{_seed_span([r.curve_seeds for r in banded])}, each seed's curve interpolated onto a common grid. "
            "Left: over the env steps every seed of the run reached. Right: up to the slowest seed's end; a "
            "seed that finished sooner holds its last return from its end on (a step), so no seed is cut at "
            "the fastest one's time; a tick on the line marks where each seed ended."
        )
    else:
        caption += "."
    points = [r.run for r in drawn if r.seed_points]
    if points:
        caption += (
            f" Points: one per seed, where every seed logged a single return ({', '.join(points)}): too few "
            "points for a curve or a band."
        )
    if task.threshold is not None:
        caption += f" Dashed: the task's reward threshold ({task.threshold:g})."
    if missing:
        caption += f" No learning curve (no metrics.csv or no finished episode): {', '.join(missing)}."
    title = f"{task.task}: learning curves"
    _decorate(figure, title, caption)
    return Plot(stem=f"curves_{slug(task.task)}", title=title, caption=caption, figure=figure, task=task.task)


def throughput_plot(tasks: Sequence[TaskSummary], colors: dict[str, str] | None = None) -> Plot:
    """Median steps/s per run (bars), grouped by task: throughput of training end to end."""
    runs = list(dict.fromkeys(r.run for t in tasks for r in t.runs))
    colors = colors or run_colors(runs)
    figure = _new_figure(max(6.0, 1.2 + 1.6 * len(tasks) * max(1, len(runs)) ** 0.5), 4.8)
    axes = figure.subplots()
    width = 0.8 / max(1, len(runs))
    values = [r.median_steps_per_s for t in tasks for r in t.runs if r.median_steps_per_s]
    for j, run in enumerate(runs):
        xs, heights = [], []
        for i, task in enumerate(tasks):
            found = next((r for r in task.runs if r.run == run and r.median_steps_per_s), None)
            if found is not None and found.median_steps_per_s is not None:
                xs.append(i - 0.4 + width * (j + 0.5))
                heights.append(found.median_steps_per_s)
        if xs:
            bars = axes.bar(xs, heights, width=width * 0.95, color=colors[run], label=run)
            axes.bar_label(bars, labels=[f"{h:,.0f}" for h in heights], fontsize=7, padding=2)
    if values and max(values) / max(min(values), 1e-12) > 50:
        axes.set_yscale("log")
    axes.set_xticks(range(len(tasks)), [t.task for t in tasks], fontsize=9)
    axes.set_ylabel("env steps per second (median over seeds)")
    axes.grid(True, axis="y", alpha=0.3)
    _legend(figure)
    caption = (
        "Throughput, training end to end: env steps of the whole training divided by its wall time (env "
        "stepping, policy inference and learning updates together), median over the completed seeds of each run."
    )
    title = "Training throughput"
    _decorate(figure, title, caption)
    return Plot(stem="throughput", title=title, caption=caption, figure=figure)


def performance_profile_plot(profile: Profile, colors: dict[str, str] | None = None) -> Plot:
    """rliable performance profiles: per run, the fraction of (task, seed) scores above each tau, with CI bands."""
    colors = colors or run_colors(profile.runs)
    figure = _new_figure(8.5, 5.0)
    axes = figure.subplots()
    for run in profile.runs:
        color = colors.get(run, PALETTE[0])
        axes.plot(profile.taus, profile.fraction[run], color=color, label=run, linewidth=1.8)
        axes.fill_between(profile.taus, profile.low[run], profile.high[run], color=color, alpha=0.2, linewidth=0)
    axes.set_xlim(profile.taus[0], profile.taus[-1])
    axes.set_ylim(-0.02, 1.02)
    if profile.human:
        axes.set_xlabel(r"human-normalised final return $\tau$ (0 = random, 1 = human)")
    elif profile.references:
        axes.set_xlabel(r"normalised final return $\tau$ (0 = random, 1 = reference score)")
    else:
        axes.set_xlabel(r"field-relative final return $\tau$ (0 = worst, 1 = best in this bench)")
    if profile.references:
        # random play and the reference: dashed rules (a collection, not lines)
        axes.vlines([0.0, 1.0], 0.0, 1.0, transform=axes.get_xaxis_transform(), colors="#555555", linestyles="dashed")
    axes.set_ylabel(r"fraction of (task, seed) scores $> \tau$")
    axes.grid(True, alpha=0.3)
    _legend(figure)
    caption = (
        f"Performance profiles over {len(profile.tasks)} tasks ({', '.join(profile.tasks)}): the final training "
        "return (mean of the last 100 episodes, training end to end) of each seed, "
        + profile_scale(profile)
        + "; the fraction of (task, seed) scores above each threshold tau, with 95% stratified-bootstrap CI bands "
        f"(rliable), over {_seed_span(list(profile.seeds.values()))} completed on every task."
    )
    if profile.left_out:
        caption += f" Left out (no seed completed on every task): {', '.join(profile.left_out)}."
    title = "Performance profiles"
    _decorate(figure, title, caption)
    return Plot(stem="performance_profile", title=title, caption=caption, figure=figure)


def profile_scale(profile: Profile) -> str:
    """How the profile's scores are normalised, per task, as a clause of its caption."""
    refs = profile.references or {}
    if not refs:
        return (
            "normalised per task by the min and max over all runs and seeds of that task (field-relative: "
            "0 = worst, 1 = best of this bench, not a measure of how good a run is)"
        )
    parts = []
    kinds = {"human": "human score", "threshold": "Gymnasium reward threshold", "published": "published return"}
    for task, ref in refs.items():
        parts.append(f"{task}: {ref.random:g} to {ref.reference:g} ({kinds[ref.kind]})")
    text = "normalised per task by rlrun's reference table, random play = 0 and the reference = 1 (" + "; ".join(parts)
    text += ")"
    if profile.field_tasks:
        text += (
            f"; without a reference, field-relative (the bench's min = 0, max = 1): {', '.join(profile.field_tasks)}"
        )
    return text


def has_curves(task: TaskSummary) -> bool:
    """Whether any run of the task has a learning curve (or a point per seed) to draw."""
    return any(r.curve_steps is not None or r.curve_wall is not None or r.seed_points for r in task.runs)


def is_report_figure(path: Path) -> bool:
    """Whether `path` is a file `save_plot` writes (to clear a previous report's leftovers)."""
    return path.suffix.lstrip(".") in FORMATS and bool(STEM.fullmatch(path.stem))


def make_plots(tasks: Sequence[TaskSummary], profile: Profile | None) -> list[Plot]:
    """Every figure of the report: a learning-curve figure per task with a curve, the throughput chart (when a run
    has a steps/s), the performance profiles (when `profile` is not None)."""
    colors = run_colors([r.run for t in tasks for r in t.runs])
    plots = [learning_curve_plot(task, colors) for task in tasks if has_curves(task)]
    if any(r.median_steps_per_s for t in tasks for r in t.runs):
        plots.append(throughput_plot(tasks, colors))
    if profile is not None:
        plots.append(performance_profile_plot(profile, colors))
    return _unique(plots)


def _unique(plots: list[Plot]) -> list[Plot]:
    seen: dict[str, int] = {}
    for plot in plots:
        count = seen.get(plot.stem, 0)
        seen[plot.stem] = count + 1
        if count:
            plot.stem = f"{plot.stem}_{count + 1}"
    return plots


def save_plot(plot: Plot, directory: Path) -> tuple[Path, ...]:
    """Write the figure as `<directory>/<stem>.png` and `.svg` (created if need be, never through a link);
    return and record the paths."""
    import io

    directory = paths.output_folder(directory.parent, directory.name)
    files = []
    for fmt in FORMATS:
        path = directory / f"{plot.stem}.{fmt}"
        metadata = {"Date": None} if fmt == "svg" else None  # reproducible SVG bytes
        image = io.BytesIO()
        plot.figure.savefig(image, format=fmt, dpi=120, metadata=metadata)
        paths.replace_file(path, image.getvalue())
        files.append(path)
    plot.files = tuple(files)
    return plot.files
