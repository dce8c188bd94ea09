"""Every GPU figure in one call (run by benchmarks/gpu.sh on a machine with CUDA), in under 5 minutes.

1. Env-only steps/s of every native task at 2^16 .. 2^22 environments, random actions drawn on the device
   in the timed loop, the best of 3 timed blocks after a warm-up; eagerly, and with the same steps captured
   in a CUDA graph (`torch.cuda.graph`, 16 steps a replay), with the graph's ratio to the eager step. Goal:
   at least 1e9 `rlrun/CartPole-v1` steps/s at 2^20 envs on an H200.
2. End-to-end RSL-RL PPO on `rlrun/CartPoleContinuous-v1` at 4,096 envs (env steps of the whole training
   over its wall time), beside Isaac Lab's published 510 k steps/s for its Cartpole on an RTX 4090.
3. The torch flag policies on the device: a training call with the leak detector on (`check_leaks=True`,
   the census), and the TF32 / cuDNN flags read before, inside (through the iteration hook) and after it.

Each part runs on its own: one that fails prints its error and the others still run; the exit status is 1
if any failed. `--device cpu --quick` runs the same code at tiny sizes without a GPU (no graphs): the test
suite's smoke run.

    python benchmarks/gpu.py [--device cuda] [--quick] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch

import results as records
import rlrun
from alternating import sided
from rlrun.envs import NATIVE_TASKS, make_env

ISAAC_LAB_CARTPOLE = 510_000
"""Isaac Lab's published training throughput for its Cartpole (direct workflow) on an RTX 4090, steps/s."""
GOAL_STEPS_PER_S, GOAL_TASK, GOAL_EXPONENT = 1e9, "rlrun/CartPole-v1", 20
GRAPH_STEPS = 16
"""Env steps captured in one CUDA graph replay."""


def sampler(env: Any) -> Callable[[], torch.Tensor]:
    """Random actions of the env's single action space for every env, drawn on its device."""
    space, num_envs, device = env.single_action_space, env.num_envs, env.device
    if hasattr(space, "n"):
        return lambda: torch.randint(0, int(space.n), (num_envs,), device=device)
    low = torch.as_tensor(space.low, device=device)
    high = torch.as_tensor(space.high, device=device)
    return lambda: low + (high - low) * torch.rand((num_envs, *space.shape), device=device)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def block_rates(run_block: Callable[[], None], steps_per_block: int, num_envs: int, device: str) -> list[float]:
    """3 timed blocks, each in env steps per second (the best of them is the figure)."""
    rates = []
    for _ in range(3):
        synchronize(device)
        start = time.perf_counter()
        run_block()
        synchronize(device)
        rates.append(steps_per_block * num_envs / (time.perf_counter() - start))
    return rates


