"""What a checkpoint's writes cost: the checkpoint and its run.json entry as two atomic writes, or as one batch.

The reference (`two_atomic_writes`) writes the checkpoint atomically (temporary file, fsync, rename, fsync of the
folder) and then run.json the same way: four fsyncs, two of them of the run folder. `RunRecord.save_checkpoint`
writes both temporaries, fsyncs both, renames the checkpoint then run.json and fsyncs the folder once: three
fsyncs, one temporary folder, one sweep.

Each side saves `--saves` checkpoints of a small torch state dict (a 64x64 MLP) into a fresh run under
`--dir` (default: the current directory; fsync costs nothing on tmpfs, so measure on the disk runs live
on); the sides alternate AB/BA for `--pairs` pairs. Printed: milliseconds per checkpoint of each side per
pair, the fsyncs each makes, and the median of the ratios (two writes / batch) with their spread.

    python benchmarks/checkpoint_writes.py [--saves 50] [--pairs 7] [--dir .]
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from alternating import Summary, load, order, pair, timed
from rlrun import runs

GOAL = 1.0
"""The batch is no slower than the two writes it replaces (ratio two writes / batch)."""


def two_atomic_writes(record: runs.RunRecord, name: str, save: Callable[[str], Any], **fields: Any) -> None:
    """The reference, as rlrun saved a checkpoint before the batch: its atomic write, then run.json's."""
    runs.atomic_save(record.dir / name, save)
    entries = record.manifest["checkpoints"]
    entries[:] = [entry for entry in entries if entry["file"] != name]
    entries.append({"file": name, **fields, "saved_at": runs.utc_now()})
    record.write()


def batched(record: runs.RunRecord, name: str, save: Callable[[str], Any], **fields: Any) -> None:
    record.save_checkpoint(name, save, **fields)


def new_record(root: Path) -> runs.RunRecord:
    return runs.RunRecord.create(root, "bench", "checkpoints", None, {"library": "bench", "task": "t"}, {})


def side(root: Path, way: Callable[..., None], write: Callable[[str], Any], saves: int) -> float:
    """Milliseconds per checkpoint for `saves` checkpoints into a fresh run, written `way`."""
    record = new_record(root)
    seconds = timed(lambda: [way(record, f"model_{index}.pt", write, iteration=index) for index in range(saves)])
    return seconds / saves * 1e3


def fsyncs_per_checkpoint(root: Path, way: Callable[..., None], write: Callable[[str], Any]) -> int:
    """How many fsyncs one checkpoint takes `way` (counted outside the timed pairs)."""
    record = new_record(root)
    fsync, count = os.fsync, []
    os.fsync = lambda descriptor: count.append(descriptor) or fsync(descriptor)
    try:
        way(record, "model_0.pt", write, iteration=0)
    finally:
        os.fsync = fsync
    return len(count)


def filesystem(path: Path) -> str:
    """The type of the filesystem `path` lies on (Linux: the longest mount point above it), else '?'."""
    try:
        mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "?"
    above = [(point, kind) for point, kind in mounts if path.resolve().is_relative_to(point)]
    return max(above, key=lambda mount: len(mount[0]))[1] if above else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saves", type=int, default=50, help="checkpoints per side per pair (default 50)")
    parser.add_argument("--pairs", type=int, default=7, help="alternating pairs (default 7)")
    parser.add_argument("--dir", default=".", help="where the runs are written (default: the current directory)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64))
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    state = model.state_dict()

    def write(path: str) -> None:
        torch.save(state, path)

    with tempfile.TemporaryDirectory(prefix="checkpoint_writes.", dir=args.dir) as directory:
        root = Path(directory)
        fsyncs = [fsyncs_per_checkpoint(root, way, write) for way in (two_atomic_writes, batched)]
        print(
            f"{len(buffer.getvalue()) / 1024:.1f} KiB checkpoints, {args.saves} per side per pair, on "
            f"{filesystem(root)} ({root.parent.resolve()}); fsyncs per checkpoint: two writes {fsyncs[0]}, "
            f"batch {fsyncs[1]}"
        )
        side(root, two_atomic_writes, write, 5)  # warm-up: torch.save's first call, the folders' first entries
        side(root, batched, write, 5)
        before, ratios = load(), []
        for index in range(args.pairs):
            old, new = pair(
                index,
                lambda: side(root, two_atomic_writes, write, args.saves),
                lambda: side(root, batched, write, args.saves),
            )
            ratios.append(old / new)
            print(
                f"pair {index} ({order(index, 'two writes', 'batch')}): two writes {old:.2f} ms, batch {new:.2f} ms "
                f"per checkpoint, ratio {old / new:.3f}"
            )
    summary = Summary(tuple(ratios), GOAL, before, load())
    print(f"two writes / batch: {summary.line()}")


if __name__ == "__main__":
    main()
