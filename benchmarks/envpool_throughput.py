"""Env-only throughput of Gymnasium MuJoCo and Atari ids through rlrun's own env: EnvPool against SyncVectorEnv and
AsyncVectorEnv.

For each task (HalfCheetah-v5, Hopper-v5, ALE/Pong-v5 with the standard Atari preprocessing) and size (8, 16, 64
envs), the three envs are built once by `rlrun.envs.make_env` (`--vectorization envpool`, `sync`, `async`: the torch
env every library steps), reset and warmed up; then EnvPool and each Gymnasium env alternate (see `alternating.py`)
over `--pairs` pairs, each side stepping `--env_steps` env-steps with random actions drawn before timing. A pair's
ratio is the Gymnasium env's time over EnvPool's: how many times faster EnvPool is. Goals against SyncVectorEnv: >=
1.7x at 16 envs and >= 2x at 64 (8 envs, and AsyncVectorEnv, are context: their goal is 1x). `--e2e N` also
alternates whole PPO trainings of N iterations at 16 envs, sync against envpool, timed by their own steps/s (goal >=
1.3x): RSL-RL's on MuJoCo, SB3's CNN policy on Atari (the library with an image policy).

    python benchmarks/envpool_throughput.py [--pairs 5] [--env_steps 20000] [--tasks Hopper-v5] [--sizes 16 64]
        [--no_async] [--e2e ITERATIONS] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable

import gymnasium
import torch

import results as records
import rlrun
from alternating import Summary, alternate, print_table, timed
from rlrun.envs import make_env
from rlrun.envs.atari import is_atari

TASKS = ("HalfCheetah-v5", "Hopper-v5", "ALE/Pong-v5")
SIZES = (8, 16, 64)
GOALS = {16: 1.7, 64: 2.0}
"""Goals of EnvPool / SyncVectorEnv by number of envs; other sizes and AsyncVectorEnv are context (1x)."""
WARMUP_STEPS = 20
E2E_GOAL = 1.3
E2E_ENVS = 16


def goal_of(row: str) -> float:
    """The goal of a results row (`"Hopper-v5 16 sync"`): its size's against Sync, 1.3x end to end, else 1x."""
    _, num_envs, other = row.split()
    return {"sync": GOALS.get(int(num_envs), 1.0), "ppo": E2E_GOAL}.get(other, 1.0)


