"""Checkpoints committed in the background against in the foreground, on SKRL's adapter-overhead row.

SKRL (torch) on `rlrun/CartPole-v1` saves 16 checkpoints in its 15-iteration row of `adapter_overhead.py`
(`overhead_skrl.py`). The same `rlrun.train` call runs with `RunRecord`'s background commits (the default) and
with them off (each batch fsynced and moved before the save returns), and the library alone, in rotating
order over `--rounds` rounds, one warm-up first, a `gc.collect()` before each. Printed: each side's median
seconds and the ratios library alone / through rlrun.

    python benchmarks/background_commits.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

import overhead_skrl as row
from rlrun import runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    create = runs.RunRecord.create.__func__
    background = {"on": True}

    def switched(cls, *arguments, **keywords):
        keywords["background"] = background["on"]
        return create(cls, *arguments, **keywords)

    runs.RunRecord.create = classmethod(switched)
    seconds: dict[str, list[float]] = {"background": [], "foreground": [], "library alone": []}
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        row.through_rlrun(root, 3)
        print(f"load {os.getloadavg()[0]:.2f}")
        for index in range(args.rounds):
            sides = list(seconds)
            for side in sides[index % 3 :] + sides[: index % 3]:
                gc.collect()
                start = time.perf_counter()
                if side == "library alone":
                    alone = root / f"alone-{index}"
                    alone.mkdir()
                    row.direct(alone)
                else:
                    background["on"] = side == "background"
                    row.through_rlrun(root)
                seconds[side].append(time.perf_counter() - start)
    for side, values in seconds.items():
        print(f"{side:<14} median {statistics.median(values):.3f} s (spread {min(values):.3f}-{max(values):.3f})")
    for side in ("background", "foreground"):
        ratios = [a / b for a, b in zip(seconds["library alone"], seconds[side], strict=True)]
        print(f"library alone / rlrun with {side} commits: median {statistics.median(ratios):.3f}")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
