"""The bench report: `write_report(out_dir)` turns `<out>/results.jsonl` into `<out>/report.md` and `<out>/plots/`.

    from rlrun.reports import write_report
    report = write_report(Path("bench/classic"))   # -> bench/classic/report.md

Per task and run: final (and eval) return as IQM with a 95% stratified-bootstrap CI over seeds (rliable),
median steps/s, time and env steps to the reward threshold, failures; learning curves against env steps
and wall time with IQM and CI bands; a throughput chart; performance profiles with two or more tasks, normalised
by the reference scores rlrun ships (`references`) or field-relative.
A study's report is `rlrun.reports.tune`.

Layers: imports `rlrun.errors` only, no torch and no RL library. NumPy, SciPy, rliable and matplotlib
(the `bench` extra) are imported inside functions, so importing this package stays cheap. Figures are
drawn on `Figure` objects with their own Agg canvas: matplotlib's global backend and rcParams, and
NumPy's global random state, are left as the caller had them.
"""

from rlrun.reports.aggregate import (
    CurveBand,
    Estimate,
    RunSummary,
    TaskSummary,
    curve_band,
    iqm,
    iqm_ci,
    summarize,
)
from rlrun.reports.bench import HEAVY_MODULES, PLOTS_DIR, REPORT_FILE, preload, results_path, write_report
from rlrun.reports.profile import NORMALISATIONS, Profile, performance_profile
from rlrun.reports.references import Reference, Suite, reference, suite
from rlrun.reports.results import RESULTS_FILE, CellResult, Curve, Results, read_curve, read_results

__all__ = [
    "HEAVY_MODULES",
    "NORMALISATIONS",
    "PLOTS_DIR",
    "REPORT_FILE",
    "RESULTS_FILE",
    "CellResult",
    "Curve",
    "CurveBand",
    "Estimate",
    "Profile",
    "Reference",
    "Results",
    "RunSummary",
    "Suite",
    "TaskSummary",
    "curve_band",
    "iqm",
    "iqm_ci",
    "performance_profile",
    "preload",
    "read_curve",
    "read_results",
    "reference",
    "results_path",
    "suite",
    "summarize",
    "write_report",
]
