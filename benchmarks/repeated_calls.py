"""Why rlrun exists: N short trainings as an inline bench in one process against N `rlrun train` processes.

For every library path (the rows of `adapter_overhead.py`: rsl_rl, skrl, skrl on JAX, sb3, rl_games,
torchrl; `--libraries` picks some), both sides run the same N requests (one task, N seeds): the bench as
hermetic calls in this warm process (`rlrun bench --executor inline`), the reference as one fresh
`rlrun train` interpreter per request, one after another, as a shell loop would. Each cell has the
size a bench gives it by default: the run's tuned number of environments and its tuned rollout per
iteration (no shrinking overrides); a bench has no default budget, so `--iterations` (2) keeps each
call short. Each side runs once to warm up (the library's imports here, the file cache for the
processes), then the sides alternate over `--rounds` rounds (see `alternating.py`). Printed per
library: each round's ratio (processes / inline), the median, the spread, the load and the goal's
verdict: >= 5x faster in-process.

    python benchmarks/repeated_calls.py [--calls 10] [--rounds 3] [--iterations 2] [--libraries sb3 ...] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import results as records
import rlrun
from adapter_overhead import ROWS, missing
from alternating import Summary, alternate, print_table, timed

GOAL = 5.0
TASK = "rlrun/CartPole-v1"
TASKS = {"rsl_rl": "rlrun/CartPoleContinuous-v1"}
"""A row's task when not `TASK` (RSL-RL acts in Box action spaces only)."""


def library_and_framework(row: str) -> tuple[str, str | None]:
    """`skrl_jax` -> ("skrl", "jax"); `sb3` -> ("sb3", None), the library's default framework."""
    library = row.removesuffix("_jax")
    return library, "jax" if library != row else None


def inline(row: str, task: str, calls: int, iterations: int, num_envs: int | None, root: Path) -> None:
    """The N calls as one inline bench in this process (no report, as the processes write none)."""
    library, framework = library_and_framework(row)
    result = rlrun.bench(
        rlrun.BenchRequest(
            tasks=(task,),
            runs=(rlrun.BenchRun(library, ml_framework=framework),),
            seeds=tuple(range(calls)),
            iterations=iterations,
            num_envs=num_envs,
            out=str(root),
            report=False,
        )
    )
    if result.failed or result.completed != calls:
        raise RuntimeError(f"the inline bench of {row} completed {result.completed} of {calls} cells")


def processes(row: str, task: str, calls: int, iterations: int, num_envs: int | None, root: Path) -> None:
    """The N calls as one fresh `rlrun train` interpreter each, one after another."""
    library, framework = library_and_framework(row)
    for seed in range(calls):
        command = [sys.executable, "-m", "rlrun", "train", "--task", task, "--library", library, "--seed", str(seed),
                   "--max_iterations", str(iterations), "--log_root", str(root), "--json",
                   *(["--ml_framework", framework] if framework else []),
                   *(["--num_envs", str(num_envs)] if num_envs is not None else [])]  # fmt: skip
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {completed.returncode}:\n{completed.stderr[-2000:]}")


def measure(row: str, task: str, calls: int, rounds: int, iterations: int, num_envs: int | None) -> Summary:
    """Warm both sides up, then time `rounds` alternating rounds; print each; return the ratios' summary."""

    def side(run: Callable[..., None], count: int) -> Callable[[], float]:
        def measured() -> float:
            with tempfile.TemporaryDirectory() as directory:
                return timed(lambda: run(row, task, count, iterations, num_envs, Path(directory)))

        return measured

    loop, bench = side(processes, calls), side(inline, calls)
    print(f"{row}: {calls} trainings of {task}, {iterations} it each, envs: {num_envs or 'tuned'}", flush=True)
    side(inline, 1)()  # warm-up: the library's imports here
    side(processes, 1)()  # and the file cache, for both sides alike
    return alternate(
        rounds, loop, bench, names=("processes", "inline bench"), goal=GOAL, word="round", unit="x", digits=2
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=2, help="each call's budget (a bench has no default)")
    parser.add_argument("--num_envs", type=int, default=None, help="default: each run's tuned number, as a bench")
    parser.add_argument("--libraries", nargs="*", default=list(ROWS), choices=ROWS, metavar="ROW")
    parser.add_argument("--task", default=None, help=f"every row's task (default: {TASK}; rsl_rl: {TASKS['rsl_rl']})")
    records.add_argument(parser)
    args = parser.parse_args(argv)
    record = records.Record.start(__file__, argv)

    print(f"ratio = {args.calls} `rlrun train` processes / one inline bench of {args.calls} cells (goal >= {GOAL}x)")
    results: dict[str, Summary | str] = {}
    for row in args.libraries:
        reason = missing(row)
        if reason is not None:
            print(f"{row}: not measured ({reason})")
            results[row] = f"not measured ({reason})"
            continue
        task = args.task or TASKS.get(row, TASK)
        results[row] = measure(row, task, args.calls, args.rounds, args.iterations, args.num_envs)

    print_table(results, ROWS, GOAL, "x", digits=2)
    if args.save:
        for row, result in results.items():
            task = args.task or TASKS.get(row, TASK)
            label = f"{args.calls} `rlrun train` processes / one inline bench of {args.calls}, {row} ({task})"
            if isinstance(result, Summary):
                record.add_summary(label, result, unit="x", digits=2, word="round")
            else:
                record.add(label, None, unit="x", goal=(">=", GOAL), verdict="not measured", missing=result)
        record.save(args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
