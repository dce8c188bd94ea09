"""Cells per minute of `rlrun bench` on each executor, and against one `rlrun train` process per cell.

Two measurements, in rounds whose order of sides changes from round to round:
- long cells (rsl_rl PPO on rlrun/Pendulum-v1, 16 envs, `--iterations 400`, at least 20 s each; each row gives
  its cells' mean): `--cells` seeds as one bench, inline (one cell at a time, in this process), on the process
  pool and on a local Ray instance at each of `--workers`; cells per minute from the bench's wall time (workers'
  start included). Goal on 2 quiet cores: the pool and Ray at 2 workers at least 1.7x inline. Beside each ratio,
  the seconds of the bench spent outside its cells (wall time less the cells' own training time over the
  workers: starting the workers or the Ray instance, the workers' first imports, stopping them): a fixed cost per
  bench, which a bench of more cells spreads thinner (the default is 8 cells, a small benchmark of two libraries
  over 4 seeds);
- short cells (the same task, 4 iterations: about half a second of training): `--short_cells` seeds as
  one inline bench against one fresh `rlrun train` interpreter per cell, one after another, as a sweep script
  that starts a process per run does. Goal: at least 5x.

Each executor's ratio is to the inline bench of the same round. The host's speed drifts by tens of percent over
minutes, so the order of the long benches rotates (`rotation`): over as many rounds as there are sides, each
runs once in every position, and the pool and Ray at one size run as close to inline, on the whole, as each
other. (A fixed order reversed every other round would keep the pool next to inline in every round and Ray
further away, so drift would weigh on Ray's ratio more than on the pool's.) The short cells alternate in AB/BA
order (`alternating.pair`).

    python benchmarks/bench_throughput.py [--cells 8] [--workers 1 2] [--rounds 2] [--short_cells 8] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar

import alternating
import results as records
import rlrun

TASK = "rlrun/Pendulum-v1"
NUM_ENVS = 16
ITERATIONS = 400
SHORT_ITERATIONS = 4
RLRUN = str(Path(sys.executable).with_name("rlrun"))
T = TypeVar("T")


class Measured(NamedTuple):
    """One bench: its cells per minute, its seconds outside the cells (its wall time less the cells' own, spread
    over the workers) and a cell's mean training time."""

    rate: float
    outside_s: float
    cell_s: float


def bench(out: Path, cells: int, iterations: int, executor: str = "inline", workers: int | None = None) -> Measured:
    """Run `cells` seeds as one bench and measure it."""
    request = rlrun.BenchRequest(
        tasks=(TASK,), runs=("rsl_rl",), seeds=tuple(range(cells)), iterations=iterations, num_envs=NUM_ENVS,
        out=str(out), report=False, executor=executor, workers=workers,
    )  # fmt: skip
    start = time.perf_counter()
    result = rlrun.bench(request, check_leaks=executor != "ray")  # Ray keeps threads after `ray.shutdown()`
    wall = time.perf_counter() - start
    if result.completed != cells:
        raise SystemExit(f"{executor} x {workers}: {result.failed} of {cells} cells failed: {result.rows}")
    cell_s = statistics.fmean(row["wall_s"] for row in result.rows)
    return Measured(60 * cells / wall, wall - cell_s * cells / (workers or 1), cell_s)


def processes(root: Path, cells: int, iterations: int) -> float:
    """One `rlrun train` process per cell, one after another; cells per minute."""
    start = time.perf_counter()
    for seed in range(cells):
        command = [RLRUN, "train", "--task", TASK, "--library", "rsl_rl", "--seed", str(seed), "--num_envs",
                   str(NUM_ENVS), "--max_iterations", str(iterations), "--log_root", str(root), "--json"]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True)
    return 60 * cells / (time.perf_counter() - start)


def sides(workers: Sequence[int]) -> tuple[tuple[str, int | None], ...]:
    """The long benches' sides: inline, the pool at each size, then Ray at each size in the reverse order, so that
    the pool at a size is as many places after inline as Ray at that size is before it (counting round the list's
    end), and `rotation` places the two as close to inline as each other over its rounds."""
    sizes = sorted(set(workers))
    return (("inline", None), *(("process", n) for n in sizes), *(("ray", n) for n in reversed(sizes)))


