"""Env-only steps/s of rlrun's native torch tasks against NumPy vector envs of the same physics, on the CPU.

References, each stepped like the native task with random actions drawn before timing:
- `rlrun/CartPole-v1` and `rlrun/CartPoleContinuous-v1`: Gymnasium's NumPy `CartPoleVectorEnv`, the
  `vector_entry_point` of `CartPole-v1` (discrete actions; the continuous task has the same physics).
- `rlrun/Pendulum-v1`: `NumpyPendulum` below, Gymnasium's `PendulumEnv` equations over a NumPy batch,
  written as Gymnasium writes `CartPoleVectorEnv`.
Both references autoreset in NEXT_STEP mode and return no final observations, so they do less work
per step than the native tasks (SAME_STEP, `final_obs` in the infos).

Native and reference run in this process, alternating (ABBA order within each pair), at 1 torch thread
and at torch's default thread count. Each timed block is about `--env_steps` env-steps; the ratio
native / reference is computed per pair and the median of `--pairs` pairs is printed with its spread
(min-max). The load average before and after is printed: on a shared machine the spread is the figure
to read first.

    python benchmarks/env_vs_numpy.py [--num_envs 256 4096 65536] [--pairs 5] [--tasks ...] [--threads 1 default]
        [--save [PATH]]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import torch

import results as records
from alternating import sided
from rlrun.envs import make_env

GOALS = {4096: 1.0, 65536: 2.0}
"""The goals: native / NumPy at least 1.0x at 4,096 envs and 2.0x at 65,536."""


class NumpyPendulum:
    """Gymnasium 1.4.0's `PendulumEnv.step` over a NumPy batch (state `[2, num_envs]` float64), with a time
    limit and NEXT_STEP autoreset as in Gymnasium's `CartPoleVectorEnv`."""

    def __init__(self, num_envs: int, max_episode_steps: int = 200, g: float = 10.0):
        self.num_envs, self.max_episode_steps = num_envs, max_episode_steps
        self.max_speed, self.max_torque, self.dt, self.g, self.m, self.l = 8, 2.0, 0.05, g, 1.0, 1.0
        self.high = np.array([[np.pi], [1.0]])
        self.np_random = np.random.default_rng()
        self.state = np.zeros((2, num_envs))
        self.steps = np.zeros(num_envs, dtype=np.int32)
        self.prev_done = np.zeros(num_envs, dtype=np.bool_)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(low=-self.high, high=self.high, size=(2, self.num_envs))
        self.steps[:] = 0
        self.prev_done[:] = False
        return self._get_obs(), {}

    def step(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        th, thdot = self.state
        g, m, l, dt = self.g, self.m, self.l, self.dt  # noqa: E741
        u = np.clip(u[:, 0], -self.max_torque, self.max_torque)
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)
        newthdot = thdot + (3 * g / (2 * l) * np.sin(th) + 3.0 / (m * l**2) * u) * dt
        newthdot = np.clip(newthdot, -self.max_speed, self.max_speed)
        newth = th + newthdot * dt
        self.state = np.stack((newth, newthdot))
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        reward = (-costs).astype(np.float32)
        ended = self.prev_done
        self.state[:, ended] = self.np_random.uniform(low=-self.high, high=self.high, size=(2, ended.sum()))
        self.steps[ended] = 0
        reward[ended] = 0.0
        truncated[ended] = False
        self.prev_done = terminated | truncated
        return self._get_obs(), reward, terminated, truncated, {}

    def _get_obs(self) -> np.ndarray:
        th, thdot = self.state
        return np.stack((np.cos(th), np.sin(th), thdot), axis=1).astype(np.float32)


def angle_normalize(x: np.ndarray) -> np.ndarray:
    return ((x + np.pi) % (2 * np.pi)) - np.pi


def reference(task: str, num_envs: int) -> Any:
    """The NumPy env that `task` is measured against."""
    if task == "rlrun/Pendulum-v1":
        return NumpyPendulum(num_envs)
    return gymnasium.make_vec("CartPole-v1", num_envs, vectorization_mode="vector_entry_point")


def action_batches(native: Any, task: str, count: int = 16) -> tuple[list[torch.Tensor], list[np.ndarray]]:
    """`count` batches of random actions: as torch tensors for `native`, as NumPy arrays for the reference
    (discrete pushes in the direction of the continuous cart-pole's force)."""
    rng = np.random.default_rng(0)
    space = native.single_action_space
    torch_batches, numpy_batches = [], []
    for _ in range(count):
        if isinstance(space, gymnasium.spaces.Discrete):
            actions = rng.integers(0, 2, native.num_envs)
            torch_batches.append(torch.from_numpy(actions.copy()))
            numpy_batches.append(actions)
            continue
        actions = rng.uniform(-1.5 * space.high, 1.5 * space.high, (native.num_envs, 1)).astype(np.float32)
        torch_batches.append(torch.from_numpy(actions.copy()))
        numpy_batches.append(actions if task == "rlrun/Pendulum-v1" else (actions[:, 0] > 0).astype(np.int64))
    return torch_batches, numpy_batches


