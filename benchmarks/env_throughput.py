"""Env-only throughput of rlrun/CartPole-v1 against Gymnasium's CartPole-v1 in a SyncVectorEnv.

Both run in this process, one after the other, with random actions drawn before timing starts.
Gymnasium's own NumPy `CartPoleVectorEnv` (its `vector_entry_point`, NEXT_STEP autoreset) is
printed for context. Each rate is the best of `BLOCKS` timed blocks, the one least disturbed by
other processes: torch runs sin/cos on a few thousand elements on all its threads, so a busy CPU
slows the torch env far more than the single-threaded NumPy ones.

    python benchmarks/env_throughput.py [--num_envs 4096] [--steps 1000] [--device cpu] [--threads N]

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

from rlrun.envs import make_env

WARMUP_STEPS = 10
BLOCKS = 5


def best_rate(step: Callable[[int], object], num_envs: int, steps: int, wait: Callable[[], object]) -> float:
    """Run `step(t)` for t in [0, WARMUP_STEPS + steps); return the best env-steps/s over BLOCKS blocks."""
    for t in range(WARMUP_STEPS):
        step(t)
    block = max(steps // BLOCKS, 1)
    best = 0.0
    for start in range(WARMUP_STEPS, WARMUP_STEPS + BLOCKS * block, block):
        wait()
        begin = time.perf_counter()
        for t in range(start, start + block):
            step(t)
        wait()
        best = max(best, num_envs * block / (time.perf_counter() - begin))
    return best


def native_rate(num_envs: int, steps: int, device: str) -> float:
    """Env-steps/s of rlrun's torch CartPole on `device`."""
    env = make_env("rlrun/CartPole-v1", num_envs, device=device)
    generator = torch.Generator(device=env.device).manual_seed(0)
    actions = torch.randint(0, 2, (WARMUP_STEPS + steps, num_envs), generator=generator, device=env.device)
    env.reset(seed=0)
    wait = torch.cuda.synchronize if env.device.type == "cuda" else lambda: None
    rate = best_rate(lambda t: env.step(actions[t]), num_envs, steps, wait)
    env.close()
    return rate


def gymnasium_rate(num_envs: int, steps: int, vectorization_mode: str) -> float:
    """Env-steps/s of Gymnasium's CartPole-v1 (NumPy) vectorized by `vectorization_mode`."""
    vector_kwargs = {"autoreset_mode": AutoresetMode.SAME_STEP} if vectorization_mode == "sync" else {}
    env = gymnasium.make_vec(
        "CartPole-v1", num_envs, vectorization_mode=vectorization_mode, vector_kwargs=vector_kwargs
    )
    actions = np.random.default_rng(0).integers(0, 2, (WARMUP_STEPS + steps, num_envs))
    env.reset(seed=0)
    rate = best_rate(lambda t: env.step(actions[t]), num_envs, steps, lambda: None)
    env.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=1000, help="timed steps of rlrun/CartPole-v1")
    parser.add_argument("--sync_steps", type=int, default=30, help="timed steps of the SyncVectorEnv")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own default)")
    args = parser.parse_args()

    default_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads or default_threads)
    try:
        native = native_rate(args.num_envs, args.steps, args.device)
    finally:
        torch.set_num_threads(default_threads)
    sync = gymnasium_rate(args.num_envs, args.sync_steps, "sync")
    numpy_vector = gymnasium_rate(args.num_envs, args.steps, "vector_entry_point")
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


if __name__ == "__main__":
    main()
