"""Aggregates over seeds, the way the field asks (Agarwal et al., NeurIPS 2021, `rliable`).

Per task and run: the interquartile mean (IQM, the 25%-trimmed mean, `rliable.metrics.aggregate_iqm`) of
the final training return and of the eval return, each with a 95% stratified-bootstrap percentile
confidence interval over seeds (`rliable.library.get_interval_estimates`); the median steps/s; the median
time and env steps to the task's reward threshold over the seeds that reached it; the failures. Learning
curves are interpolated onto a common grid (env steps, and wall seconds) and aggregated the same way per
grid point; against wall seconds, a seed that finished early holds its last value to the slowest seed's end.
Performance profiles are `rlrun.reports.profile`.

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
    env_steps: tuple[int, ...] = ()  # per completed seed that has it, in seed order
    iterations: tuple[int, ...] = ()
    configs: tuple[str, ...] = ()  # the distinct configuration sources of the completed seeds ("unknown": none)
    seed_points: tuple[tuple[float, float, float], ...] = ()
    """(env steps, wall seconds, return) of every seed when each seed's curve is one point: nothing to draw a
    line or band through, so the figure shows these points."""
    wall_ends: tuple[float, ...] = ()  # the wall seconds of each seed's last curve point, in seed order

    @property
    def failures(self) -> int:
        return len(self.failed)

    @property
    def steps_per_iteration(self) -> int | None:
        """The largest env steps of one iteration over the seeds (env steps / iterations), None if unknown."""
        sizes = [s / i for s, i in zip(self.env_steps, self.iterations, strict=False) if i]
        return math.ceil(max(sizes)) if sizes and len(self.env_steps) == len(self.iterations) else None


@dataclass(frozen=True)
class TaskSummary:
    """Every run of one task, in the order they first appear in the results."""

    task: str
    threshold: float | None
    runs: tuple[RunSummary, ...]


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
    hold: bool = False,
) -> CurveBand | None:
    """IQM and stratified-bootstrap CI per point of a common grid, from one (x, y) curve per seed.

    Each seed's curve is linearly interpolated onto `points` evenly spaced x values over the range every
    seed covers (from the latest first point to the earliest last point), so nothing is extrapolated;
    None when there is no curve or the ranges do not overlap. With `hold`, the grid runs to the latest last
    point instead, and a seed that ended earlier keeps its last value from its end on (a step: the return it
    finished with), so no seed is cut at the fastest one's end. The bootstrap resamples seeds independently
    at each grid point (rliable's recipe for sample-efficiency curves)."""
    import numpy as np

    cleaned = [c for c in (_clean(x, y) for x, y in curves) if c is not None]
    if not cleaned:
        return None
    start = max(float(xs[0]) for xs, _ in cleaned)
    ends = [float(xs[-1]) for xs, _ in cleaned]
    stop = max(ends) if hold else min(ends)
    if stop < start:
        return None
    grid = np.linspace(start, stop, points) if stop > start else np.asarray([start])
    scores = np.stack([np.interp(grid, xs, ys) for xs, ys in cleaned])  # (seeds, grid); past its end: its last y
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
    sparse = bool(curves) and all(len(c) == 1 for c in curves)

    def band(pick: Callable[[Curve], Sequence[float]], hold: bool = False) -> CurveBand | None:
        if sparse:
            return None
        pairs = [(pick(c), c.mean_return) for c in curves]
        return curve_band(pairs, points=points, reps=curve_reps, seed=seed, hold=hold)

    stated = [c.config for c in done]
    configs = tuple(dict.fromkeys(c or "unknown" for c in stated)) if done else ()

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
        curve_wall=band(lambda c: c.wall_s, hold=True),
        curve_seeds=len(curves),
        env_steps=tuple(c.env_steps for c in done if c.env_steps is not None),
        iterations=tuple(c.iterations for c in done if c.iterations is not None),
        configs=configs,
        seed_points=tuple((c.env_steps[0], c.wall_s[0], c.mean_return[0]) for c in curves) if sparse else (),
        wall_ends=tuple(c.wall_s[-1] for c in curves),
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
