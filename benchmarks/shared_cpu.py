"""Fast on a shared CPU: the same env-only and training runs idle and beside a busy-loop process.

For each workload the script measures steps/s with rlrun's thread policy (`threads=None`, the default)
and with torch's default (as many threads as cores), idle and with one core kept busy by a process the
script starts itself (`while True: pass`), alternating idle and busy `--rounds` times. It prints the
median steps/s of each cell and the slowdown busy/idle (goal: <= 1.5x with rlrun's default), with the
spread over rounds and the load average.

    python benchmarks/shared_cpu.py [--rounds 3] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator

import results as records
import rlrun

GOAL = 1.5


@contextlib.contextmanager
def busy_core() -> Iterator[None]:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def env_only(threads: int | None) -> float:
    result = rlrun.random_agent(
        rlrun.AgentRequest(task="rlrun/CartPole-v1", num_envs=4096, max_steps=300, threads=threads)
    )
    return result.steps_per_s


def training(threads: int | None) -> float:
    with tempfile.TemporaryDirectory() as root:
        result = rlrun.train(
            rlrun.TrainRequest(
                task="rlrun/CartPoleContinuous-v1", max_iterations=15, threads=threads, seed=1, log_root=root
            )
        )
    return result.steps_per_s


WORKLOADS: dict[str, Callable[[int | None], float]] = {
    "env-only rlrun/CartPole-v1, 4,096 envs": env_only,
    "train rlrun/CartPoleContinuous-v1 (RSL-RL defaults)": training,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)
    cores = len(os.sched_getaffinity(0))
    policies = {"rlrun default": None, f"torch default ({cores} threads)": cores}
    print(f"{cores} cores; load {os.getloadavg()[0]:.2f}")
    print(f"{'workload':<52} {'threads':<24} {'idle steps/s':>14} {'busy steps/s':>14} {'busy/idle slowdown':>20}")
    for label, workload in WORKLOADS.items():
        for name, threads in policies.items():
            workload(threads)  # warm-up
            idle, busy = [], []
            for _ in range(args.rounds):
                idle.append(workload(threads))
                with busy_core():
                    busy.append(workload(threads))
            slowdowns = [i / b for i, b in zip(idle, busy, strict=True)]
            print(
                f"{label:<52} {name:<24} {statistics.median(idle):>14,.0f} {statistics.median(busy):>14,.0f} "
                f"{statistics.median(slowdowns):>8.2f}x ({min(slowdowns):.2f}-{max(slowdowns):.2f})"
            )
            record.add(
                f"slowdown beside a busy core (idle / busy steps/s), {label}, {name}",
                statistics.median(slowdowns),
                unit="x",
                digits=2,
                spread=(min(slowdowns), max(slowdowns)),
                spread_kind=f"min-max of {args.rounds} round{'s' * (args.rounds != 1)}",
                goal=("<=", GOAL) if threads is None else None,
                note=f"idle {statistics.median(idle):,.0f} steps/s, busy {statistics.median(busy):,.0f} steps/s",
            )
    print(f"goal: slowdown <= {GOAL}x with rlrun's default; load {os.getloadavg()[0]:.2f}")
    if args.save:
        record.save(args.save)


if __name__ == "__main__":
    main()
