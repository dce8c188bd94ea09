"""What rlrun's episode statistics cost per vector step: one env stepped bare and through the wrapper.

`rlrun/CartPole-v1` at `--num_envs` environments (4,096 by default), one torch thread, random actions drawn
before timing (about 180 episodes end in each step: the wrapper's worst case; a trained policy ends far
fewer). The same env instance is stepped in short blocks, alternately bare (`env.step`) and through the
wrapper (`EpisodeStatistics(env).step`), so both sides step the same memory at the same moment of the
machine's load; the wrapper's cost is each wrapped block's time per step minus the bare block's before it.
Printed: the bare step, the wrapper's cost (median of the `--blocks` pairs, and the spread between their
quartiles) against the goal (<= 10 us at 4,096 envs), and the same with the iteration clock (metrics.csv
rows, stop checks) as the wrapper's `on_step` hook.

    python benchmarks/statistics_overhead.py [--num_envs 4096] [--block 50] [--blocks 200]
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

GOAL_US = 10.0


def per_step_us(step, actions) -> float:
    start = time.perf_counter()
    for action in actions:
        step(action)
    return (time.perf_counter() - start) / len(actions) * 1e6


def quartiles(values: list[float]) -> tuple[float, float, float]:
    low, median, high = statistics.quantiles(values, n=4)
    return low, median, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num_envs", type=int, default=4096)
    parser.add_argument("--block", type=int, default=50, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=200, help="pairs of blocks per row")
    args = parser.parse_args()
    torch.set_num_threads(1)
    env = make_env("rlrun/CartPole-v1", args.num_envs)
    generator = torch.Generator().manual_seed(0)
    actions = [torch.randint(0, 2, (args.num_envs,), generator=generator) for _ in range(args.block)]
    with tempfile.TemporaryDirectory() as directory:
        clock = IterationClock(32 * args.num_envs)
        clock.open(Path(directory))
        wrappers = {
            "wrapper": EpisodeStatistics(env),
            "wrapper + iteration clock": EpisodeStatistics(env, on_step=clock),
        }
        env.reset(seed=0)
        for wrapper in wrappers.values():
            per_step_us(wrapper.step, actions)  # warm up (and let episodes start ending)
        bare: list[float] = []
        costs: dict[str, list[float]] = {name: [] for name in wrappers}
        for _ in range(args.blocks):
            for name, wrapper in wrappers.items():
                base = per_step_us(env.step, actions)
                bare.append(base)
                costs[name].append(per_step_us(wrapper.step, actions) - base)
        clock.close()
    print(
        f"rlrun/CartPole-v1, {args.num_envs:,} envs ({env.kernel} step), 1 thread, {args.blocks} pairs of "
        f"{args.block}-step blocks, load {os.getloadavg()[0]:.2f}; bare step {statistics.median(bare):.1f} us"
    )
    for name, values in costs.items():
        low, median, high = quartiles(values)
        verdict = "met" if median <= GOAL_US else "not met"
        print(
            f"{name:<28} {median:6.1f} us per step (quartiles {low:.1f} to {high:.1f}; goal <= {GOAL_US:.0f} us: "
            f"{verdict})"
        )


if __name__ == "__main__":
    main()
