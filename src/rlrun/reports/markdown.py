"""report.md: one table per task (run, seeds, final and eval return IQM [CI], median steps/s, time and env
steps to the reward threshold, failures), the failed and skipped cells, and the figures with their captions.

Every string from results.jsonl (a task, a run label, an error, a note) and every title or caption that quotes
one is escaped (`rlrun.trust.text`): the report shows it, and no HTML, link or image in it is rendered."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from rlrun.reports.aggregate import Estimate, RunSummary, TaskSummary
from rlrun.reports.plots import Plot
from rlrun.reports.profile import Profile
from rlrun.reports.results import Results
from rlrun.trust import text as safe

COLUMNS = (
    "run",
    "seeds",
    "env steps",
    "iterations",
    "final return IQM [95% CI]",
    "eval return IQM [95% CI]",
    "median steps/s",
    "time to threshold",
    "env steps to threshold",
    "failures",
    "configuration",
)
NONE = "—"
FEW_SEEDS = 5


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


def fmt_span(values: Sequence[int]) -> str:
    """`20,480` when every seed has the same count, else `20,480 to 24,576` (min to max over seeds)."""
    if not values:
        return NONE
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,} to {high:,}"


def run_row(run: RunSummary) -> list[str]:
    """The table row of one run, in `COLUMNS` order."""
    return [
        cell_text(run.run),
        str(len(run.seeds)),
        fmt_span(run.env_steps),
        fmt_span(run.iterations),
        fmt_estimate(run.final_return),
        fmt_estimate(run.eval_return),
        fmt_rate(run.median_steps_per_s),
        _to_threshold(run, run.median_time_to_threshold_s, "s"),
        _to_threshold(run, run.median_steps_to_threshold, "steps"),
        str(run.failures),
        cell_text("; ".join(run.configs)) if run.configs else NONE,
    ]


def _steps_list(values: Sequence[int]) -> str:
    distinct = sorted(set(values))
    words = [f"{v:,}" for v in distinct]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def budget_line(runs: Sequence[RunSummary]) -> str | None:
    """Whether the runs of a task got the same env steps: equal within one iteration (the largest iteration of
    any run), or a line naming what each run got. None without two runs that have env steps."""
    counted = [r for r in runs if r.env_steps]
    if not counted:
        return None
    every = [v for r in counted for v in r.env_steps]
    spread = max(every) - min(every)
    sizes = [r.steps_per_iteration for r in counted]
    iteration = max((s for s in sizes if s is not None), default=None)
    if spread == 0:
        return f"Env-step budget: every seed of every run trained {every[0]:,} env steps."
    got = "; ".join(f"{cell_text(r.run)} got {_steps_list(r.env_steps)}" for r in counted)
    if iteration is not None and None not in sizes and spread <= iteration:
        return (
            f"Env-step budgets equal within one iteration: {got} env steps (the largest iteration here is "
            f"{iteration:,} env steps; each library stops at a whole iteration)."
        )
    return (
        f"Env-step budgets differ by more than one iteration: {got} env steps. Compare the returns with this in mind."
    )


def seeds_warning(runs: Sequence[RunSummary]) -> str | None:
    """A warning when a run has fewer than `FEW_SEEDS` completed seeds: what its IQM and "95% CI" then are."""
    few = [r for r in runs if 0 < len(r.seeds) < FEW_SEEDS]
    if not few:
        return None
    counts = ", ".join(f"{cell_text(r.run)} {len(r.seeds)}" for r in few)
    sizes = {len(r.seeds) for r in few}
    text = f"**Warning: fewer than {FEW_SEEDS} seeds** ({counts})."
    if sizes & {2, 3}:
        text += (
            ' With 2 or 3 seeds the IQM trims nothing and is the plain mean of the seeds, and the "95% CI" is the '
            "[min, max] of the seeds (a bootstrap of 2 or 3 values draws all-min and all-max resamples more often "
            "than 2.5% of the time), not a confidence interval."
        )
    if 4 in sizes:
        text += " With 4 seeds the IQM is the mean of the middle two and the interval comes from 35 distinct resamples."
    if 1 in sizes:
        text += " With 1 seed there is no interval: the value is that seed's."
    text += f" Run {FEW_SEEDS} or more seeds (--seeds 0-{FEW_SEEDS - 1}) before reading the intervals as uncertainty."
    return text


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


def profile_text(profile: Profile) -> str:
    """What the profile's scale is, with the sources of the reference scores it uses."""
    refs = profile.references or {}
    if not refs:
        return (
            "Scores are field-relative (each task's min and max over this bench's runs and seeds map to 0 and 1): "
            "they rank the runs here and say nothing of how good any run is."
        )
    scale = (
        "human-normalised (0 = random, 1 = human)" if profile.human else "normalised: 0 = random play, 1 = reference"
    )
    rows = [f"{safe.markdown(task)} {ref.random:g} / {ref.reference:g} ({ref.kind})" for task, ref in refs.items()]
    text = f"Scores are {scale}; per task, random / reference: " + "; ".join(rows) + "."
    sources = dict.fromkeys(safe.markdown(s) for ref in refs.values() for s in (ref.source, ref.random_source))
    text += " Sources: " + " ".join(sources)
    if profile.field_tasks:
        text += (
            " Without a reference in rlrun's table, field-relative (the bench's min = 0, max = 1): "
            + ", ".join(safe.markdown(t) for t in profile.field_tasks)
            + "."
        )
    return text


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
        "threshold: median over the seeds that reached the task's reward threshold (reached/completed in brackets). "
        "Env steps and iterations: what each completed seed trained (min to max over seeds); configuration: where "
        "the agent configuration came from (rlrun's tuned file, RL Zoo's entry, a user's file; unknown when the run "
        "does not say), before the bench's overrides.",
    ]
    by_stem = {plot.stem: plot for plot in plots}
    for task in tasks:
        lines += ["", f"## {safe.markdown(task.task)}", ""]
        if task.threshold is not None:
            lines += [f"Reward threshold: {task.threshold:g}.", ""]
        shown = [r for r in task.runs if r.seeds or r.failed]
        if shown:
            lines += table(COLUMNS, [run_row(r) for r in shown])
            below = [budget_line(shown), seeds_warning(shown)]
            lines += [line for note in below if note for line in ("", note)]
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
        lines += [profile_text(profile), ""]
        lines += _figure(by_stem["performance_profile"], out_dir)
    else:
        lines.append("Needs final returns on two or more tasks.")
    return "\n".join(lines) + "\n"
