"""Cost of the hermetic scope per call: enter (lock, capture every guard) plus exit (restore every guard).

The goal is <= 0.3 ms per call, next to a training call of seconds. The scope is
timed empty, with every module a real call imports already imported: numpy, torch with
torch._dynamo, gymnasium, rlrun.envs, and every installed library adapter's imports for every
framework it runs on (RSL-RL, SKRL on torch and on JAX, SB3, rl_games), so that every guard in the
registry, the libraries' included, has something to read. The leak detector, off by default, is
timed separately: it is meant for tests and debugging. On shared cores wall time includes waiting for
a core, so the CPU time this process spent per call is printed too.

`--guards N` also times each restorable guard alone, as the scope runs it (every capture in registry order,
then every restore in reverse, nothing changed between), over N rounds, and prints the costliest with their
median capture and restore times and the sum of every guard's medians: where the scope's time goes, the
list to start from when it must shrink. The sum leaves out what the scope adds around the guards (its lock,
the loops, `available()`) and what timing each guard costs (two clock reads, printed).

    python benchmarks/hermetic_overhead.py [--calls 5000] [--profile] [--guards 3000] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import importlib.util
import pstats
import statistics
import time
from collections.abc import Callable

import results as records
from alternating import sided
from rlrun.hermetic import GUARDS, hermetic_call
from rlrun.libraries import LIBRARIES

GOAL_MS = 0.3
CORE_IMPORTS = ("numpy", "torch", "torch._dynamo", "gymnasium", "rlrun.envs")
"""What every call imports first (`rlrun.api.CORE_IMPORTS`)."""


def import_everything() -> list[str]:
    """Import what calls import, for every installed library and framework; return what was imported."""
    for name in CORE_IMPORTS:
        importlib.import_module(name)
    imported = []
    for library in LIBRARIES.values():
        adapter = importlib.import_module(library.adapter)
        for framework in library.frameworks:
            modules = adapter.IMPORTS[framework]
            if all(importlib.util.find_spec(module.partition(".")[0]) is not None for module in modules):
                for module in modules:
                    importlib.import_module(module)
                imported.append(library.name if framework == library.frameworks[0] else f"{library.name}-{framework}")
    return imported


def empty_call(check_leaks: bool) -> None:
    with hermetic_call(check_leaks=check_leaks) as call, call.guarded():
        pass


def time_calls(calls: int, check_leaks: bool, clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Milliseconds per empty call, `calls` times, on `clock` (wall time by default)."""
    durations = []
    for _ in range(calls):
        start = clock()
        empty_call(check_leaks)
        durations.append((clock() - start) * 1000)
    return durations


def describe(durations: list[float]) -> str:
    ordered = sorted(durations)
    p95 = ordered[round(0.95 * (len(ordered) - 1))]
    median = statistics.median(ordered)
    return f"median {median:.3f} ms, p95 {p95:.3f} ms ({median / GOAL_MS:.2f}x the goal, {len(ordered)} calls)"


def record_durations(record: records.Record, name: str, durations: list[float], goal: bool = False) -> None:
    """Add the median milliseconds of `durations` to `record`, with their quartiles and p95 (the goal: the
    scope's wall time only)."""
    ordered = sorted(durations)
    low, _, high = statistics.quantiles(ordered, n=4)
    record.add(
        name,
        statistics.median(ordered),
        unit="ms",
        digits=3,
        spread=(low, high),
        spread_kind=f"quartiles of {len(ordered):,} calls",
        goal=("<=", GOAL_MS) if goal else None,
        note=f"p95 {ordered[round(0.95 * (len(ordered) - 1))]:.3f} ms",
    )


def guard_costs(rounds: int, clock: Callable[[], int] = time.perf_counter_ns) -> dict[str, tuple[float, float]]:
    """Median microseconds of each restorable, available guard's capture and restore, by name, over `rounds`
    scope-like rounds (captures in registry order, restores in reverse)."""
    active = [guard for guard in GUARDS if guard.restored and guard.available()]  # as `scope.capture_all`
    captures: dict[str, list[int]] = {guard.name: [] for guard in active}
    restores: dict[str, list[int]] = {guard.name: [] for guard in active}
    for _ in range(rounds):
        saved = []
        for guard in active:
            start = clock()
            saved.append((guard, guard.capture()))
            captures[guard.name].append(clock() - start)
        for guard, state in reversed(saved):
            start = clock()
            guard.restore(state)
            restores[guard.name].append(clock() - start)
    return {
        name: (statistics.median(captures[name]) / 1e3, statistics.median(restores[name]) / 1e3) for name in captures
    }


def print_guard_costs(rounds: int, shown: int = 20) -> None:
    costs = guard_costs(rounds)
    clock_reads = []
    for _ in range(1000):
        start = time.perf_counter_ns()
        clock_reads.append(time.perf_counter_ns() - start)
    ranked = sorted(costs.items(), key=lambda item: -sum(item[1]))
    total = sum(capture + restore for capture, restore in costs.values())
    print(
        f"  each guard alone, median over {rounds} rounds: the {len(costs)} guards' sum {total:.1f} us "
        f"(timing one costs about {statistics.median(clock_reads) / 1e3:.2f} us, counted in each)"
    )
    for name, (capture, restore) in ranked[:shown]:
        print(f"    {name:<44} capture {capture:6.1f} us  restore {restore:6.1f} us")
    rest = ranked[shown:]
    if rest:
        others = f"the {len(rest)} others"
        print(f"    {others:<44} together {sum(sum(cost) for _, cost in rest):6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--profile", action="store_true", help="also print where an empty call spends its time")
    parser.add_argument("--guards", type=int, default=0, metavar="N", help="also time each guard over N rounds")
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)

    libraries = import_everything()
    active = [guard for guard in GUARDS if guard.available()]
    print(
        f"{len(active)} active registry entries ({sum(g.restored for g in active)} restored), "
        f"libraries imported: {', '.join(libraries) or 'none'}"
    )
    time_calls(200, check_leaks=False)  # warm-up
    scope = time_calls(args.calls, check_leaks=False)
    cpu = time_calls(args.calls, check_leaks=False, clock=time.process_time)
    census = time_calls(max(args.calls // 10, 50), check_leaks=True)
    print(f"  hermetic scope, enter + exit, leak detector off   {describe(scope)}")
    print(f"    the same, CPU time of this process            {describe(cpu)}")
    print(f"  with the leak detector on                          {describe(census)}")
    median = statistics.median(scope)
    shown = sided(median, GOAL_MS, higher_is_better=False)  # 0.3004 prints 0.3004, not 0.300 beside "missed"
    print(f"scope cost per call: {shown} ms; goal <= {GOAL_MS} ms: {'met' if median <= GOAL_MS else 'missed'}")
    record_durations(record, "hermetic scope per call, enter + exit (wall time)", scope, goal=True)
    record_durations(record, "hermetic scope per call, CPU time of the process", cpu)
    record_durations(record, "hermetic scope per call with the leak detector on", census)
    if args.guards:
        print_guard_costs(args.guards)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [empty_call(False) for _ in range(1000)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    if args.save:
        record.save(args.save)


if __name__ == "__main__":
    main()
