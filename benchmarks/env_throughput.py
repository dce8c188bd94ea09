"""Env-only throughput of rlrun/CartPole-v1 against Gymnasium's CartPole-v1 in a SyncVectorEnv.

Both run in this process, one after the other, with random actions drawn before timing starts.
Gymnasium's own NumPy `CartPoleVectorEnv` (its `vector_entry_point`, NEXT_STEP autoreset) is
printed for context. Each rate is the best of `BLOCKS` timed blocks, the one least disturbed by
other processes: torch runs sin/cos on a few thousand elements on all its threads, so a busy CPU
slows the torch env far more than the single-threaded NumPy ones.

    python benchmarks/env_throughput.py [--num_envs 4096] [--steps 1000] [--device cpu] [--threads N] [--save [PATH]]

`benchmarks/env_vs_numpy.py` measures the native tasks against NumPy vector envs, alternating.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import results as records
from rlrun.envs import make_env

WARMUP_STEPS = 10
BLOCKS = 5


def block_rates(step: Callable[[int], object], num_envs: int, steps: int, wait: Callable[[], object]) -> list[float]:
    """Run `step(t)` for t in [0, WARMUP_STEPS + steps); return the env-steps/s of each of BLOCKS blocks (the
    best of them is the figure)."""
    for t in range(WARMUP_STEPS):
        step(t)
    block = max(steps // BLOCKS, 1)
    rates = []
    for start in range(WARMUP_STEPS, WARMUP_STEPS + BLOCKS * block, block):
        wait()
        begin = time.perf_counter()
        for t in range(start, start + block):
            step(t)
        wait()
        rates.append(num_envs * block / (time.perf_counter() - begin))
    return rates


def native_rate(num_envs: int, steps: int, device: str) -> list[float]:
    """Env-steps/s of rlrun's torch CartPole on `device`, per block."""
    env = make_env("rlrun/CartPole-v1", num_envs, device=device)
    generator = torch.Generator(device=env.device).manual_seed(0)
    actions = torch.randint(0, 2, (WARMUP_STEPS + steps, num_envs), generator=generator, device=env.device)
    env.reset(seed=0)
    wait = torch.cuda.synchronize if env.device.type == "cuda" else lambda: None
    rates = block_rates(lambda t: env.step(actions[t]), num_envs, steps, wait)
    env.close()
    return rates


def gymnasium_rate(num_envs: int, steps: int, vectorization_mode: str) -> list[float]:
    """Env-steps/s of Gymnasium's CartPole-v1 (NumPy) vectorized by `vectorization_mode`, per block."""
    vector_kwargs = {"autoreset_mode": AutoresetMode.SAME_STEP} if vectorization_mode == "sync" else {}
    env = gymnasium.make_vec(
        "CartPole-v1", num_envs, vectorization_mode=vectorization_mode, vector_kwargs=vector_kwargs
    )
    actions = np.random.default_rng(0).integers(0, 2, (WARMUP_STEPS + steps, num_envs))
    env.reset(seed=0)
    rates = block_rates(lambda t: env.step(actions[t]), num_envs, steps, lambda: None)
    env.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=1000, help="timed steps of rlrun/CartPole-v1")
    parser.add_argument("--sync_steps", type=int, default=30, help="timed steps of the SyncVectorEnv")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own default)")
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)

    default_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads or default_threads)
    try:
        native_rates = native_rate(args.num_envs, args.steps, args.device)
    finally:
        torch.set_num_threads(default_threads)
    sync_rates = gymnasium_rate(args.num_envs, args.sync_steps, "sync")
    numpy_rates = gymnasium_rate(args.num_envs, args.steps, "vector_entry_point")
    native, sync, numpy_vector = max(native_rates), max(sync_rates), max(numpy_rates)
    print(
        f"num_envs={args.num_envs}, torch threads {args.threads or default_threads}, "
        f"torch {torch.__version__}, gymnasium {gymnasium.__version__}"
    )
    for label, rate in (
        (f"rlrun/CartPole-v1 (torch, {args.device})", native),
        ("CartPole-v1 in SyncVectorEnv", sync),
        ("CartPole-v1 vector_entry_point (NumPy, context)", numpy_vector),
    ):
        print(f"  {label:<50}{rate:>14,.0f} steps/s")
    print(f"ratio rlrun / SyncVectorEnv: {native / sync:,.0f}x (goal >= 100x)")
    threads = args.threads or default_threads
    where = f"{args.num_envs:,} envs"
    native_label = f"rlrun/CartPole-v1 (torch, {args.device}, {threads} thread{'s' * (threads != 1)})"
    for label, rates in (
        (f"env-only steps/s, {native_label}", native_rates),
        ("env-only steps/s, Gymnasium CartPole-v1 in SyncVectorEnv", sync_rates),
        ("env-only steps/s, Gymnasium CartPole-v1 vector_entry_point (NumPy, context)", numpy_rates),
    ):
        record.add(
            f"{label}, {where}",
            max(rates),
            unit="steps/s",
            digits=0,
            spread=(min(rates), max(rates)),
            spread_kind=f"min-max of {len(rates)} blocks; the figure is the best",
        )
    record.add(
        f"rlrun/CartPole-v1 / SyncVectorEnv env-only steps/s, {where}",
        native / sync,
        unit="x",
        digits=0,
        goal=(">=", 100.0),
        note="the ratio of the best blocks",
    )
    if args.save:
        record.save(args.save)


if __name__ == "__main__":
    main()
