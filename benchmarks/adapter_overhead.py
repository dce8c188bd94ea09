"""What rlrun costs on top of each library: a whole `rlrun.train` call against the library driven directly.

For each installed library with a row here, both sides train the same task with the same
configuration, number of environments and iterations, in this process: rlrun through its API
(planning, the hermetic scope, run directory and manifest, atomic checkpoints, the env wrapper,
restore), the reference through the library's own runner on the same torch env. Each side runs once
to warm up, then `--repeats` times alternately; the best time of each side is kept (the machine is
shared). The ratio is reference time / rlrun time (goal >= 0.98: rlrun within 2% of the library).

    python benchmarks/adapter_overhead.py [--repeats 3] [--libraries rsl_rl ...]

A row is a module `benchmarks/overhead_<library>.py` with `LABEL` and two functions of a temporary
directory: `direct(tmp)` (the library alone) and `through_rlrun(tmp)` (the same run via rlrun).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rlrun.libraries import LIBRARIES

GOAL = 0.98
ROWS = ("rsl_rl", "skrl", "skrl_jax", "sb3", "rl_games")


def best_time(run: Callable[[Path], object], repeats: int) -> float:
    durations = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as directory:
            start = time.perf_counter()
            run(Path(directory))
            durations.append(time.perf_counter() - start)
    return min(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--libraries", nargs="*", default=list(ROWS))
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))

    print(f"{'row':<44} {'library alone':>14} {'through rlrun':>14} {'ratio':>7}")
    for name in args.libraries:
        library = LIBRARIES.get(name.removesuffix("_jax"))
        try:
            row = importlib.import_module(f"overhead_{name}")
        except ModuleNotFoundError:
            continue
        if library is None or not library.installed:
            print(f"{name:<44} (not installed: {library.install_hint if library else 'no adapter'})")
            continue
        for side in (row.direct, row.through_rlrun):  # warm-up: imports, first optimizer step, JIT
            best_time(side, 1)
        direct, rlrun = [], []
        for _ in range(args.repeats):  # alternate, so drifting machine load hits both sides alike
            direct.append(best_time(row.direct, 1))
            rlrun.append(best_time(row.through_rlrun, 1))
        ratio = min(direct) / min(rlrun)
        print(f"{row.LABEL:<44} {min(direct):>13.2f}s {min(rlrun):>13.2f}s {ratio:>7.3f}")
    print(f"ratio = library alone / through rlrun (goal >= {GOAL})")


if __name__ == "__main__":
    main()
