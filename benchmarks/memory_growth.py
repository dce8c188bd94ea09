"""Memory over repeated calls: does a process that calls `rlrun.train` many times keep its size?

For each library, a fresh Python process makes `--calls` short training calls (a few iterations, a few
envs, each into a temporary log root) with `rlrun.train(rlrun.TrainRequest(...))`, and reads its
resident set size from `/proc/self/statm` after each call (after a `gc.collect()`). The first
`--warmup` calls are left out: they load the library, JIT-compile, fill allocator pools. Reported per
library, over the RSS after the warm-up call and after each later one: the slope (least squares, MB
per call), the growth it amounts to over those calls in percent of the fitted RSS after the warm-up,
the raw difference between the last and the first of them (noisier: RSS swings by tens of MB as the
allocator returns memory), and the change per call in the number of objects the garbage collector
tracks. Exits 1 when any library's growth exceeds `--limit` percent, 3 when a measurement fails.

    python benchmarks/memory_growth.py                       # every library, 50 calls each
    python benchmarks/memory_growth.py --libraries skrl-jax --calls 15 --json
    python benchmarks/memory_growth.py --calls 20 --save     # and the figures as a record

Linux only (`/proc/self/statm`). Results: docs/benchmarks.md, "Memory over repeated calls", from the record
`--save` writes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

import results as records

LIBRARIES: dict[str, dict[str, Any]] = {
    # name: TrainRequest fields
    "rsl_rl": {"library": "rsl_rl", "task": "rlrun/CartPoleContinuous-v1"},
    "skrl-torch": {"library": "skrl", "ml_framework": "torch", "task": "rlrun/CartPole-v1"},
    "skrl-jax": {"library": "skrl", "ml_framework": "jax", "task": "rlrun/CartPole-v1"},
    "sb3": {"library": "sb3", "task": "rlrun/CartPole-v1"},
    "rl_games": {  # one epoch's batch (horizon_length 32 x num_envs) must split into minibatches
        "library": "rl_games",
        "task": "rlrun/CartPole-v1",
        "overrides": ("agent.params.config.minibatch_size=256",),
    },
}
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MB = 1024 * 1024


def rss_bytes() -> int:
    """The resident set size of this process (second field of /proc/self/statm, in pages)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE


def slope(values: list[float]) -> float:
    """Least-squares slope of `values` against their index (0 for fewer than two values)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    return covariance / sum((x - mean_x) ** 2 for x in range(n))


def measure(name: str, calls: int, warmup: int, num_envs: int, iterations: int) -> dict[str, Any]:
    """Make `calls` train calls of library `name` in this process; RSS and object counts after each."""
    import rlrun

    fields = LIBRARIES[name]
    rss: list[int] = []
    objects: list[int] = []
    started = time.perf_counter()
    for call in range(calls):
        with tempfile.TemporaryDirectory(prefix="rlrun-memory-") as log_root:
            rlrun.train(
                rlrun.TrainRequest(
                    **fields, num_envs=num_envs, max_iterations=iterations, seed=call, device="cpu", log_root=log_root
                )
            )
        gc.collect()
        rss.append(rss_bytes())
        objects.append(len(gc.get_objects()))
    measured_rss, measured_objects = rss[warmup - 1 :], objects[warmup - 1 :]
    per_call = slope([value / MB for value in measured_rss])
    trend_start = sum(measured_rss) / len(measured_rss) / MB - per_call * (len(measured_rss) - 1) / 2
    return {
        "library": name,
        "calls": calls,
        "warmup": warmup,
        "seconds": round(time.perf_counter() - started, 1),
        "rss_after_warmup_mb": round(measured_rss[0] / MB, 1),
        "rss_end_mb": round(measured_rss[-1] / MB, 1),
        "growth_percent": round(100 * per_call * (len(measured_rss) - 1) / trend_start, 2),
        "end_to_end_percent": round(100 * (measured_rss[-1] - measured_rss[0]) / measured_rss[0], 2),
        "slope_mb_per_call": round(per_call, 3),
        "objects_per_call": round(slope([float(value) for value in measured_objects]), 1),
        "rss_mb": [round(value / MB, 1) for value in rss],
    }


def run_child(name: str, arguments: argparse.Namespace) -> dict[str, Any]:
    """Measure library `name` in a fresh interpreter, so that no library's memory counts towards another's."""
    command = [
        sys.executable,
        __file__,
        "--child",
        name,
        f"--calls={arguments.calls}",
        f"--warmup={arguments.warmup}",
        f"--num_envs={arguments.num_envs}",
        f"--iterations={arguments.iterations}",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        failure = f"{name}: the measuring process failed (exit {completed.returncode}):\n{completed.stderr}"
        print(failure, file=sys.stderr)
        raise SystemExit(3)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--libraries", nargs="+", choices=list(LIBRARIES), default=list(LIBRARIES))
    parser.add_argument("--calls", type=int, default=50, help="train calls per library (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="calls left out of the figures (default 5)")
    parser.add_argument("--num_envs", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=2, help="max_iterations of each call (default 2)")
    parser.add_argument("--limit", type=float, default=5.0, help="allowed RSS growth in percent (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per library")
    parser.add_argument("--child", choices=list(LIBRARIES), help=argparse.SUPPRESS)
    records.add_argument(parser)
    arguments = parser.parse_args(argv)
    record = records.Record.start(__file__, argv)
    if not 1 <= arguments.warmup < arguments.calls:
        parser.error("--warmup must be at least 1 and below --calls")
    if arguments.child:
        result = measure(arguments.child, arguments.calls, arguments.warmup, arguments.num_envs, arguments.iterations)
        print(json.dumps(result))
        return 0

    failed = []
    if not arguments.json:
        print(f"{arguments.calls} calls per library, {arguments.warmup} of them warm-up; limit {arguments.limit}%")
        header = ("library", "RSS warm", "RSS end", "growth", "raw", "MB/call", "objects/call", "time")
        print("{:<11} {:>9} {:>9} {:>8} {:>8} {:>8} {:>13} {:>7}".format(*header))
    for name in arguments.libraries:
        result = run_child(name, arguments)
        over = result["growth_percent"] > arguments.limit
        failed += [name] * over
        record.add(
            f"RSS growth over {result['calls'] - result['warmup']} `rlrun.train` calls after {result['warmup']} "
            f"warm-up, {name}",
            result["growth_percent"],
            unit="%",
            digits=2,
            goal=("<=", arguments.limit),
            note=f"least-squares fit: {result['slope_mb_per_call']:.3f} MB and {result['objects_per_call']:.1f} "
            f"objects a call; RSS {result['rss_after_warmup_mb']:.0f} -> {result['rss_end_mb']:.0f} MB (last - first "
            f"{result['end_to_end_percent']:.2f}%), {result['seconds']:.0f} s",
        )
        if arguments.json:
            print(json.dumps({**result, "over_limit": over}), flush=True)
            continue
        print(
            f"{name:<11} {result['rss_after_warmup_mb']:>7.0f}MB {result['rss_end_mb']:>7.0f}MB "
            f"{result['growth_percent']:>7.2f}% {result['end_to_end_percent']:>7.2f}% "
            f"{result['slope_mb_per_call']:>8.3f} "
            f"{result['objects_per_call']:>13.1f} {result['seconds']:>6.0f}s" + ("  OVER THE LIMIT" * over),
            flush=True,
        )
    if arguments.save:
        record.save(arguments.save)
    if failed:
        print(f"over {arguments.limit}% RSS growth: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
