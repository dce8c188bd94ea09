"""Aggregates over seeds, the way the field asks (Agarwal et al., NeurIPS 2021, `rliable`).

Per task and run: the interquartile mean (IQM, the 25%-trimmed mean, `rliable.metrics.aggregate_iqm`) of
the final training return and of the eval return, each with a 95% stratified-bootstrap percentile
confidence interval over seeds (`rliable.library.get_interval_estimates`); the median steps/s; the median
time and env steps to the task's reward threshold over the seeds that reached it; the failures. Learning
curves are interpolated onto a common grid (env steps, and wall seconds) and aggregated the same way per
grid point. Performance profiles (`rliable.library.create_performance_profile`) compare runs over tasks.

rliable draws its bootstrap indices from NumPy's global random state; every estimate here seeds it with
`seed` and restores it after, so results are reproducible and the caller's global state is untouched.
NumPy, SciPy and rliable are imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlrun.reports.results import CellResult, Curve

if TYPE_CHECKING:
    import numpy as np

CONFIDENCE = 0.95
FINAL_REPS = 10_000
CURVE_REPS = 2_000
CURVE_POINTS = 100
PROFILE_TAUS = 101


@dataclass(frozen=True)
class Estimate:
    """A point estimate over `n` seeds with its confidence interval [low, high] (low == high == value for n == 1)."""

    value: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class CurveBand:
    """An aggregate learning curve: IQM and CI per grid point, over `n` seeds."""

    x: tuple[float, ...]
    iqm: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    n: int


@dataclass(frozen=True)
class RunSummary:
    """One run (library/algorithm[variant]) on one task, over its seeds."""

    task: str
    run: str
    seeds: tuple[int, ...]  # the completed seeds
    final_return: Estimate | None
    eval_return: Estimate | None
    median_steps_per_s: float | None
    threshold: float | None
    reached: int  # completed seeds that reached the threshold
    median_time_to_threshold_s: float | None
    median_steps_to_threshold: float | None
    failed: tuple[CellResult, ...]
    skipped: tuple[CellResult, ...]
    curve_steps: CurveBand | None  # return against env steps
    curve_wall: CurveBand | None  # return against wall seconds
    curve_seeds: int  # completed seeds with a learning curve

    @property
    def failures(self) -> int:
        return len(self.failed)


@dataclass(frozen=True)
class TaskSummary:
    """Every run of one task, in the order they first appear in the results."""

    task: str
    threshold: float | None
    runs: tuple[RunSummary, ...]


@dataclass(frozen=True)
class Profile:
    """Performance profiles: for each run, the fraction of (task, seed) scores above each tau, with CI bands.

    Scores are final returns normalised per task to [0, 1] by the min and max over all runs and seeds."""

    taus: tuple[float, ...]
    runs: tuple[str, ...]
    fraction: dict[str, tuple[float, ...]]
    low: dict[str, tuple[float, ...]]
    high: dict[str, tuple[float, ...]]
    tasks: tuple[str, ...]
    seeds: dict[str, int]  # seeds per run that every task has
    left_out: tuple[str, ...]  # runs without a final return on some task


@contextmanager
def seeded_numpy(seed: int) -> Iterator[None]:
    """Seed NumPy's global random state (which rliable's bootstrap draws from) and restore it after."""
    import numpy as np

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _iqm_columns(scores: np.ndarray) -> np.ndarray:
    """The IQM over axis 0 of a (runs, ...) array, per remaining entry.

    The same number as `rliable.metrics.aggregate_iqm` (SciPy's `trim_mean(x, 0.25)`: sort, drop
    `int(0.25 n)` from each end, mean), without SciPy's per-call overhead, which dominates a bootstrap."""
    import numpy as np

    flat = np.sort(scores.reshape(scores.shape[0], -1), axis=0)
    cut = int(0.25 * flat.shape[0])
    return np.asarray(flat[cut : flat.shape[0] - cut].mean(axis=0))


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """The interquartile mean of `values` (`rliable.metrics.aggregate_iqm`)."""
    import numpy as np
    from rliable import metrics

    return float(metrics.aggregate_iqm(np.asarray(values, dtype=float).reshape(-1, 1)))


