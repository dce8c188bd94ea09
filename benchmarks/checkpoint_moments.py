"""What a training's checkpoint moments cost it through rlrun's record, beside the library's own plain saves.

SKRL's row of `adapter_overhead.py` pays most of its per-call cost at its checkpoint moments: SKRL saves at a
tenth of the run whatever its length, `agent_<t>` each time and `best_agent` when the return improved. This
script isolates those moments from the rest of a training. Each side runs `--moments` moments, each after a
fixed amount of torch work on one thread (`--work_ms`, calibrated once: matmuls of a policy's size, holding
the GIL between ops as a training does):
- **library's saves**: `torch.save` straight to each checkpoint's path, as SKRL alone writes them;
- **rlrun, in the background**: `RunRecord.save_checkpoints` with background commits, as `rlrun.train` runs
  them (written in the caller, fsynced and moved by the committer thread), and the record's `finish`;
- **rlrun, in the caller**: the same record committing each batch before the save returns.

A side's time includes its work, so what the committer's system calls and GIL switches cost the training
shows as time. Sides in rotating order, `--rounds` rounds, one warm-up; printed: median milliseconds, the
cost over the library's saves per side and per moment, and the spread.

    python benchmarks/checkpoint_moments.py [--moments 11] [--rounds 20] [--work_ms 15] [--dir .]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from rlrun import runs


class Training:
    """A stand-in for a training between checkpoints: policy-sized matmuls, a fixed count of them."""

    def __init__(self, work_ms: float) -> None:
        self.inputs, self.weights = torch.randn(256, 64), torch.randn(64, 64)
        self.count = 1
        start = time.perf_counter()
        self.run(repeats=200)
        per_op = (time.perf_counter() - start) / 200
        self.count = max(1, round(work_ms / 1000 / per_op))

    def run(self, repeats: int | None = None) -> None:
        for _ in range(repeats or self.count):
            self.inputs @ self.weights


def agent_state() -> dict[str, object]:
    """What SKRL's PPO saves for `rlrun/CartPole-v1`'s default network: policy, value and optimizer states."""
    policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ELU(), torch.nn.Linear(64, 64), torch.nn.ELU())
    optimizer = torch.optim.Adam(policy.parameters())
    policy(torch.zeros(1, 4)).sum().backward()
    optimizer.step()
    return {"policy": policy.state_dict(), "value": policy.state_dict(), "optimizer": optimizer.state_dict()}


def moments(moments: int) -> list[list[str]]:
    """The files of each moment: `agent_<t>.pt`, with `best_agent.pt` first every other moment."""
    return [(["best_agent.pt"] if index % 2 == 0 else []) + [f"agent_{index}.pt"] for index in range(moments)]


def library_saves(root: Path, training: Training, state: dict, plan: list[list[str]]) -> None:
    folder = root / "checkpoints"
    folder.mkdir(parents=True)
    for names in plan:
        training.run()
        for name in names:
            torch.save(state, folder / name)


def through_record(background: bool) -> Callable[[Path, Training, dict, list[list[str]]], None]:
    def side(root: Path, training: Training, state: dict, plan: list[list[str]]) -> None:
        params = {"agent.yaml": "a: 1\n", "env.yaml": "b: 2\n"}
        record = runs.RunRecord.create(root, "bench", "moments", None, {"library": "bench"}, params, background)
        (record.dir / "checkpoints").mkdir()
        for index, names in enumerate(plan):
            training.run()
            save = lambda path: torch.save(state, path)  # noqa: E731
            record.save_checkpoints([(f"checkpoints/{name}", save, {"iteration": index}) for name in names])
        record.finish("completed")

    return side


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moments", type=int, default=11, help="checkpoint moments per side (SKRL's row: 11)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--work_ms", type=float, default=15.0, help="torch work before each moment")
    parser.add_argument("--dir", default=".", help="where the runs go (measure on the disk runs live on)")
    args = parser.parse_args(argv)
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        training, state, plan = Training(args.work_ms), agent_state(), moments(args.moments)
        sides = {
            "library's saves": library_saves,
            "rlrun, in the background": through_record(True),
            "rlrun, in the caller": through_record(False),
        }
        seconds: dict[str, list[float]] = {name: [] for name in sides}
        names = list(sides)
        print(f"{args.moments} moments, {args.work_ms:g} ms of work before each, load {os.getloadavg()[0]:.2f}")
        for index in range(args.rounds + 1):  # round 0 warms up
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                with tempfile.TemporaryDirectory(dir=args.dir) as directory:
                    start = time.perf_counter()
                    sides[name](Path(directory), training, state, plan)
                    if index:
                        seconds[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    reference = statistics.median(seconds["library's saves"])
    for name, values in seconds.items():
        median = statistics.median(values)
        extra = (median - reference) * 1000
        print(
            f"  {name:<26} {median * 1000:7.1f} ms ({min(values) * 1000:.1f}-{max(values) * 1000:.1f})"
            f"  +{extra:5.1f} ms, {extra / args.moments:.2f} ms a moment"
        )
    print(f"load after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
