"""Where an adapter row's overhead goes: the same training through rlrun with a part of rlrun left out.

`adapter_overhead.py` gives one ratio per library (library alone / through rlrun). This script takes one of
its rows and times, in one process, in rotating order, round after round:
- **library alone**: the row's `direct` side;
- **through rlrun**: the row's `through_rlrun` side, as `adapter_overhead.py` runs it;
- **without step statistics**: the same call with the episode-statistics wrapper reduced to a pass-through
  (no returns, no lengths, no iteration clock: no metrics rows, curves or stop checks);
- **plain checkpoints**: the same call with each checkpoint written straight to its path by the library's
  own save, and listed in memory only (no batch, no run.json rewrite, no commit thread);
- **no fsync**: the same call with every file rlrun writes committed as before (temporary file, moved into
  place, run.json rewritten with each checkpoint, on the commit thread) but never fsynced: what durability
  alone costs (one fsync a file or folder made durable: 39 in rl_games' 4-second row, 4 a checkpoint);
- **no kept executables** (the `skrl_jax` row only): the same call reading every executable from JAX's
  persistent cache on the disk, as the library alone does, instead of taking those an earlier call read from
  memory (`rlrun.libraries.skrl_jax_cache`): what rlrun costs before what it saves.

The last four are ablations for measuring, not ways to run: what they leave out is what rlrun is for.
Printed per variant: the median seconds over `--rounds` and the ratio library alone / variant, the figure
`adapter_overhead.py` judges (>= 0.98). A part's cost is the gap between "through rlrun" and its variant;
single runs of a row move by 2-3%, so use at least 8 rounds.

    python benchmarks/overhead_parts.py [--library skrl] [--rounds 10] [--iterations N]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from adapter_overhead import ROWS, missing, side
from rlrun.api.planning import pick_threads
from rlrun.envs.statistics import EpisodeStatistics
from rlrun.runs import RunRecord, atomic


def _bare_step(self: EpisodeStatistics, actions: Any) -> Any:
    """The statistics wrapper's step less everything it records: the inner step and the step count."""
    result = self.env.step(actions)
    self.env_steps += self._num_envs
    return result


def _plain_checkpoints(self: RunRecord, checkpoints: Any) -> list[Path]:
    """Checkpoints written by the library's save at their paths, listed in memory only (`save_checkpoint`, a
    batch of one, comes here too)."""
    paths = []
    for name, save, fields in checkpoints:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        save(str(path))
        self.manifest["checkpoints"].append({"file": name, **fields})
        paths.append(path)
    return paths


class _NoFsync(types.ModuleType):
    """`os` as `rlrun.runs.atomic` sees it, less `fsync`: the same writes and moves, nothing made durable (the
    library's own fsyncs, as TensorBoard's writer makes when it closes, still run)."""

    def __init__(self) -> None:
        super().__init__("os")

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def fsync(descriptor: int) -> None:
        """Nothing: what the ablation leaves out."""


@contextlib.contextmanager
def _replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def without(run: Callable[[Path, int], object], owner: Any, name: str, value: Any) -> Callable:
    """`run` with `owner.name` replaced by `value` for its duration."""

    def ablated(tmp: Path, iterations: int) -> object:
        with _replaced(owner, name, value):
            return run(tmp, iterations)

    return ablated


def _disk_only(run: Callable[[Path, int], object]) -> Callable[[Path, int], object]:
    """`run` with no executable kept from an earlier call: each is read from the disk again."""
    from rlrun.libraries import skrl_jax_cache

    def disk_only(tmp: Path, iterations: int) -> object:
        skrl_jax_cache.forget_kept_executables()
        with _replaced(skrl_jax_cache, "_keep_executables", lambda folder: None):
            return run(tmp, iterations)

    return disk_only


def variants(row: Any) -> dict[str, Callable[[Path, int], object]]:
    found = {
        "library alone": row.direct,
        "through rlrun": row.through_rlrun,
        "without step statistics": without(row.through_rlrun, EpisodeStatistics, "step", _bare_step),
        "plain checkpoints": without(row.through_rlrun, RunRecord, "save_checkpoints", _plain_checkpoints),
        "no fsync": without(row.through_rlrun, atomic, "os", _NoFsync()),
    }
    if getattr(row, "FRAMEWORK", None) == "jax":
        found["no kept executables"] = _disk_only(row.through_rlrun)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--library", default="skrl", choices=ROWS, help="the adapter_overhead.py row")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=None, help="default: the row's own")
    args = parser.parse_args()
    reason = missing(args.library)
    if reason:
        raise SystemExit(f"{args.library}: {reason}")
    row = importlib.import_module(f"overhead_{args.library}")
    iterations = args.iterations or row.ITERATIONS
    threads = pick_threads(None, row.NUM_ENVS)
    runs = {
        name: side(run, iterations, threads if name == "library alone" else None) for name, run in variants(row).items()
    }
    print(f"{row.LABEL} x {iterations} it, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}", flush=True)
    for run in runs.values():  # warm-up: imports, first optimizer step, JIT
        run()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for index in range(args.rounds):
        shift = index % len(names)  # each variant leads in turn
        for name in names[shift:] + names[:shift]:
            seconds[name].append(runs[name]())
    alone = statistics.median(seconds["library alone"])
    for name, values in seconds.items():
        median = statistics.median(values)
        spread = f"({min(values):.3f}-{max(values):.3f})"
        print(f"  {name:<26} {median:7.3f} s {spread}  library alone / this {alone / median:.3f}")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
