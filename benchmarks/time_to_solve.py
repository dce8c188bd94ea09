"""Time to solve: seconds of training until the mean return of the last 100 episodes reaches the target.

Each native task trains with its default library and shipped configuration (what `rlrun train --task T`
does), for `--seeds` seeds; training stops at the first iteration whose metrics row reaches the target
(`rlrun.train(..., on_iteration=...)`), or at `--max_iterations`. Printed per task: each seed's time and
env steps to the target, the median, and CleanRL's published PPO CartPole-v1 figure for scale
(490 +- 6 after 500 k env steps, `ppo.py`, 4 envs, about 2-3 minutes on a CPU).

    python benchmarks/time_to_solve.py [--seeds 1 2 3] [--tasks rlrun/CartPoleContinuous-v1 ...]
        [--agent_config best.yaml] [agent.x=y ...]     # a candidate configuration (e.g. `rlrun tune`'s best.yaml)
        [--save[=PATH]]                                  # the figures as a record (after any agent.x=y)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

import results as records
import rlrun

TARGETS = {"rlrun/CartPoleContinuous-v1": 475.0, "rlrun/CartPole-v1": 475.0, "rlrun/Pendulum-v1": -200.0}
GOALS = {"rlrun/CartPoleContinuous-v1": 4.0}
CLEANRL = "CleanRL PPO CartPole-v1: 490 +- 6 after 500 k env steps"


def solve(
    task: str, seed: int, max_iterations: int, agent_config: str | None = None, overrides: tuple[str, ...] = ()
) -> tuple[float | None, int | None, float]:
    """(seconds to the target, env steps to it, seconds trained) for one seed."""
    reached: list[tuple[float, int]] = []

    def on_iteration(row: rlrun.runs.metrics.IterationRow) -> bool:
        if row.mean_return is not None and row.mean_return >= TARGETS[task] and not reached:
            reached.append((row.wall_s, row.env_steps))
        return bool(reached)

    with tempfile.TemporaryDirectory() as root:
        result = rlrun.train(
            rlrun.TrainRequest(
                task=task,
                seed=seed,
                max_iterations=max_iterations,
                log_root=root,
                agent_config=agent_config,
                overrides=overrides,
            ),
            on_iteration=on_iteration,
        )
    if not reached:
        return None, None, result.wall_time_s
    return reached[0][0], reached[0][1], result.wall_time_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--tasks", nargs="+", default=list(TARGETS))
    parser.add_argument("--max_iterations", type=int, default=500)
    parser.add_argument("--agent_config", default=None, help="a configuration file to train with instead")
    parser.add_argument("overrides", nargs="*", help="agent.x=y overrides")
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)
    print(f"load {os.getloadavg()[0]:.2f}; {CLEANRL}")
    for task in args.tasks:
        times, steps_to = [], []
        for seed in args.seeds:
            seconds, steps, trained = solve(task, seed, args.max_iterations, args.agent_config, tuple(args.overrides))
            shown = "not reached" if seconds is None else f"{seconds:6.2f} s, {steps:,} env steps"
            print(f"{task:<30} seed {seed}: return >= {TARGETS[task]:g} after {shown} (trained {trained:.1f} s)")
            times.append(float("inf") if seconds is None else seconds)
            steps_to.append(steps)
        goal = f" (goal <= {GOALS[task]} s)" if task in GOALS else ""
        print(f"{task:<30} median over seeds {args.seeds}: {statistics.median(times):.2f} s{goal}")
        reached = [count for count in steps_to if count is not None]
        configuration = " ".join(filter(None, (args.agent_config, *args.overrides))) or "shipped configuration"
        record.add(
            f"seconds of training until the mean return reaches {TARGETS[task]:g}, {task} (default library, "
            f"{configuration})",
            statistics.median(times),
            unit="s",
            digits=2,
            spread=(min(times), max(times)),
            spread_kind=f"min-max of seeds {', '.join(map(str, args.seeds))}",
            goal=("<=", GOALS[task]) if task in GOALS else None,
            note=(f"{min(reached):,}-{max(reached):,} env steps" if reached else "no seed reached it")
            + (f", {len(reached)} of {len(times)} seeds reached it" if len(reached) < len(times) else ""),
        )
    print(f"load {os.getloadavg()[0]:.2f}")
    if args.save:
        record.save(args.save)


if __name__ == "__main__":
    main()