def env_only(task: str, num_envs: int, device: str, steps: int) -> tuple[list[float], list[float] | str]:
    """Eager steps/s, and the CUDA graph's steps/s (or why there is none) of `task` at `num_envs`, per block."""
    env = make_env(task, num_envs, device=device)
    try:
        env.reset(seed=0)
        actions = sampler(env)

        def eager_block(count: int = steps) -> None:
            for _ in range(count):
                env.step(actions())

        eager_block(10)  # warm-up: the caching allocator, cuBLAS-free kernels' first launches
        eager = block_rates(eager_block, steps, num_envs, device)
        if not device.startswith("cuda"):
            return eager, "no graphs off CUDA"
        try:
            graph = capture(env, actions)
        except Exception as error:  # a step that cannot be captured is a finding
            return eager, f"capture failed: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
        replays = max(1, steps // GRAPH_STEPS)

        def graph_block() -> None:
            for _ in range(replays):
                graph.replay()

        graph_block()
        return eager, block_rates(graph_block, replays * GRAPH_STEPS, num_envs, device)
    finally:
        env.close()


def capture(env: Any, actions: Callable[[], torch.Tensor]) -> Any:
    """`GRAPH_STEPS` steps of `env` with fresh random actions, captured in one CUDA graph. The env's own
    generator (its restarts' draws) is registered with the graph where this torch can; the actions come
    from the device's default generator, which graphs support."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph's documentation asks
        for _ in range(3):
            env.step(actions())
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    register = getattr(graph, "register_generator_state", None)
    if register is not None:
        register(env.generator)
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_STEPS):
            env.step(actions())
    return graph


def flags() -> dict[str, object]:
    return {
        "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def add_rates(record: records.Record | None, name: str, rates: list[float], goal: float | None = None) -> None:
    if record is not None:
        record.add(
            name,
            max(rates),
            unit="steps/s",
            digits=0,
            spread=(min(rates), max(rates)),
            spread_kind=f"min-max of {len(rates)} blocks; the figure is the best",
            goal=None if goal is None else (">=", goal),
        )


def part_env_only(
    device: str, exponents: list[int], steps: int, lines: list[str], record: records.Record | None = None
) -> None:
    for task in (name for name in NATIVE_TASKS if name.startswith("rlrun/")):
        for exponent in exponents:
            eager_rates, graph_rates = env_only(task, 1 << exponent, device, steps)
            eager = max(eager_rates)
            graphed = graph_rates if isinstance(graph_rates, str) else max(graph_rates)
            graph = graphed
            if isinstance(graphed, float):
                graph = f"{graphed:>16,.0f} steps/s ({graphed / eager:.2f}x eager)"
            line = f"env-only {task:<30} 2^{exponent} envs: eager {eager:>16,.0f} steps/s, CUDA graph {graph}"
            print(line, flush=True)
            where = f"env-only steps/s on {device}, {task}, 2^{exponent} envs"
            add_rates(record, f"{where}, eager", eager_rates)
            if isinstance(graph_rates, list):
                add_rates(record, f"{where}, {GRAPH_STEPS} steps a CUDA graph", graph_rates)
            if task == GOAL_TASK and exponent == GOAL_EXPONENT:
                best = max(eager, graphed if isinstance(graphed, float) else 0.0)
                if record is not None:
                    record.add(f"{where}, the better of eager and CUDA graph", best, unit="steps/s", digits=0,
                               goal=(">=", GOAL_STEPS_PER_S))  # fmt: skip
                verdict = "met" if best >= GOAL_STEPS_PER_S else "NOT met"
                goal = f"goal: >= {GOAL_STEPS_PER_S:.0e} {task} steps/s at 2^{exponent} envs"
                lines.append(f"{goal}: {sided(best, GOAL_STEPS_PER_S, digits=0, thousands=True)}, {verdict}")


def part_training(
    device: str, num_envs: int, iterations: int, lines: list[str], record: records.Record | None = None
) -> None:
    """RSL-RL end to end, with the census on and the flags read around and inside the call."""
    warm = torch.ones(64, 64, device=device)
    (warm @ warm).sum().item()  # the device's BLAS handles exist before the call, as in any session that used it
    before = flags()
    inside: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as root:
        result = rlrun.train(
            rlrun.TrainRequest(
                task="rlrun/CartPoleContinuous-v1",
                library="rsl_rl",
                num_envs=num_envs,
                max_iterations=iterations,
                device=device,
                log_root=root,
            ),
            check_leaks=True,
            on_iteration=lambda row: inside.append(flags()) and False,
        )
    after = flags()
    returned = "no episode ended" if result.mean_return is None else f"mean return {result.mean_return:.1f}"
    line = (
        f"train rsl_rl rlrun/CartPoleContinuous-v1 {num_envs:,} envs x {iterations} it on {device}: "
        f"{result.steps_per_s:,.0f} steps/s end to end (Isaac Lab Cartpole, RTX 4090: {ISAAC_LAB_CARTPOLE:,}); "
        f"{returned}"
    )
    print(line, flush=True)
    print(f"flags before {before}\nflags inside {inside[0] if inside else '-'}\nflags after  {after}", flush=True)
    lines.append(line)
    if record is not None:
        record.add(
            f"RSL-RL PPO end-to-end steps/s on {device}, rlrun/CartPoleContinuous-v1, {num_envs:,} envs x "
            f"{iterations} iterations",
            result.steps_per_s,
            unit="steps/s",
            digits=0,
            note=f"one run; Isaac Lab's Cartpole on an RTX 4090: {ISAAC_LAB_CARTPOLE:,}; flags restored: "
            f"{before == after}",
        )
    if before != after:
        raise RuntimeError(f"torch flags not restored: before {before}, after {after}")
    lines.append("census: clean (check_leaks=True raised nothing), flags restored")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for a smoke run")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: the script's code path, not its figures")
    records.add_argument(parser)
    args = parser.parse_args(argv)
    record = records.Record.start(__file__, argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (--device cpu --quick runs the code path)", file=sys.stderr)
        return 1
    name = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else platform.machine()
    print(f"device: {args.device} ({name}); torch {torch.__version__}; Python {platform.python_version()}", flush=True)
    exponents, steps = ([8, 10], 20) if args.quick else (list(range(16, 23, 2)), 200)
    num_envs, iterations = (64, 2) if args.quick else (4096, 100)
    started = time.perf_counter()
    summary: list[str] = []
    failed: list[str] = []
    parts = {
        "env-only": lambda: part_env_only(args.device, exponents, steps, summary, record),
        "training and census": lambda: part_training(args.device, num_envs, iterations, summary, record),
    }
    for part, run in parts.items():
        try:
            run()
        except Exception:  # report the part and go on to the next
            failed.append(part)
            print(f"{part}: FAILED\n{traceback.format_exc()}", flush=True)
    print(f"\nsummary ({time.perf_counter() - started:.0f} s):")
    for line in summary:
        print(f"  {line}")
    print(f"  failed parts: {', '.join(failed)}" if failed else "  every part ran")
    if args.save:
        record.save(args.save)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