def rotation(sides: Sequence[T], round_: int) -> tuple[T, ...]:
    """The order of `sides` in round `round_`: the list rotated left by the round's number."""
    shift = round_ % len(sides)
    return (*sides[shift:], *sides[:shift])


def label(executor: str, workers: int | None) -> str:
    return executor if workers is None else f"{executor} x{workers}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="the pool's and Ray's sizes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--short_cells", type=int, default=8)
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)
    print(f"load {os.getloadavg()[0]:.2f}; cells per minute of rsl_rl PPO on {TASK}, {NUM_ENVS} envs")
    executors = sides(args.workers)
    measured: dict[str, list[Measured]] = {label(*side): [] for side in executors}
    short: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        bench(root / "warm-up", 1, SHORT_ITERATIONS)  # imports, as a notebook would have paid them
        for round_ in range(args.rounds):
            for executor, workers in rotation(executors, round_):
                name = label(executor, workers)
                out = root / f"long{round_}-{executor}{workers}"
                one = bench(out, args.cells, ITERATIONS, executor, workers)
                measured[name].append(one)
                print(f"round {round_}: {name:<11} {one.rate:6.2f} cells/min, cells of {one.cell_s:4.1f} s, "
                      f"{one.outside_s:5.1f} s outside the cells", flush=True)  # fmt: skip
            pair = alternating.pair(
                round_,
                lambda: bench(root / f"short{round_}", args.short_cells, SHORT_ITERATIONS).rate,  # noqa: B023
                lambda: processes(root / f"loop{round_}", args.short_cells, SHORT_ITERATIONS),  # noqa: B023
            )
            short.append(pair)
            print(f"round {round_}: short cells, inline bench {pair[0]:6.1f} cells/min, one process per cell "
                  f"{pair[1]:6.1f} cells/min, {pair[0] / pair[1]:.2f}x", flush=True)  # fmt: skip
    kind = f"min-max of {args.rounds} round{'s' * (args.rounds != 1)}"

    def median(name: str, field: str) -> float:
        return statistics.median(getattr(one, field) for one in measured[name])

    for name, benches in measured.items():
        if name == "inline":
            continue
        ratios = [one.rate / base.rate for one, base in zip(benches, measured["inline"], strict=True)]
        goal = ("process x2", "ray x2")
        shown = "  goal >= 1.7x" if name in goal else ""
        fixed = median(name, "outside_s")
        print(f"{name:<11} / inline: median {statistics.median(ratios):.2f}x "
              f"(range {min(ratios):.2f}-{max(ratios):.2f}x), {fixed:.1f} s outside the cells{shown}")  # fmt: skip
        record.add(
            f"cells per minute, {name} / inline ({args.cells} cells of {ITERATIONS} iterations)",
            statistics.median(ratios), unit="x", digits=2, spread=(min(ratios), max(ratios)), spread_kind=kind,
            goal=(">=", 1.7) if name in goal else None,
            note=f"{name} {median(name, 'rate'):.2f} cells/min, inline {median('inline', 'rate'):.2f}; "
            f"cells of {median(name, 'cell_s'):.1f} s (inline {median('inline', 'cell_s'):.1f} s); "
            f"{fixed:.1f} s of the bench outside its cells (inline {median('inline', 'outside_s'):.1f} s)",
        )  # fmt: skip
    ratios = [bench_rate / loop_rate for bench_rate, loop_rate in short]
    print(f"short cells, inline bench / one process per cell: median {statistics.median(ratios):.2f}x "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}x)  goal >= 5x; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    record.add(
        f"cells per minute, inline bench / one `rlrun train` process per cell ({args.short_cells} cells of "
        f"{SHORT_ITERATIONS} iterations)",
        statistics.median(ratios), unit="x", digits=2, spread=(min(ratios), max(ratios)), spread_kind=kind,
        goal=(">=", 5.0),
        note=f"inline bench {statistics.median(rate for rate, _ in short):.1f} cells/min, one process per cell "
        f"{statistics.median(rate for _, rate in short):.1f} cells/min",
    )  # fmt: skip
    if args.save:
        record.save(args.save)


if __name__ == "__main__":
    main()
