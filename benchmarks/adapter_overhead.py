"""What rlrun costs on top of each library: a whole `rlrun.train` call against the library driven directly.

For each installed library with a row here, both sides train the same task with the same
configuration, number of environments and iterations, in this process: rlrun through its API
(planning, the hermetic scope, run directory and manifest, atomic checkpoints, the env wrapper,
restore), the reference through the library's own runner on the same torch env, at the torch thread
count rlrun picks for the run (so that the threads are not what differs). Each side runs once to warm
up (imports, the first optimizer step, JIT), then `--pairs` alternating pairs (library first, then
rlrun first, ...; see `alternating.py`). Each pair's ratio is library alone time / through rlrun time;
the script prints every pair, the median, the spread and the load, and the goal's verdict per row:
median >= 0.98, rlrun within 2% of the library. With `--up_to N`, a row whose 90% interval of the median still
holds the goal gets two more pairs at a time, up to N in all; a row that ends there is marked not resolved.

Every row is timed at the same length of call, `--seconds` of the library alone (4 by default), as timeit's
autorange sizes its loops: after the warm-up, the library alone runs once more at the row's `ITERATIONS`,
and the row's iterations are scaled from that run to the target (printed). Part of what rlrun adds is paid
once per call (`overhead_split.py` separates it), so a row's ratio depends on its length; rows of fixed
iterations ran 1.3-5 s a side on one machine, and their lengths moved with its speed: not one comparison.
`--iterations N` sets every row's length outright instead (no calibration run).
What short calls cost is `repeated_calls.py`'s goal.

    python benchmarks/adapter_overhead.py [--pairs 5] [--up_to N] [--libraries rsl_rl skrl ...]
        [--seconds 4 | --iterations N] [--save [PATH]]

A row is a module `benchmarks/overhead_<row>.py` with `LABEL`, `NUM_ENVS`, `ITERATIONS` (the length the
calibration starts from) and two functions of a temporary directory and a number of iterations:
`direct(tmp, iterations)` (the library alone) and `through_rlrun(tmp, iterations)` (the same run via rlrun).
`overhead_split.py` splits a row's gap into what a call costs once and what each iteration costs;
`overhead_parts.py` into rlrun's parts.
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

import results as records
from alternating import Summary, alternate, print_table, timed
from rlrun.api.planning import pick_threads
from rlrun.libraries import LIBRARIES

GOAL = 0.98
SECONDS = 4.0
"""The library alone's time a side is sized to, by default."""
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


def sized(iterations: int, seconds: float, target: float) -> int:
    """The iterations a side of `target` seconds takes, from a run of `iterations` that took `seconds`
    (at least 1; the per-call part of a side is small beside 4 s, so a straight proportion)."""
    if seconds <= 0:
        return iterations
    return max(1, round(iterations * target / seconds))


def measure(
    row: ModuleType, pairs: int, iterations: int | None, seconds: float = SECONDS, up_to: int | None = None
) -> Summary:
    """Warm both sides up, size the row to `seconds` of the library alone unless `iterations` is given, then
    time `pairs` alternating pairs (more, up to `up_to`, while the verdict is not resolved); print each pair;
    return the ratios' summary."""
    threads = pick_threads(None, row.NUM_ENVS)
    print(f"{row.LABEL}, {threads} torch thread{'s' * (threads != 1)}", flush=True)
    side(row.direct, iterations or row.ITERATIONS, threads)()  # warm-up: imports, first optimizer step, JIT
    side(row.through_rlrun, iterations or row.ITERATIONS)()
    if iterations is None:
        took = side(row.direct, row.ITERATIONS, threads)()
        iterations = sized(row.ITERATIONS, took, seconds)
        print(f"  sized to {iterations} it: the library alone took {took:.2f} s at {row.ITERATIONS} it", flush=True)
    print(f"  {iterations} it a side", flush=True)
    direct, rlrun = side(row.direct, iterations, threads), side(row.through_rlrun, iterations)
    return alternate(
        pairs,
        direct,
        rlrun,
        names=("library alone", "through rlrun"),
        leaders=("library", "rlrun"),
        goal=GOAL,
        up_to=up_to,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", "--repeats", type=int, default=5, help="alternating pairs per row (default 5)")
    parser.add_argument(
        "--up_to", type=int, default=None, help="pairs in all a row may reach while its verdict is not resolved"
    )
    parser.add_argument("--libraries", nargs="*", default=list(ROWS), choices=ROWS, metavar="ROW")
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--seconds", type=float, default=SECONDS, help=f"size each row to this long a side (default {SECONDS:g})"
    )
    length.add_argument("--iterations", type=int, default=None, help="every row's iterations (no sizing)")
    records.add_argument(parser)
    args = parser.parse_args(argv)
    record = records.Record.start(__file__, argv)

    print(f"ratio = library alone / through rlrun, per alternating pair (goal: median >= {GOAL})")
    results: dict[str, Summary | str] = {}
    for name in args.libraries:
        reason = missing(name)
        if reason is not None:
            print(f"{name}: not measured ({reason})")
            results[name] = f"not measured ({reason})"
            continue
        row = importlib.import_module(f"overhead_{name}")
        results[name] = measure(row, args.pairs, args.iterations, args.seconds, args.up_to)

    print_table(results, ROWS, GOAL)
    if args.save:
        length = f"{args.iterations} iterations a side" if args.iterations else f"sized to {args.seconds:g} s a side"
        for name, result in results.items():
            label = f"library alone / through rlrun, {name} ({length})"
            if isinstance(result, Summary):
                record.add_summary(label, result)
            else:
                record.add(label, None, goal=(">=", GOAL), verdict="not measured", missing=result)
        record.save(args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
