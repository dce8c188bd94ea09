"""The bench report: `write_report(out_dir)` turns `<out>/results.jsonl` into `<out>/report.md` and `<out>/plots/`.

The aggregates, figures and Markdown come from `aggregate`, `plots` and `markdown`; this module finds the
results, writes the files and removes a previous report's figures that this one no longer has.
`HEAVY_MODULES` lists what a report imports, so that a caller can import it first (`preload`) and keep those
import effects out of a hermetic call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlrun.errors import InvalidArgument
from rlrun.reports.results import RESULTS_FILE, read_results
from rlrun.trust import paths

REPORT_FILE = "report.md"
PLOTS_DIR = "plots"
HEAVY_MODULES = (
    "numpy",
    "scipy.stats",
    "rliable.library",
    "rliable.metrics",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "matplotlib.backends.backend_svg",
    "rlrun.reports.fonts",
)


def preload() -> None:
    """Import what a report needs (NumPy, SciPy, rliable with arch and statsmodels, matplotlib's Agg and SVG
    backends) now, so that their import effects (statsmodels adds `warnings.filters` entries) happen here
    and not inside a later `write_report`, for a caller that compares global state around that call."""
    import importlib

    for name in HEAVY_MODULES:
        importlib.import_module(name)


def results_path(out_dir: Path | str) -> Path:
    """`<out_dir>/results.jsonl`; `InvalidArgument` (one line: the path and the fix) when it is not there."""
    path = Path(out_dir) / RESULTS_FILE
    try:
        found = path.is_file()
    except (OSError, ValueError) as error:  # a name too long for the filesystem, a NUL byte
        raise InvalidArgument(
            f"the folder {str(out_dir)[:80]!r} cannot be a path here ({error}); pass a bench's --out."
        ) from None
    if not found:
        raise InvalidArgument(
            f"no {RESULTS_FILE} in {str(out_dir)!r}: pass the --out folder of a bench (`rlrun bench ... --out "
            f"{out_dir}` writes it)."
        )
    return path


def write_report(
    out_dir: Path | str,
    *,
    reps: int = 10_000,
    curve_reps: int = 2_000,
    seed: int = 0,
    normalisation: str = "reference",
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write `<out_dir>/report.md` and the figures in `<out_dir>/plots/` (PNG and SVG) from `results.jsonl`.

    `reps`: bootstrap resamples for the final and eval return CIs; `curve_reps`: for learning-curve bands and
    performance profiles; `seed`: the bootstrap's seed (the same seed gives the same intervals);
    `normalisation`: the performance profile's scale, `reference` (random = 0, the task's reference score = 1,
    from rlrun's reference table) or `field` (the bench's own min and max per task; `rlrun.reports.profile`).
    `progress(text)` hears each step as it starts (the command line prints them). Returns the report's path.
    Raises `InvalidArgument` when `out_dir` holds no results.jsonl."""
    from rlrun.reports import aggregate, markdown, plots
    from rlrun.reports import profile as profiles

    say = progress or (lambda text: None)
    normalisation = profiles.check_normalisation(normalisation)
    out_dir = Path(out_dir)
    results = read_results(results_path(out_dir))
    cells, count = len(results.cells), len({cell.task for cell in results.cells})
    say(f"{_many(cells, 'cell')} over {_many(count, 'task')}: interquartile means, {reps:,} bootstrap resamples")
    tasks = aggregate.summarize(results.cells, reps=reps, curve_reps=curve_reps, seed=seed)
    say(f"performance profiles ({normalisation} scores, {curve_reps:,} resamples)")
    profile = profiles.performance_profile(results.cells, reps=curve_reps, seed=seed, normalisation=normalisation)
    figures = plots.make_plots(tasks, profile)
    plots_dir = paths.output_folder(out_dir, PLOTS_DIR)  # a real folder, never a link
    say(f"drawing {_many(len(figures), 'figure')} into {plots_dir} (PNG and SVG)")
    written = {path for figure in figures for path in plots.save_plot(figure, plots_dir)}
    if plots_dir.is_dir():  # a previous report's figures that this one does not have (a task gone, ...)
        for stale in plots_dir.iterdir():
            if stale not in written and stale.is_file() and plots.is_report_figure(stale):
                stale.unlink()
    text = markdown.render(results, tasks, figures, profile, out_dir=out_dir, reps=reps, seed=seed)
    report = out_dir / REPORT_FILE
    paths.replace_file(report, text)  # never through a link that has its name
    return report


def _many(count: int, thing: str) -> str:
    return f"{count} {thing}{'' if count == 1 else 's'}"
