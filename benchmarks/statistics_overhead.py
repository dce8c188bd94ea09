"""What rlrun's episode statistics cost per vector step: the same env stepped bare and through the wrapper.

`rlrun/CartPole-v1` at `--num_envs` environments (4,096 by default), one torch thread, random actions
drawn before timing; bare and wrapped blocks alternate `--pairs` times. Printed: microseconds per step
of each, their difference (the wrapper's cost, goal <= 10 us at 4,096 envs), median and spread, and the
same with the iteration clock (metrics.csv rows, stop checks) as the wrapper's `on_step` hook.

    python benchmarks/statistics_overhead.py [--num_envs 4096] [--steps 2000] [--pairs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rlrun.api.iterations import IterationClock
from rlrun.envs import EpisodeStatistics, make_env


def per_step_us(env, actions) -> float:
    start = time.perf_counter()
    for action in actions:
        env.step(action)
    return (time.perf_counter() - start) / len(actions) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    bare = make_env("rlrun/CartPole-v1", args.num_envs)
    wrapped = EpisodeStatistics(make_env("rlrun/CartPole-v1", args.num_envs))
    with tempfile.TemporaryDirectory() as directory:
        clock = IterationClock(32 * args.num_envs)
        clock.open(Path(directory))
        clocked = EpisodeStatistics(make_env("rlrun/CartPole-v1", args.num_envs), on_step=clock)
        for env in (bare, wrapped, clocked):
            env.reset(seed=0)
        generator = torch.Generator().manual_seed(0)
        actions = [torch.randint(0, 2, (args.num_envs,), generator=generator) for _ in range(args.steps)]
        costs: dict[str, list[float]] = {"wrapper": [], "wrapper + iteration clock": []}
        for _ in range(args.pairs):
            base = per_step_us(bare, actions)
            costs["wrapper"].append(per_step_us(wrapped, actions) - base)
            costs["wrapper + iteration clock"].append(per_step_us(clocked, actions) - per_step_us(bare, actions))
        clock.close()
    print(
        f"rlrun/CartPole-v1, {args.num_envs:,} envs, 1 thread, load {os.getloadavg()[0]:.2f}; bare step {base:.1f} us"
    )
    for name, values in costs.items():
        print(
            f"{name:<28} {statistics.median(values):6.1f} us per step (spread {min(values):.1f} to {max(values):.1f}; "
            "goal <= 10 us)"
        )


if __name__ == "__main__":
    main()