def iqm_ci(
    values: Sequence[float], *, reps: int = FINAL_REPS, confidence: float = CONFIDENCE, seed: int = 0
) -> Estimate:
    """IQM of `values` (one per seed) with a stratified-bootstrap percentile CI (rliable), reproducible for `seed`.

    With one value, or all values equal, every resample is the same: the CI is the value itself."""
    import numpy as np

    scores = np.asarray([float(v) for v in values], dtype=float).reshape(-1, 1)  # (seeds, tasks=1)
    if scores.size == 0:
        raise ValueError("iqm_ci needs at least one value")
    value = iqm(scores.ravel())
    if scores.shape[0] == 1 or np.all(scores == scores[0]):
        return Estimate(value, value, value, int(scores.shape[0]))
    from rliable import library as rly

    def statistic(resample: np.ndarray) -> np.ndarray:
        return _iqm_columns(resample)

    with seeded_numpy(seed):
        _, intervals = rly.get_interval_estimates(
            {"scores": scores}, statistic, reps=reps, confidence_interval_size=confidence
        )
    low, high = (float(x) for x in np.asarray(intervals["scores"]).ravel())
    return Estimate(value, low, high, int(scores.shape[0]))


def _clean(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """The finite points of a curve sorted by x, one per x (the last), or None when nothing is left."""
    import numpy as np

    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    keep = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[keep], ys[keep]
    if xs.size == 0:
        return None
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    last = np.append(xs[1:] != xs[:-1], True)  # keep the last point of each run of equal x
    return xs[last], ys[last]


def curve_band(
    curves: Sequence[tuple[Sequence[float], Sequence[float]]],
    *,
    points: int = CURVE_POINTS,
    reps: int = CURVE_REPS,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> CurveBand | None:
    """IQM and stratified-bootstrap CI per point of a common grid, from one (x, y) curve per seed.

    Each seed's curve is linearly interpolated onto `points` evenly spaced x values over the range every
    seed covers (from the latest first point to the earliest last point), so nothing is extrapolated;
    None when there is no curve or the ranges do not overlap. The bootstrap resamples seeds independently
    at each grid point (rliable's recipe for sample-efficiency curves)."""
    import numpy as np

    cleaned = [c for c in (_clean(x, y) for x, y in curves) if c is not None]
    if not cleaned:
        return None
    start = max(float(xs[0]) for xs, _ in cleaned)
    stop = min(float(xs[-1]) for xs, _ in cleaned)
    if stop < start:
        return None
    grid = np.linspace(start, stop, points) if stop > start else np.asarray([start])
    scores = np.stack([np.interp(grid, xs, ys) for xs, ys in cleaned])  # (seeds, grid)
    center = _iqm_columns(scores)
    if scores.shape[0] == 1:
        low = high = center
    else:
        from rliable import library as rly

        def statistic(resample: np.ndarray) -> np.ndarray:
            return _iqm_columns(resample)

        with seeded_numpy(seed):
            _, intervals = rly.get_interval_estimates(
                {"curve": scores[:, None, :]}, statistic, reps=reps, confidence_interval_size=confidence
            )
        low, high = np.asarray(intervals["curve"]).reshape(2, -1)

    def floats(a: Any) -> tuple[float, ...]:
        return tuple(float(v) for v in np.asarray(a).ravel())

    return CurveBand(floats(grid), floats(center), floats(low), floats(high), int(scores.shape[0]))


def _median(values: Sequence[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.median(present) if present else None


def summarize_run(
    task: str,
    run: str,
    cells: Sequence[CellResult],
    *,
    reps: int = FINAL_REPS,
    curve_reps: int = CURVE_REPS,
    points: int = CURVE_POINTS,
    seed: int = 0,
) -> RunSummary:
    """Aggregate the cells of one run on one task (see the module docstring)."""
    done = sorted((c for c in cells if c.status == "completed"), key=lambda c: c.seed)
    finals = [c.final_return for c in done if c.final_return is not None]
    evals = [c.eval_return for c in done if c.eval_return is not None]
    thresholds = [c.threshold for c in cells if c.threshold is not None]
    threshold = thresholds[0] if thresholds else None
    reached = [c for c in done if c.time_to_threshold_s is not None or c.steps_to_threshold is not None]
    curves = [c.curve for c in done if c.curve is not None]

    def band(pick: Callable[[Curve], Sequence[float]]) -> CurveBand | None:
        return curve_band([(pick(c), c.mean_return) for c in curves], points=points, reps=curve_reps, seed=seed)

    return RunSummary(
        task=task,
        run=run,
        seeds=tuple(c.seed for c in done),
        final_return=iqm_ci(finals, reps=reps, seed=seed) if finals else None,
        eval_return=iqm_ci(evals, reps=reps, seed=seed) if evals else None,
        median_steps_per_s=_median([c.steps_per_s for c in done]),
        threshold=threshold,
        reached=len(reached),
        median_time_to_threshold_s=_median([c.time_to_threshold_s for c in reached]),
        median_steps_to_threshold=_median([c.steps_to_threshold for c in reached]),
        failed=tuple(sorted((c for c in cells if c.status == "failed"), key=lambda c: c.seed)),
        skipped=tuple(sorted((c for c in cells if c.status == "skipped"), key=lambda c: c.seed)),
        curve_steps=band(lambda c: c.env_steps),
        curve_wall=band(lambda c: c.wall_s),
        curve_seeds=len(curves),
    )


def summarize(
    cells: Sequence[CellResult],
    *,
    reps: int = FINAL_REPS,
    curve_reps: int = CURVE_REPS,
    points: int = CURVE_POINTS,
    seed: int = 0,
) -> tuple[TaskSummary, ...]:
    """Group cells by task and run (in the order they first appear) and aggregate each group."""
    groups: dict[str, dict[str, list[CellResult]]] = {}
    for cell in cells:
        groups.setdefault(cell.task, {}).setdefault(cell.run, []).append(cell)
    tasks = []
    for task, runs in groups.items():
        summaries = tuple(
            summarize_run(task, run, group, reps=reps, curve_reps=curve_reps, points=points, seed=seed)
            for run, group in runs.items()
        )
        threshold = next((r.threshold for r in summaries if r.threshold is not None), None)
        tasks.append(TaskSummary(task=task, threshold=threshold, runs=summaries))
    return tuple(tasks)


def performance_profile(
    cells: Sequence[CellResult], *, taus: int = PROFILE_TAUS, reps: int = CURVE_REPS, seed: int = 0
) -> Profile | None:
    """Performance profiles of the runs over the tasks (rliable), or None with fewer than two tasks.

    Final returns are normalised per task by the min and max over every run and seed of that task (all
    equal: 1). A run enters with the seeds it completed on every task; a run without such a seed is left
    out (named in `left_out`)."""
    import numpy as np

    finals: dict[str, dict[str, dict[int, float]]] = {}  # task -> run -> seed -> final return
    for cell in cells:
        if cell.status == "completed" and cell.final_return is not None:
            finals.setdefault(cell.task, {}).setdefault(cell.run, {})[cell.seed] = cell.final_return
    tasks = tuple(finals)
    if len(tasks) < 2:
        return None
    runs = tuple(dict.fromkeys(cell.run for cell in cells if cell.status != "skipped"))
    bounds = {}
    for task in tasks:
        every = [v for per_seed in finals[task].values() for v in per_seed.values()]
        bounds[task] = (min(every), max(every))

    def normalised(task: str, value: float) -> float:
        low, high = bounds[task]
        return 1.0 if high == low else (value - low) / (high - low)

    score_dict: dict[str, np.ndarray] = {}
    seeds: dict[str, int] = {}
    left_out = []
    for run in runs:
        common = set.intersection(*(set(finals[task].get(run, {})) for task in tasks))
        if not common:
            left_out.append(run)
            continue
        order = sorted(common)
        score_dict[run] = np.asarray(
            [[normalised(task, finals[task][run][s]) for task in tasks] for s in order], dtype=float
        )  # (seeds, tasks)
        seeds[run] = len(order)
    if not score_dict:
        return None
    tau_list = np.linspace(0.0, 1.0, taus)

    def above(scores: np.ndarray, tau_values: np.ndarray) -> np.ndarray:
        # rliable's score distribution (fraction of all runs x tasks above tau), vectorised over tau
        return np.asarray(np.mean(scores[..., None] > tau_values, axis=(0, 1)))

    from rliable import library as rly

    with seeded_numpy(seed):
        profiles, intervals = rly.create_performance_profile(
            score_dict, tau_list, custom_profile_func=above, reps=reps, confidence_interval_size=CONFIDENCE
        )

    def floats(a: Any) -> tuple[float, ...]:
        return tuple(float(v) for v in np.asarray(a).ravel())

    kept = tuple(score_dict)
    return Profile(
        taus=floats(tau_list),
        runs=kept,
        fraction={r: floats(profiles[r]) for r in kept},
        low={r: floats(np.asarray(intervals[r])[0]) for r in kept},
        high={r: floats(np.asarray(intervals[r])[1]) for r in kept},
        tasks=tasks,
        seeds=seeds,
        left_out=tuple(left_out),
    )
