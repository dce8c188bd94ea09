"""Alternating pairs: how the comparison benchmarks time two sides on a shared, noisy machine.

A drifting load (another process starting, a core's clock dropping) hits whichever side runs at that
moment, so the two sides of a comparison alternate in AB/BA order: pair 0 runs A then B, pair 1 B then
A, and so on. Each pair gives one ratio, and the scripts report the median of the ratios with their
spread (min-max) and the load average before and after, never a best-of-N that hides how much the
figures moved. From 5 pairs on they also print a 90% confidence interval for the median (`Summary.interval`,
from the ratios' order statistics, assuming nothing of their distribution): where it straddles the goal, the
verdict is the median's, but the run has not resolved it; more pairs narrow it. `alternate(..., up_to=N)` runs
them: while the interval still holds the goal, two more pairs (one of each order) at a time, up to N in all. The
rule stops on either side of the goal alike, so it settles a row that one short run would leave to noise without
favouring a verdict. `alternate` runs the pairs and prints them; used by `adapter_overhead.py` and
`repeated_calls.py`.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


def timed(run: Callable[[], object]) -> float:
    """Seconds `run()` takes, after collecting the garbage the previous side left (so no side pays for it)."""
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def pair(index: int, first: Callable[[], float], second: Callable[[], float]) -> tuple[float, float]:
    """Run pair `index` of two sides, each returning its own duration: `first` leads on even pairs and
    `second` on odd ones. Returns (first's duration, second's), whichever ran first."""
    if index % 2 == 0:
        a = first()
        b = second()
    else:
        b = second()
        a = first()
    return a, b


def order(index: int, first: str, second: str) -> str:
    """Which side led pair `index`, as printed next to it."""
    return f"{first if index % 2 == 0 else second} first"


def alternate(
    count: int,
    first: Callable[[], float],
    second: Callable[[], float],
    *,
    names: tuple[str, str],
    goal: float,
    leaders: tuple[str, str] | None = None,
    word: str = "pair",
    unit: str = "",
    digits: int = 3,
    up_to: int | None = None,
) -> Summary:
    """Time `count` alternating pairs of two warmed-up sides (each returning its own duration); print each pair
    (its sides as `names`, which led as `leaders`, by default the names) and the summary; return the summary
    of the ratios first / second against `goal`. `up_to`: while the 90% interval of the median holds the goal,
    two more pairs at a time, up to this many pairs in all."""
    before = load()
    ratios: list[float] = []
    led = leaders or names

    def run(index: int) -> None:
        a, b = pair(index, first, second)
        ratios.append(a / b)
        print(
            f"  {word} {index + 1} ({order(index, *led)}): {names[0]} {a:6.2f} s, {names[1]} {b:6.2f} s, "
            f"ratio {a / b:.{digits}f}{unit}",
            flush=True,
        )

    def settled() -> bool:
        return up_to is None or len(ratios) >= up_to or Summary(tuple(ratios), goal, before, before).resolved

    for index in range(count):
        run(index)
    if not settled():
        print(f"  the 90% interval holds the goal: two more pairs at a time, up to {up_to}", flush=True)
    while not settled():
        for index in range(len(ratios), min(len(ratios) + 2, up_to or 0)):  # one of each order
            run(index)
    summary = Summary(tuple(ratios), goal, before, load())
    print(f"  {summary.line(unit, digits=digits)}", flush=True)
    return summary


def sided(value: float, goal: float, *, digits: int = 3, higher_is_better: bool = True, thousands: bool = False) -> str:
    """`value` with `digits` decimals, or with as many more (up to 6) as it takes for the printed figure to side
    with its verdict against `goal`: 0.97996 against a goal of >= 0.98 prints 0.97996, not a 0.980 marked NOT met,
    and 0.30004 ms against <= 0.3 prints 0.30004. One closer still is cut at 6 decimals toward its side
    (0.979999). `thousands`: with `,` between thousands (1,000,000,000)."""

    def meets(figure: float) -> bool:
        return figure >= goal if higher_is_better else figure <= goal

    grouping = "," if thousands else ""
    met = meets(value)
    for places in range(digits, 7):
        text = f"{value:{grouping}.{places}f}"
        if meets(float(text.replace(",", ""))) == met:
            return text
    toward = math.ceil if met == higher_is_better else math.floor
    return f"{toward(value * 10**6) / 10**6:{grouping}.6f}"


def load() -> float:
    """The 1-minute load average (what else the machine was running)."""
    return os.getloadavg()[0]


@dataclass(frozen=True)
class Summary:
    """The ratios of one comparison against its goal (a ratio at least `goal` meets it)."""

    ratios: tuple[float, ...]
    goal: float
    load_before: float
    load_after: float

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def met(self) -> bool:
        return self.median >= self.goal

    @property
    def resolved(self) -> bool:
        """Whether the 90% interval of the median lies on one side of the goal (False below 5 pairs)."""
        interval = self.interval()
        return interval is not None and (interval[0] >= self.goal or interval[1] < self.goal)

    def interval(self, confidence: float = 0.9) -> tuple[float, float] | None:
        """A confidence interval for the median of the ratios' distribution: the k-th smallest and k-th largest
        ratio, k the largest whose binomial tail, P(Binomial(n, 1/2) < k) on each side, stays within (1 -
        confidence) / 2. Distribution-free; its coverage is at least `confidence`. None below 5 pairs, where
        even the smallest and largest ratio cover less than 90%."""
        n = len(self.ratios)
        tail, k = 0.0, 0
        while k < n // 2:
            tail += math.comb(n, k) / 2**n
            if tail > (1 - confidence) / 2:
                break
            k += 1
        if k == 0:
            return None
        ordered = sorted(self.ratios)
        return ordered[k - 1], ordered[n - k]

    def shown(self, digits: int = 3) -> str:
        """The median as `sided` prints it against the goal: 0.97996 against 0.98 prints 0.97996, not a 0.980
        marked NOT met."""
        return sided(self.median, self.goal, digits=digits)

    def line(self, unit: str = "", digits: int = 3) -> str:
        """`median 1.003 (90% interval 0.990-1.020), spread 0.982-1.031 over 9 pairs, load 1.02 -> 1.10; goal >= 0.98:
        met`."""
        low, high = min(self.ratios), max(self.ratios)
        interval = self.interval()
        within = f" (90% interval {interval[0]:.{digits}f}-{interval[1]:.{digits}f}{unit})" if interval else ""
        return (
            f"median {self.shown(digits)}{unit}{within}, spread {low:.{digits}f}-{high:.{digits}f}{unit} over "
            f"{len(self.ratios)} pair{'s' * (len(self.ratios) != 1)}, load {self.load_before:.2f} -> "
            f"{self.load_after:.2f}; goal >= {self.goal}{unit}: {'met' if self.met else 'NOT met'}{self.unsettled()}"
        )

    def unsettled(self) -> str:
        """` (not resolved: the 90% interval holds the goal)` where it does, else nothing."""
        if self.interval() is None or self.resolved:
            return ""
        return " (not resolved: the 90% interval holds the goal)"


def print_table(
    results: dict[str, Summary | str], rows: tuple[str, ...], goal: float, unit: str = "", digits: int = 3
) -> None:
    """One line per row (its median, spread, load and verdict, or why it was not measured), then whether the
    goal is met for every row of `rows`: a row not measured is not met."""
    print(f"\n{'row':<10} {'median':>8} {'90% interval':>14} {'spread':>14} {'load':>11}  goal >= {goal}{unit}")
    for name, result in results.items():
        if isinstance(result, str):
            print(f"{name:<10} {result}")
            continue
        median = f"{result.shown(digits)}{unit}"
        interval = result.interval()
        within = f"{interval[0]:.{digits}f}-{interval[1]:.{digits}f}{unit}" if interval else "-"
        spread = f"{min(result.ratios):.{digits}f}-{max(result.ratios):.{digits}f}{unit}"
        loads = f"{result.load_before:.2f}-{result.load_after:.2f}"
        print(f"{name:<10} {median:>8} {within:>14} {spread:>14} {loads:>11}  {'met' if result.met else 'NOT met'}")
    measured = [result for name in rows if isinstance(result := results.get(name), Summary)]
    every = len(measured) == len(rows) and all(result.met for result in measured)
    unmeasured = "" if len(measured) == len(rows) else f" ({len(measured)} of {len(rows)} rows measured)"
    print(f"every row ({', '.join(rows)}): {'met' if every else 'NOT met'}{unmeasured}")
