"""Env-only throughput of Gymnasium MuJoCo and Atari ids through rlrun's own env: EnvPool against SyncVectorEnv and
AsyncVectorEnv.

For each task (HalfCheetah-v5, Hopper-v5, ALE/Pong-v5 with the standard Atari preprocessing) and size (8, 16, 64
envs), the three envs are built once by `rlrun.envs.make_env` (`--vectorization envpool`, `sync`, `async`: the torch
env every library steps), reset and warmed up; then EnvPool and each Gymnasium env alternate (see `alternating.py`)
over `--pairs` pairs, each side stepping `--env_steps` env-steps with random actions drawn before timing. A pair's
ratio is the Gymnasium env's time over EnvPool's: how many times faster EnvPool is. Goals against SyncVectorEnv: >=
1.7x at 16 envs and >= 2x at 64 (8 envs, and AsyncVectorEnv, are context: their goal is 1x). `--e2e N` also
alternates whole PPO trainings of N iterations at each size, sync against envpool, timed by their own steps/s (goal >=
1.3x): RSL-RL's on MuJoCo, SB3's CNN policy on Atari (the library with an image policy; `--e2e_atari M` sets its
iterations, each 128 steps per env and a CNN update, against RSL-RL's 24 steps and an MLP's).

A faster env speeds up only the env's share of a training (Amdahl's law). Each end-to-end row therefore also prints
that share: the sync training's env steps at the env-only SyncVectorEnv rate of the same task and size, over its
training time; the ratio it predicts with EnvPool's env-only ratio; and the bound no env can pass, 1 / (1 - share).

    python benchmarks/envpool_throughput.py [--pairs 5] [--env_steps 20000] [--tasks Hopper-v5] [--sizes 16 64]
        [--no_async] [--e2e ITERATIONS] [--e2e_atari ITERATIONS] [--save [PATH]]
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


def measure(
    task: str, num_envs: int, pairs: int, env_steps: int, with_async: bool
) -> tuple[dict[str, Summary], dict[str, float]]:
    """The alternating comparisons of EnvPool against each Gymnasium vectorization, for one task and size, and each
    side's median env-steps/s."""
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
        rates = {name: env_steps / statistics.median(times[name]) for name in sides}
        print(f"  median env-steps/s: {', '.join(f'{name} {rate:,.0f}' for name, rate in rates.items())}", flush=True)
        return out, rates
    finally:
        for env in envs.values():
            env.close()


def library_of(task: str) -> str:
    """The library whose PPO the end-to-end comparison trains on `task`: SB3's CNN policy on Atari, else RSL-RL."""
    return "sb3" if is_atari(task) else "rsl_rl"


def training(
    task: str, num_envs: int, iterations: int, vectorization: str, steps: list[int] | None = None
) -> Callable[[], float]:
    """A side of the end-to-end comparison: a PPO training on `task` (`library_of`); returns its training seconds
    (env steps over rlrun's steps/s, without the call's setup), and appends its env steps to `steps` if given."""

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
        if steps is not None:
            steps.append(result.env_steps)
        return result.env_steps / result.steps_per_s

    return run


def amdahl(share: float, env_ratio: float) -> tuple[float, float]:
    """The end-to-end ratios Amdahl's law gives when a training spends `share` of its time stepping the env: with
    that part `env_ratio` times as fast, and with it free (the bound)."""
    rest = 1.0 - share
    return 1.0 / (rest + share / env_ratio), 1.0 / max(rest, 1e-9)


def end_to_end(
    task: str, num_envs: int, iterations: int, pairs: int, rates: dict[str, float]
) -> tuple[Summary, tuple[float, float, float]]:
    """EnvPool against SyncVectorEnv in whole PPO trainings (`library_of`): the ratio of their training times, and
    the env's share of the sync training with the two ratios Amdahl's law gives (`amdahl`). `rates` are the
    env-only env-steps/s of this task and size (`measure`)."""
    steps: list[int] = []
    times: list[float] = []
    sync = recorded(training(task, num_envs, iterations, "sync", steps), times)
    pool = training(task, num_envs, iterations, "envpool")
    sync(), pool()  # warm-up: imports, file cache
    said = f"{task}, {num_envs} envs: {library_of(task)} PPO, {iterations} iterations, sync / envpool training time"
    print(said, flush=True)
    summary = alternate(pairs, sync, pool, names=("sync", "envpool"), goal=E2E_GOAL, unit="x", digits=2)
    share = min(steps[-1] / rates["sync"] / statistics.median(times), 1.0)
    predicted, bound = amdahl(share, rates["envpool"] / rates["sync"])
    print(
        f"  env steps are {share:.0%} of the sync training (env-only rate); Amdahl: {predicted:.2f}x at EnvPool's "
        f"env-only ratio, at most {bound:.2f}x with an env that costs nothing",
        flush=True,
    )
    return summary, (share, predicted, bound)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--env_steps", type=int, default=20_000, help="env-steps each side steps per pair")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--sizes", nargs="*", type=int, default=list(SIZES))
    parser.add_argument("--no_async", action="store_true", help="leave AsyncVectorEnv out (one process per env)")
    parser.add_argument("--e2e", type=int, default=0, metavar="ITERATIONS", help="also time PPO trainings this long")
    parser.add_argument("--e2e_atari", type=int, default=1, metavar="ITERATIONS", help="the same on Atari ids")
    records.add_argument(parser)
    args = parser.parse_args(argv)
    record = records.Record.start(__file__, argv)
    torch.set_num_threads(1)  # the envs' own threads are what is measured; torch only converts

    results: dict[str, Summary | str] = {}
    rates: dict[tuple[str, int], dict[str, float]] = {}
    shares: dict[str, tuple[float, float, float]] = {}
    for task in args.tasks:
        for num_envs in args.sizes:
            summaries, rates[task, num_envs] = measure(task, num_envs, args.pairs, args.env_steps, not args.no_async)
            for other, summary in summaries.items():
                results[f"{task} {num_envs} {other}"] = summary
    if args.e2e:
        for task in args.tasks:
            for num_envs in args.sizes:
                iterations = args.e2e_atari if is_atari(task) else args.e2e
                row = f"{task} {num_envs} ppo"
                results[row], shares[row] = end_to_end(task, num_envs, iterations, args.pairs, rates[task, num_envs])
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
            if row in shares:
                share, predicted, bound = shares[row]
                record.add(
                    f"Env steps' share of a sync {library_of(task)} PPO training, {task}, {num_envs} envs",
                    100 * share,
                    unit="%",
                    digits=0,
                    note=f"Amdahl: {predicted:.2f}x at EnvPool's env-only ratio, at most {bound:.2f}x",
                )
        record.save(args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
