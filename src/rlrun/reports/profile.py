"""Performance profiles (Agarwal et al., NeurIPS 2021, `rliable.library.create_performance_profile`).

A run's profile is the fraction of its (task, seed) normalised final returns above each threshold tau, with a
95% stratified-bootstrap CI band. Scores are normalised per task in one of two ways (`NORMALISATIONS`):

- `reference` (the default): by the task's reference scores that rlrun ships (`rlrun.reports.references`), so
  0 is random play and 1 the reference (human for Atari: human-normalised scores); a task without a reference
  falls back to the field-relative scale, and the profile names it;
- `field`: by the min and max over every run and seed of the task (0 = worst, 1 = best of this bench): it says
  which run did best here, not how good any run is.

NumPy and rliable are imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlrun.errors import InvalidArgument
from rlrun.reports.aggregate import CONFIDENCE, CURVE_REPS, seeded_numpy
from rlrun.reports.references import Reference, reference
from rlrun.reports.results import CellResult

if TYPE_CHECKING:
    import numpy as np

PROFILE_TAUS = 101
NORMALISATIONS = ("reference", "field")


@dataclass(frozen=True)
class Profile:
    """Performance profiles: for each run, the fraction of (task, seed) scores above each tau, with CI bands."""

    taus: tuple[float, ...]
    runs: tuple[str, ...]
    fraction: dict[str, tuple[float, ...]]
    low: dict[str, tuple[float, ...]]
    high: dict[str, tuple[float, ...]]
    tasks: tuple[str, ...]
    seeds: dict[str, int]  # seeds per run that every task has
    left_out: tuple[str, ...]  # runs without a final return on some task
    normalisation: str = "field"  # what was asked for (`NORMALISATIONS`)
    bounds: dict[str, tuple[float, float]] | None = None
    """Per task, the returns that map to 0 and 1 (random and reference, or the bench's min and max)."""
    references: dict[str, Reference] | None = None
    """The tasks normalised by a shipped reference, with it; the others are field-relative."""

    @property
    def field_tasks(self) -> tuple[str, ...]:
        """The tasks normalised by this bench's min and max."""
        return tuple(task for task in self.tasks if task not in (self.references or {}))

    @property
    def human(self) -> bool:
        """Whether every task is normalised by human scores (Atari): the scores are human-normalised."""
        refs = self.references or {}
        return bool(self.tasks) and all(task in refs and refs[task].kind == "human" for task in self.tasks)


def check_normalisation(value: object) -> str:
    if value not in NORMALISATIONS:
        raise InvalidArgument(
            f"normalisation {str(value)[:40]!r} is unknown; choose one of {', '.join(NORMALISATIONS)}."
        )
    return str(value)


def performance_profile(
    cells: Sequence[CellResult],
    *,
    taus: int = PROFILE_TAUS,
    reps: int = CURVE_REPS,
    seed: int = 0,
    normalisation: str = "reference",
) -> Profile | None:
    """Performance profiles of the runs over the tasks (rliable), or None with fewer than two tasks.

    Final returns are normalised per task (see the module docstring; a field-relative task whose returns are
    all equal scores 1). A run enters with the seeds it completed on every task; a run without such a seed is
    left out (named in `left_out`). The taus span [0, 1], widened to every score's range (a run above the
    reference scores over 1)."""
    import numpy as np

    normalisation = check_normalisation(normalisation)
    finals: dict[str, dict[str, dict[int, float]]] = {}  # task -> run -> seed -> final return
    for cell in cells:
        if cell.status == "completed" and cell.final_return is not None:
            finals.setdefault(cell.task, {}).setdefault(cell.run, {})[cell.seed] = cell.final_return
    tasks = tuple(finals)
    if len(tasks) < 2:
        return None
    runs = tuple(dict.fromkeys(cell.run for cell in cells if cell.status != "skipped"))
    refs: dict[str, Reference] = {}
    bounds: dict[str, tuple[float, float]] = {}
    for task in tasks:
        found = reference(task) if normalisation == "reference" else None
        if found is not None:
            refs[task] = found
            bounds[task] = (found.random, found.reference)
        else:
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
    every_score = np.concatenate([scores.ravel() for scores in score_dict.values()])
    low_tau = min(0.0, math.floor(float(every_score.min()) * 10) / 10)
    high_tau = max(1.0, math.ceil(float(every_score.max()) * 10) / 10)
    tau_list = np.linspace(low_tau, high_tau, taus)

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
        normalisation=normalisation,
        bounds=bounds,
        references=refs,
    )


__all__ = ["NORMALISATIONS", "PROFILE_TAUS", "Profile", "check_normalisation", "performance_profile"]
