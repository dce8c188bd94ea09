"""Every GPU figure in one call (run by benchmarks/gpu.sh on a machine with CUDA), in under 5 minutes.

1. Env-only steps/s of every native task at 2^16 .. 2^22 environments on CUDA, random actions, the best
   of 3 timed blocks after a warm-up (goal: >= 1e9 CartPole steps/s at 2^20 envs on an H200).
2. End-to-end RSL-RL PPO on rlrun/CartPoleContinuous-v1 at 4,096 envs (steps/s of the whole training),
   beside Isaac Lab's published 510 k steps/s for its Cartpole on an RTX 4090.
3. The torch flag policies on CUDA: a training call with the leak detector on, and the TF32 / cuDNN flags
   read before, inside (through the iteration hook) and after the call.
"""

from __future__ import annotations

import sys
import tempfile
import time

import torch

import rlrun
from rlrun.envs import NATIVE_TASKS, make_env

ISAAC_LAB_CARTPOLE = 510_000


def env_only(task: str, num_envs: int, steps: int = 200) -> float:
    env = make_env(task, num_envs, device="cuda")
    try:
        env.reset(seed=0)
        space = env.single_action_space
        discrete = hasattr(space, "n")

        def actions() -> torch.Tensor:
            if discrete:
                return torch.randint(0, int(space.n), (num_envs,), device="cuda")
            return torch.rand((num_envs, *space.shape), device="cuda") * 2 - 1

        for _ in range(20):
            env.step(actions())
        best = 0.0
        for _ in range(3):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(steps):
                env.step(actions())
            torch.cuda.synchronize()
            best = max(best, steps * num_envs / (time.perf_counter() - start))
        return best
    finally:
        env.close()


def flags() -> dict[str, object]:
    return {
        "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    for task in NATIVE_TASKS:
        if not task.startswith("rlrun/"):
            continue
        for exponent in range(16, 23, 2):
            rate = env_only(task, 1 << exponent)
            print(f"env-only {task:<30} 2^{exponent} envs: {rate:>16,.0f} steps/s")
    before = flags()
    inside: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as root:
        result = rlrun.train(
            rlrun.TrainRequest(
                task="rlrun/CartPoleContinuous-v1",
                library="rsl_rl",
                num_envs=4096,
                max_iterations=100,
                device="cuda",
                log_root=root,
            ),
            check_leaks=True,
            on_iteration=lambda row: inside.append(flags()) and False,
        )
    after = flags()
    print(
        f"train rsl_rl rlrun/CartPoleContinuous-v1 4,096 envs on CUDA: {result.steps_per_s:,.0f} steps/s end to end "
        f"(Isaac Lab Cartpole, RTX 4090: {ISAAC_LAB_CARTPOLE:,}); mean return {result.mean_return}"
    )
    print(f"flags before {before}\nflags inside {inside[0] if inside else '-'}\nflags after  {after}")
    print("census clean: yes (check_leaks=True raised nothing)" if before == after else "FLAGS NOT RESTORED")
    return 0 if before == after else 1


if __name__ == "__main__":
    sys.exit(main())
