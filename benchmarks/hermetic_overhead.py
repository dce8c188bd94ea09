"""Cost of the hermetic scope per call: enter (lock, capture every guard) plus exit (restore every guard).

The goal is <= 1 ms per call, next to a training call of seconds. The scope is timed empty, with the
modules a real call has imported (numpy, torch with torch._dynamo, gymnasium, rlrun.envs and every
installed library adapter's imports), so the registry's guards all have something to read. The leak
detector, off by default, is timed separately: it is meant for tests and debugging.

    python benchmarks/hermetic_overhead.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time

from rlrun.api import CORE_IMPORTS
from rlrun.hermetic import GUARDS, hermetic_call
from rlrun.libraries import LIBRARIES, load_adapter

GOAL_MS = 1.0


def import_everything() -> list[str]:
    """Import what calls import, so that every guard is active; return the libraries imported."""
    for name in CORE_IMPORTS:
        importlib.import_module(name)
    imported = []
    for library in LIBRARIES.values():
        if library.installed:
            for name in load_adapter(library).IMPORTS:
                importlib.import_module(name)
            imported.append(library.name)
    return imported


def time_calls(calls: int, check_leaks: bool) -> list[float]:
    """Milliseconds per empty call, `calls` times."""
    durations = []
    for _ in range(calls):
        start = time.perf_counter()
        with hermetic_call(check_leaks=check_leaks) as call, call.guarded():
            pass
        durations.append((time.perf_counter() - start) * 1000)
    return durations


def describe(durations: list[float]) -> str:
    ordered = sorted(durations)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered):.3f} ms, p95 {p95:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    libraries = import_everything()
    active = [guard for guard in GUARDS if guard.available()]
    print(
        f"{len(active)} active registry entries ({sum(g.restored for g in active)} restored), "
        f"libraries imported: {', '.join(libraries) or 'none'}"
    )
    time_calls(50, check_leaks=False)  # warm-up
    scope = time_calls(args.calls, check_leaks=False)
    census = time_calls(max(args.calls // 10, 20), check_leaks=True)
    median = statistics.median(scope)
    print(f"  hermetic scope, enter + exit      {describe(scope)}")
    print(f"  with the leak detector on         {describe(census)}")
    print(f"scope cost per call: {median:.3f} ms (goal <= {GOAL_MS:.1f} ms): {median / GOAL_MS:.2f} of the budget")


if __name__ == "__main__":
    main()