def timed(step: Callable[[Any], object], actions: list[Any], steps: int) -> float:
    """Seconds for `steps` calls of `step`, cycling through `actions`."""
    begin = time.perf_counter()
    for t in range(steps):
        step(actions[t % len(actions)])
    return time.perf_counter() - begin


def measure(task: str, num_envs: int, pairs: int, env_steps: int, kernel: str) -> dict[str, Any]:
    """Alternate native and NumPy blocks; return per-pair rates and ratios."""
    native = make_env(task, num_envs, env_kwargs={"kernel": kernel} if kernel != "auto" else None)
    step_kind = getattr(native, "kernel", "eager")
    numpy_env = reference(task, num_envs)
    native_actions, numpy_actions = action_batches(native, task)
    native.reset(seed=0)
    numpy_env.reset(seed=0)
    steps = max(30, env_steps // num_envs)
    timed(native.step, native_actions, max(10, steps // 5))  # warm up caches and allocator
    timed(numpy_env.step, numpy_actions, max(10, steps // 5))
    native_rates, numpy_rates = [], []
    for pair in range(pairs):
        order = ("native", "numpy") if pair % 2 == 0 else ("numpy", "native")
        seconds = {}
        for side in order:
            if side == "native":
                seconds[side] = timed(native.step, native_actions, steps)
            else:
                seconds[side] = timed(numpy_env.step, numpy_actions, steps)
        native_rates.append(num_envs * steps / seconds["native"])
        numpy_rates.append(num_envs * steps / seconds["numpy"])
    native.close()
    if hasattr(numpy_env, "close"):
        numpy_env.close()
    ratios = [a / b for a, b in zip(native_rates, numpy_rates, strict=True)]
    return {
        "native": statistics.median(native_rates),
        "numpy": statistics.median(numpy_rates),
        "ratio": statistics.median(ratios),
        "low": min(ratios),
        "high": max(ratios),
        "step": step_kind,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_envs", type=int, nargs="+", default=[256, 4096, 65536])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--env_steps", type=int, default=2**21, help="env-steps per timed block (at least 30 steps)")
    parser.add_argument(
        "--tasks", nargs="+", default=["rlrun/CartPole-v1", "rlrun/CartPoleContinuous-v1", "rlrun/Pendulum-v1"]
    )
    parser.add_argument("--threads", nargs="+", default=["1", "default"], help="torch thread counts, or 'default'")
    parser.add_argument(
        "--kernel", default="auto", choices=["auto", "compiled", "eager"], help="env.kernel of the native tasks"
    )
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)

    default_threads = torch.get_num_threads()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {torch.__version__}, numpy {np.__version__}, gymnasium {gymnasium.__version__}"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    header = f"{'task':<30}{'threads':>8}{'envs':>8}{'step':>9}{'native M/s':>12}{'NumPy M/s':>11}{'ratio':>8}   spread"
    print(header)
    print("-" * len(header))
    try:
        for threads in args.threads:
            count = default_threads if threads == "default" else int(threads)
            torch.set_num_threads(count)
            for task in args.tasks:
                for num_envs in args.num_envs:
                    row = measure(task, num_envs, args.pairs, args.env_steps, args.kernel)
                    goal = GOALS.get(num_envs)
                    verdict, ratio = "", f"{row['ratio']:.2f}"
                    if goal is not None:
                        verdict = f"  goal >= {goal:.1f}x: {'met' if row['ratio'] >= goal else 'NOT met'}"
                        ratio = sided(row["ratio"], goal, digits=2)  # 1.996 prints 1.996x, not 2.00x NOT met
                    label = f"{count} ({threads})" if threads == "default" else str(count)
                    print(
                        f"{task:<30}{label:>8}{num_envs:>8}{row['step']:>9}"
                        f"{row['native'] / 1e6:>12.2f}{row['numpy'] / 1e6:>11.2f}"
                        f"{ratio:>7}x   {row['low']:.2f}-{row['high']:.2f}{verdict}",
                        flush=True,
                    )
                    record.add(
                        f"native / NumPy env-only steps/s, {task}, {num_envs:,} envs, {label} torch "
                        f"thread{'s' * (count != 1)}, {row['step']} step",
                        row["ratio"],
                        unit="x",
                        digits=2,
                        spread=(row["low"], row["high"]),
                        spread_kind=f"min-max of {args.pairs} pair{'s' * (args.pairs != 1)}",
                        goal=None if goal is None else (">=", goal),
                        note=f"native {row['native'] / 1e6:.2f} M/s, NumPy {row['numpy'] / 1e6:.2f} M/s",
                    )
    finally:
        torch.set_num_threads(default_threads)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.save:
        record.save(args.save)


if __name__ == "__main__":
    main()
