"""What a commit beside the training costs the training's thread: on a thread of its process, or in another process.

A training's record commits its checkpoints on a thread of the process ("rlrun-commit", `runs.atomic`): it
fsyncs each file, moves it and fsyncs its folder while the library trains. This script times what the
training's thread pays for that: a loop of a small policy's forward passes (SKRL's `act` at 64 envs, one torch
thread), with, for the span of the loop, one of:
- **nothing**;
- **a thread that sleeps**: wakes every `--period_ms` and does nothing else, so every wake-up takes the GIL;
- **a thread that commits**: writes a checkpoint-sized file into a temporary folder, fsyncs it, moves it into
  place and fsyncs the folder, every `--period_ms` (a commit's system calls, each releasing the GIL and taking
  it back);
- **a process that commits**: the same commits, by a child Python process (no GIL shared with the loop).

The variants run in rotating order, `--rounds` rounds; printed per variant: the median microseconds a forward
pass and the ratio nothing / variant, the figure `adapter_overhead.py` judges, and the commits made per second
(so that the thread and the process are seen to make as many). The committing loops sleep `--period_ms` between
commits; 0 commits back to back.

    python benchmarks/commit_interference.py [--rounds 7] [--steps 4000] [--period_ms 2] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

COMMITS = r"""
import os, sys, time

def commit(folder, index, period):
    temporary = os.path.join(folder, ".tmp", "agent.pt")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(descriptor, bytes(40_000))  # a small policy's checkpoint
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, os.path.join(folder, f"agent_{index % 4}.pt"))
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    if period:
        time.sleep(period)

def commits(folder, period, running):
    os.makedirs(os.path.join(folder, ".tmp"), exist_ok=True)
    count = 0
    while running():
        commit(folder, count, period)
        count += 1
    return count

if __name__ == "__main__":  # the child process: commit until stdin closes, then print the count
    import threading
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    print(commits(sys.argv[1], float(sys.argv[2]), lambda: not closed.is_set()), flush=True)
"""
_namespace: dict = {}
exec(compile(COMMITS, "commit_interference.COMMITS", "exec"), _namespace)  # the thread runs the child's code
commits = _namespace["commits"]

VARIANTS = ("nothing", "a thread that sleeps", "a thread that commits", "a process that commits")


def policy_loop(steps: int) -> float:
    """Seconds for `steps` forward passes of a 4-64-64-2 tanh policy at 64 envs, with a softmax (SKRL's act)."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2)
    )
    observations = torch.randn(64, 4)
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(steps):
            net(observations).softmax(-1)
    return time.perf_counter() - start


def beside(variant: str, folder: Path, period: float, loop: Callable[[], float]) -> tuple[float, float]:
    """Run `loop()` with `variant` beside it; return its seconds and the commits made per second meanwhile."""
    if variant == "nothing":
        return loop(), 0.0
    if variant == "a process that commits":
        child = subprocess.Popen(
            [sys.executable, "-c", COMMITS, str(folder), str(period)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        time.sleep(0.3)  # its interpreter started and committing
        start = time.perf_counter()
        seconds = loop()
        made = int(child.communicate(b"")[0])
        return seconds, made / (time.perf_counter() - start + 0.3)
    stop = threading.Event()
    counted: list[int] = []
    if variant == "a thread that commits":
        target = lambda: counted.append(commits(str(folder), period, lambda: not stop.is_set()))  # noqa: E731
    else:

        def target() -> None:
            while not stop.is_set():
                time.sleep(period or 1e-4)

    thread = threading.Thread(target=target, name="commit-interference")
    start = time.perf_counter()
    thread.start()
    seconds = loop()
    stop.set()
    thread.join()
    return seconds, (counted[0] if counted else 0) / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=4000, help="forward passes a loop (default 4000)")
    parser.add_argument("--period_ms", type=float, default=2.0, help="a committing loop's pause between commits")
    parser.add_argument("--dir", default=None, help="where the commits write (default: a temporary folder)")
    args = parser.parse_args(argv)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory(dir=args.dir) as directory:
            folder = Path(directory)
            loop = lambda: policy_loop(args.steps)  # noqa: E731
            loop()  # warm-up
            seconds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
            rates: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
            print(
                f"{args.steps} forward passes a loop, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}", flush=True
            )
            for index in range(args.rounds):
                shift = index % len(VARIANTS)
                for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                    took, rate = beside(variant, folder, args.period_ms / 1000, loop)
                    seconds[variant].append(took)
                    rates[variant].append(rate)
    finally:
        torch.set_num_threads(threads)
    alone = statistics.median(seconds["nothing"])
    for variant in VARIANTS:
        median = statistics.median(seconds[variant])
        rate = f", {statistics.median(rates[variant]):5.0f} commits/s" if variant.endswith("commits") else ""
        print(
            f"  {variant:<24} {median / args.steps * 1e6:7.2f} us a pass "
            f"(spread {min(seconds[variant]) / args.steps * 1e6:.2f}-{max(seconds[variant]) / args.steps * 1e6:.2f})"
            f"  nothing / this {alone / median:.3f}{rate}"
        )
    print(f"load after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
