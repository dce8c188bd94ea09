"""What rlrun costs on top of each library: a whole `rlrun.train` call against the library driven directly.

For each installed library with a row here, both sides train the same task with the same
configuration, number of environments and iterations, in this process: rlrun through its API
(planning, the hermetic scope, run directory and manifest, atomic checkpoints, the env wrapper,
restore), the reference through the library's own runner on the same torch env, at the torch thread
count rlrun picks for the run (so that the threads are not what differs). Each side runs once to warm
up (imports, the first optimizer step, JIT), then `--pairs` alternating pairs (library first, then
rlrun first, ...; see `alternating.py`). Each pair's ratio is library alone time / through rlrun time;
the script prints every pair, the median, the spread and the load, and the goal's verdict per row:
median >= 0.98, rlrun within 2% of the library.

    python benchmarks/adapter_overhead.py [--pairs 5] [--libraries rsl_rl skrl ...] [--iterations N]

A row is a module `benchmarks/overhead_<row>.py` with `LABEL`, `NUM_ENVS`, `ITERATIONS` (sized for 3-6 s
a side) and two functions of a temporary directory and a number of iterations: `direct(tmp, iterations)`
(the library alone) and `through_rlrun(tmp, iterations)` (the same run via rlrun). `overhead_split.py` splits a
row's gap into what a call costs once and what each iteration costs; `overhead_parts.py` into rlrun's parts.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from alternating import Summary, alternate, print_table, timed
from rlrun.api.planning import pick_threads
from rlrun.libraries import LIBRARIES

GOAL = 0.98
ROWS = ("rsl_rl", "skrl", "skrl_jax", "sb3", "rl_games", "torchrl")
"""Every library path rlrun trains with: each library of the table, and SKRL on both of its frameworks."""


def missing(name: str) -> str | None:
    """Why row `name` cannot run here (its library or JAX is not installed), or None."""
    library = LIBRARIES.get(name.removesuffix("_jax"))
    if library is None:
        return "no such library in rlrun's table"
    if not library.installed:
        return library.install_hint
    if name.endswith("_jax") and importlib.util.find_spec("jax") is None:
        return "JAX is not installed: pip install 'rlrun[jax]'"
    return None


def side(run: Callable[[Path, int], object], iterations: int, threads: int | None = None) -> Callable[[], float]:
    """A side of a pair: one run in a fresh temporary directory, returning its duration. `threads`: the torch
    intra-op threads to run the library alone at (rlrun sets its own inside the call and puts them back)."""

    def measured() -> float:
        import torch

        previous = torch.get_num_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            with tempfile.TemporaryDirectory() as directory:
                return timed(lambda: run(Path(directory), iterations))
        finally:
            torch.set_num_threads(previous)

    return measured


def measure(row: ModuleType, pairs: int, iterations: int) -> Summary:
    """Warm both sides up, then time `pairs` alternating pairs; print each pair; return the ratios' summary."""
    threads = pick_threads(None, row.NUM_ENVS)
    direct, rlrun = side(row.direct, iterations, threads), side(row.through_rlrun, iterations)
    print(f"{row.LABEL} x {iterations} it, {threads} torch thread{'s' * (threads != 1)}", flush=True)
    direct()  # warm-up: imports, first optimizer step, JIT
    rlrun()
    return alternate(
        pairs, direct, rlrun, names=("library alone", "through rlrun"), leaders=("library", "rlrun"), goal=GOAL
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", "--repeats", type=int, default=5, help="alternating pairs per row (default 5)")
    parser.add_argument("--libraries", nargs="*", default=list(ROWS), choices=ROWS, metavar="ROW")
    parser.add_argument("--iterations", type=int, default=None, help="every row's iterations (default: the row's)")
    args = parser.parse_args(argv)

    print(f"ratio = library alone / through rlrun, per alternating pair (goal: median >= {GOAL})")
    results: dict[str, Summary | str] = {}
    for name in args.libraries:
        reason = missing(name)
        if reason is not None:
            print(f"{name}: not measured ({reason})")
            results[name] = f"not measured ({reason})"
            continue
        row = importlib.import_module(f"overhead_{name}")
        results[name] = measure(row, args.pairs, args.iterations or row.ITERATIONS)

    print_table(results, ROWS, GOAL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
