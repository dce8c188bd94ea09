"""report.md: one table per task (run, seeds, final and eval return IQM [CI], median steps/s, time and env
steps to the reward threshold, failures), the failed and skipped cells, and the figures with their captions.

Every string from results.jsonl (a task, a run label, an error, a note) and every title or caption that quotes
one is escaped (`rlrun.trust.text`): the report shows it, and no HTML, link or image in it is rendered."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from rlrun.reports.aggregate import Estimate, Profile, RunSummary, TaskSummary
from rlrun.reports.plots import Plot
from rlrun.reports.results import Results
from rlrun.trust import text as safe

COLUMNS = (
    "run",
    "seeds",
    "final return IQM [95% CI]",
    "eval return IQM [95% CI]",
    "median steps/s",
    "time to threshold",
    "env steps to threshold",
    "failures",
)
NONE = "—"


def cell_text(text: object) -> str:
    """Text made safe for a Markdown table cell: one line, pipes, HTML, links and images escaped."""
    return safe.markdown(text, table=True)


def fmt_return(value: float) -> str:
    return f"{value:.2f}"


def fmt_estimate(estimate: Estimate | None) -> str:
    """`IQM [low, high]`; with one seed there is no interval: `value (1 seed)`."""
    if estimate is None:
        return NONE
    if estimate.n == 1:
        return f"{fmt_return(estimate.value)} (1 seed)"
    return f"{fmt_return(estimate.value)} [{fmt_return(estimate.low)}, {fmt_return(estimate.high)}]"


def fmt_rate(value: float | None) -> str:
    return NONE if value is None else f"{value:,.0f}"


def _to_threshold(run: RunSummary, value: float | None, unit: str) -> str:
    if run.threshold is None:
        return "no threshold"
    done = len(run.seeds)
    if not done:
        return NONE
    if value is None:
        return f"not reached (0/{done})"
    number = f"{value:.1f} s" if unit == "s" else f"{value:,.0f}"
    return f"{number} ({run.reached}/{done})"


def run_row(run: RunSummary) -> list[str]:
    """The table row of one run, in `COLUMNS` order."""
    return [
        cell_text(run.run),
        str(len(run.seeds)),
        fmt_estimate(run.final_return),
        fmt_estimate(run.eval_return),
        fmt_rate(run.median_steps_per_s),
        _to_threshold(run, run.median_time_to_threshold_s, "s"),
        _to_threshold(run, run.median_steps_to_threshold, "steps"),
        str(run.failures),
    ]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _figure(plot: Plot, out_dir: Path) -> list[str]:
    if not plot.files:
        return []
    links = {path.suffix.lstrip("."): Path(os.path.relpath(path, out_dir)).as_posix() for path in plot.files}
    lines = []
    if "png" in links:
        lines.append(f"![{safe.markdown(plot.title)}]({_link(links['png'])})")
        lines.append("")
    others = ", ".join(f"[{safe.markdown(fmt.upper())}]({_link(link)})" for fmt, link in links.items())
    lines.append(f"*{safe.markdown(plot.caption)}* ({others})")
    return lines


def _link(target: str) -> str:
    """A relative link to a figure file rlrun wrote, as a link destination: in angle brackets when it holds
    anything but the characters of a plain file path."""
    if re.fullmatch(r"[A-Za-z0-9._/-]+", target):
        return target
    return "<" + re.sub(r"([<>\\])", r"\\\1", target) + ">"


def _seeds(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in sorted(values))


def render(
    results: Results,
    tasks: Sequence[TaskSummary],
    plots: Sequence[Plot],
    profile: Profile | None,
    *,
    out_dir: Path,
    reps: int,
    seed: int,
) -> str:
    """The text of report.md (figures linked relative to `out_dir`)."""
    cells = results.cells
    count = {status: sum(1 for c in cells if c.status == status) for status in ("completed", "failed", "skipped")}
    runs = dict.fromkeys(c.run for c in cells)
    lines = [
        "# Bench report",
        "",
        f"From {safe.code(results.path.name)}: {len(cells)} cells over {len(tasks)} task{'s' * (len(tasks) != 1)} and "
        f"{len(runs)} run{'s' * (len(runs) != 1)}: {count['completed']} completed, {count['failed']} failed, "
        f"{count['skipped']} skipped.",
    ]
    if results.unreadable_lines:
        numbers = ", ".join(str(n) for n in results.unreadable_lines)
        lines += ["", f"Unreadable lines skipped (a torn last line is a bench stopped mid-write): {numbers}."]
    lines += [
        "",
        "Final return: the mean training return of the last 100 episodes at the end of training (training end to "
        "end); eval return: the mean return of the deterministic evaluation episodes after training. Both are "
        "aggregated over the completed seeds as the interquartile mean (IQM, 25% trimmed mean) with a 95% "
        f"stratified-bootstrap percentile confidence interval (rliable, {reps:,} resamples, bootstrap seed {seed}). "
        "Steps/s: env steps of the whole training over its wall time, median over seeds. Time and env steps to "
        "threshold: median over the seeds that reached the task's reward threshold (reached/completed in brackets).",
    ]
    by_stem = {plot.stem: plot for plot in plots}
    for task in tasks:
        lines += ["", f"## {safe.markdown(task.task)}", ""]
        if task.threshold is not None:
            lines += [f"Reward threshold: {task.threshold:g}.", ""]
        shown = [r for r in task.runs if r.seeds or r.failed]
        if shown:
            lines += table(COLUMNS, [run_row(r) for r in shown])
        else:
            lines.append("No completed or failed cell.")
        failed = [c for r in task.runs for c in r.failed]
        if failed:
            lines += ["", "Failed cells:", ""]
            lines += table(
                ("run", "seed", "error"), [[cell_text(c.run), str(c.seed), cell_text(c.error or "")] for c in failed]
            )
        skipped = [r for r in task.runs if r.skipped]
        if skipped:
            lines += ["", "Skipped cells:", ""]
            rows = []
            for run in skipped:
                notes = dict.fromkeys(c.note or "" for c in run.skipped)
                for note in notes:
                    seeds = [c.seed for c in run.skipped if (c.note or "") == note]
                    rows.append([cell_text(run.run), _seeds(seeds), cell_text(note or NONE)])
            lines += table(("run", "seeds", "note"), rows)
        curves = next((p for p in plots if p.task == task.task), None)
        if curves is not None:
            lines += ["", *_figure(curves, out_dir)]
        elif shown:
            lines += ["", "No learning curve: no run directory holds a metrics.csv with a finished episode."]
    if "throughput" in by_stem:
        lines += ["", "## Throughput", "", *_figure(by_stem["throughput"], out_dir)]
    lines += ["", "## Performance profiles", ""]
    if profile is not None and "performance_profile" in by_stem:
        lines += _figure(by_stem["performance_profile"], out_dir)
    else:
        lines.append("Needs final returns on two or more tasks.")
    return "\n".join(lines) + "\n"