def stepper(env, num_envs: int, env_steps: int) -> Callable[[], float]:
    """A side: step `env` for `env_steps` env-steps with pre-drawn random actions; return the seconds it took."""
    steps = max(env_steps // num_envs, 1)
    generator = torch.Generator().manual_seed(0)
    space = env.single_action_space
    if isinstance(space, gymnasium.spaces.Discrete):
        actions = torch.randint(int(space.n), (steps, num_envs), generator=generator)
    else:
        actions = torch.rand(steps, *env.action_space.shape, generator=generator) * 2 - 1
    for t in range(WARMUP_STEPS):
        env.step(actions[t % steps])

    def run() -> float:
        def body() -> None:
            for t in range(steps):
                env.step(actions[t])

        return timed(body)

    return run


def recorded(side: Callable[[], float], times: list[float]) -> Callable[[], float]:
    """`side`, keeping each of its durations in `times`."""

    def run() -> float:
        times.append(side())
        return times[-1]

    return run


def measure(task: str, num_envs: int, pairs: int, env_steps: int, with_async: bool) -> dict[str, Summary]:
    """The alternating comparisons of EnvPool against each Gymnasium vectorization, for one task and size."""
    sides = ("envpool", "sync", *(("async",) if with_async else ()))
    envs = {name: make_env(task, num_envs, vectorization=name) for name in sides}
    try:
        for seed, env in enumerate(envs.values()):
            env.reset(seed=seed)
        times: dict[str, list[float]] = {name: [] for name in sides}
        run = {name: recorded(stepper(env, num_envs, env_steps), times[name]) for name, env in envs.items()}
        out = {}
        for other in sides[1:]:
            goal = GOALS.get(num_envs, 1.0) if other == "sync" else 1.0
            print(f"{task}, {num_envs} envs: {other} / envpool, {env_steps} env-steps a side", flush=True)
            out[other] = alternate(
                pairs, run[other], run["envpool"], names=(other, "envpool"), goal=goal, unit="x", digits=2
            )
        rates = ", ".join(f"{name} {env_steps / statistics.median(times[name]):,.0f}" for name in sides)
        print(f"  median env-steps/s: {rates}", flush=True)
        return out
    finally:
        for env in envs.values():
            env.close()


def library_of(task: str) -> str:
    """The library whose PPO the end-to-end comparison trains on `task`: SB3's CNN policy on Atari, else RSL-RL."""
    return "sb3" if is_atari(task) else "rsl_rl"


def training(task: str, num_envs: int, iterations: int, vectorization: str) -> Callable[[], float]:
    """A side of the end-to-end comparison: a PPO training on `task` (`library_of`); returns its training seconds
    (env steps over rlrun's steps/s, without the call's setup)."""

    def run() -> float:
        with tempfile.TemporaryDirectory() as root:
            result = rlrun.train(
                rlrun.TrainRequest(
                    task=task,
                    library=library_of(task),
                    num_envs=num_envs,
                    max_iterations=iterations,
                    seed=0,
                    vectorization=vectorization,
                    log_root=root,
                )
            )
        return result.env_steps / result.steps_per_s

    return run


def end_to_end(task: str, num_envs: int, iterations: int, pairs: int) -> Summary:
    """EnvPool against SyncVectorEnv in whole PPO trainings (`library_of`): the ratio of their training times."""
    sync, pool = training(task, num_envs, iterations, "sync"), training(task, num_envs, iterations, "envpool")
    sync(), pool()  # warm-up: imports, file cache
    said = f"{task}, {num_envs} envs: {library_of(task)} PPO, {iterations} iterations, sync / envpool training time"
    print(said, flush=True)
    return alternate(pairs, sync, pool, names=("sync", "envpool"), goal=E2E_GOAL, unit="x", digits=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--env_steps", type=int, default=20_000, help="env-steps each side steps per pair")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--no_async", action="store_true", help="leave AsyncVectorEnv out (one process per env)")
    parser.add_argument("--e2e", type=int, default=0, metavar="ITERATIONS", help="also time RSL-RL PPO trainings")
    records.add_argument(parser)
    args = parser.parse_args(argv)
    record = records.Record.start(__file__, argv)
    torch.set_num_threads(1)  # the envs' own threads are what is measured; torch only converts

    results: dict[str, Summary | str] = {}
    for task in args.tasks:
        for num_envs in args.sizes:
            for other, summary in measure(task, num_envs, args.pairs, args.env_steps, not args.no_async).items():
                results[f"{task} {num_envs} {other}"] = summary
    if args.e2e:
        for task in args.tasks:
            results[f"{task} {E2E_ENVS} ppo"] = end_to_end(task, E2E_ENVS, args.e2e, args.pairs)
    goals = {row: goal_of(row) for row in results if goal_of(row) > 1.0}
    goal_rows = tuple(goals)
    for goal in sorted(set(goals.values())):
        rows = tuple(row for row in goal_rows if goals[row] == goal)
        if rows:
            print_table({row: results[row] for row in rows}, rows, goal, "x", digits=2)
    context = {row: result for row, result in results.items() if row not in goal_rows}
    if context:
        print("\ncontext (goal 1x):")
        for row, result in context.items():
            print(f"{row:<24} {result.line('x', digits=2) if isinstance(result, Summary) else result}")
    if args.save:
        for row, result in results.items():
            task, num_envs, other = row.split()
            label = f"EnvPool / {other.capitalize()}VectorEnv env-only steps/s, {task}, {num_envs} envs"
            if other == "ppo":
                label = f"EnvPool / SyncVectorEnv {library_of(task)} PPO training steps/s, {task}, {num_envs} envs"
            if isinstance(result, Summary):
                record.add_summary(label, result, unit="x", digits=2)
        record.save(args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
