"""Why rlrun exists: N short trainings as an inline bench in one process against N `rlrun train` processes.

Both sides run the same N requests (one library, one task, N seeds, a short budget): the bench as
hermetic calls in this warm process (`rlrun bench --executor inline`), the reference as one fresh
`rlrun train` interpreter per request, one after another, as a shell loop would. Sides alternate over
`--rounds` rounds; the script prints each round's ratio (processes / inline), the median and the spread,
and the machine's load. Goal: >= 5x faster in-process.

    python benchmarks/repeated_calls.py [--calls 10] [--rounds 3] [--library sb3] [--task rlrun/CartPole-v1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rlrun

GOAL = 5.0
SHORT = {
    "rsl_rl": ("agent.num_steps_per_env=8",),
    "sb3": ("agent.n_steps=8", "agent.batch_size=16"),
    "skrl": ("agent.agent.rollouts=8", "agent.agent.mini_batches=1"),
    "rl_games": ("agent.params.config.horizon_length=8", "agent.params.config.minibatch_size=16"),
}
TASKS = {"rsl_rl": "rlrun/Pendulum-v1"}


def inline(calls: int, library: str, task: str, root: Path) -> float:
    start = time.perf_counter()
    rlrun.bench(
        rlrun.BenchRequest(
            tasks=(task,),
            runs=(library,),
            seeds=tuple(range(calls)),
            iterations=2,
            num_envs=4,
            overrides=SHORT[library],
            out=str(root),
            report=False,
        )
    )
    return time.perf_counter() - start


def processes(calls: int, library: str, task: str, root: Path) -> float:
    start = time.perf_counter()
    for seed in range(calls):
        command = [sys.executable, "-m", "rlrun", "train", "--task", task, "--library", library, "--seed",
                   str(seed), "--max_iterations", "2", "--num_envs", "4", "--log_root", str(root), "--json",
                   *SHORT[library]]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--library", default="sb3", choices=sorted(SHORT))
    parser.add_argument("--task", default=None)
    args = parser.parse_args()
    task = args.task or TASKS.get(args.library, "rlrun/CartPole-v1")
    print(f"{args.calls} short trainings of {args.library} on {task}; load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as directory:
        inline(1, args.library, task, Path(directory) / "warm-up")  # imports, as a notebook would have paid
        ratios = []
        for round_ in range(args.rounds):
            bench = inline(args.calls, args.library, task, Path(directory) / f"bench{round_}")
            loop = processes(args.calls, args.library, task, Path(directory) / f"loop{round_}")
            ratios.append(loop / bench)
            print(f"round {round_}: processes {loop:6.2f} s, inline bench {bench:6.2f} s, ratio {loop / bench:5.2f}x")
    print(
        f"ratio (processes / inline): median {statistics.median(ratios):.2f}x, "
        f"spread {min(ratios):.2f}-{max(ratios):.2f}x (goal >= {GOAL}x); load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
