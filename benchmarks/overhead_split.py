"""What rlrun costs per call and per iteration: each adapter row at two lengths, and the line through them.

`adapter_overhead.py` gives one ratio per row, at the row's length. Part of what rlrun adds is paid once per
call (planning, the run folder, the last run.json, SKRL's checkpoints, which come at a fixed count whatever
the run's length, the JAX eviction, the end-of-call collection) and part with every iteration (the episode
statistics, the iteration clock, periodic checkpoints): a row's ratio mixes the two in proportions set by its
length. This script separates them. For each row it times four sides in rotating order, round after round:
the library alone and through rlrun, each at `--short` and at `--long` iterations. Per side and per round it
fits time = fixed + per-iteration x iterations through the two lengths, and prints, as medians over the
rounds with their spread:
- **rlrun per call**: rlrun's fixed time minus the library's, in ms;
- **per iteration**: the library's time per iteration / rlrun's, the ratio a long run tends to;
- **0.98 from**: the iterations at which the whole call's ratio (library alone / through rlrun, from the two
  fitted lines) reaches `adapter_overhead.py`'s goal of 0.98; "never" when the per-iteration ratio is below it.

The fit is a straight line through two points: a cost that grows otherwise with the length (a log that
is read whole at each iteration) shows as a per-iteration ratio that differs between `--long` values.

    python benchmarks/overhead_split.py [--libraries skrl_jax rl_games ...] [--rounds 5] [--short 1] [--long N]

`--long` defaults to three times each row's own iterations.
"""

from __future__ import annotations

import argparse
import importlib
import math
import statistics
import sys
from dataclasses import dataclass

from adapter_overhead import GOAL, ROWS, missing, side
from alternating import load
from rlrun.api.planning import pick_threads


@dataclass(frozen=True)
class Split:
    """One round's four times fitted as two lines: seconds = fixed + per_iteration x iterations, per side."""

    short: int
    long: int
    library: tuple[float, float]
    """The library alone's seconds at `short` and at `long` iterations."""
    rlrun: tuple[float, float]

    def line(self, times: tuple[float, float]) -> tuple[float, float]:
        """(fixed seconds, seconds per iteration) through the side's two times."""
        per_iteration = (times[1] - times[0]) / (self.long - self.short)
        return times[0] - per_iteration * self.short, per_iteration

    @property
    def per_call(self) -> float:
        """rlrun's fixed seconds minus the library's."""
        return self.line(self.rlrun)[0] - self.line(self.library)[0]

    @property
    def per_iteration(self) -> float:
        """The library's seconds per iteration / rlrun's (a nonpositive slope, from noise, reads as 0)."""
        library, rlrun = self.line(self.library)[1], self.line(self.rlrun)[1]
        return library / rlrun if rlrun > 0 else 0.0

    def reaches(self, goal: float = GOAL) -> float:
        """Iterations from which library alone / through rlrun >= `goal` on the fitted lines, at every length beyond
        (0: at any length; inf: never, the per-iteration ratio is below `goal`)."""
        (library_fixed, library_slope), (rlrun_fixed, rlrun_slope) = self.line(self.library), self.line(self.rlrun)
        gain = library_slope - goal * rlrun_slope  # what each iteration brings the ratio towards the goal
        deficit = goal * rlrun_fixed - library_fixed
        if gain > 0:
            return max(0.0, deficit / gain)
        return 0.0 if gain == 0 and deficit <= 0 else float("inf")


def summarize(splits: list[Split]) -> str:
    """The rounds' medians and spreads, as printed under a row."""

    def spread(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
        middle = statistics.median(values) * scale
        return f"{middle:.{digits}f} ({min(values) * scale:.{digits}f} to {max(values) * scale:.{digits}f})"

    reach = sorted(split.reaches() for split in splits)
    median = statistics.median(reach)
    where = "never" if median == float("inf") else f"{math.ceil(median)} iterations"
    return (
        f"rlrun per call {spread([s.per_call for s in splits], 1000, 1)} ms; per iteration, library alone / rlrun "
        f"{spread([s.per_iteration for s in splits])}; whole call >= {GOAL} from {where}"
    )


def measure(row: object, rounds: int, short: int, long: int) -> list[Split]:
    """Warm up, then time `rounds` rounds of the row's four sides, each round led by the next side."""
    threads = pick_threads(None, row.NUM_ENVS)
    sides = {
        ("library", short): side(row.direct, short, threads),
        ("rlrun", short): side(row.through_rlrun, short),
        ("library", long): side(row.direct, long, threads),
        ("rlrun", long): side(row.through_rlrun, long),
    }
    print(f"{row.LABEL}: {short} and {long} iterations, {rounds} rounds, load {load():.2f}", flush=True)
    for run in list(sides.values())[:2]:  # warm-up: imports, first optimizer step, JIT
        run()
    order = list(sides)
    splits = []
    for index in range(rounds):
        shift = index % len(order)
        seconds = {key: sides[key]() for key in order[shift:] + order[:shift]}
        split = Split(
            short,
            long,
            (seconds["library", short], seconds["library", long]),
            (seconds["rlrun", short], seconds["rlrun", long]),
        )
        splits.append(split)
        print(
            f"  round {index + 1}: library alone {split.library[0]:.3f} / {split.library[1]:.3f} s, through rlrun "
            f"{split.rlrun[0]:.3f} / {split.rlrun[1]:.3f} s; rlrun per call {1000 * split.per_call:+.1f} ms, "
            f"per iteration {split.per_iteration:.3f}",
            flush=True,
        )
    print(f"  {summarize(splits)}; load after {load():.2f}", flush=True)
    return splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--libraries", nargs="*", default=list(ROWS), choices=ROWS, metavar="ROW")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the four sides per row (default 5)")
    parser.add_argument("--short", type=int, default=1, help="the short calls' iterations (default 1)")
    parser.add_argument("--long", type=int, default=None, help="the long calls' (default: 3 x the row's own)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.short < 1 or (args.long is not None and args.long <= args.short):
        parser.error("--rounds and --short must be at least 1, and --long more than --short")

    results = {}
    for name in args.libraries:
        reason = missing(name)
        if reason is not None:
            print(f"{name}: not measured ({reason})")
            continue
        row = importlib.import_module(f"overhead_{name}")
        results[name] = measure(row, args.rounds, args.short, args.long or 3 * row.ITERATIONS)
    print()
    for name, splits in results.items():
        print(f"{name:<9} {summarize(splits)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
