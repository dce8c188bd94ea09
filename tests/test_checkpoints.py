"""Checkpoints survive a training process killed with SIGKILL at any moment, mid-write included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import rlrun
from rlrun import runs
from rlrun.libraries import rsl_rl
from support import SHORT_RUNS

TASK = "rlrun/CartPoleContinuous-v1"

# The training process, with every fsync slowed down so that a kill can land inside a checkpoint write.
SLOW_WRITER = """
import os, sys, time
fsync = os.fsync
def slow_fsync(descriptor):
    time.sleep(0.4)
    fsync(descriptor)
os.fsync = slow_fsync
import rlrun
sys.exit(rlrun.main(sys.argv[1:]))
"""


def start_training(log_root: Path) -> subprocess.Popen:
    words = ["train", "--task", TASK, "--num_envs", "8", "--max_iterations", "500", "--log_root", str(log_root)]
    overrides = ["agent.save_interval=1", "agent.num_steps_per_env=4", "agent.actor.hidden_dims=[256,256]"]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, *words, *overrides],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def run_dir(log_root: Path) -> Path | None:
    found = list(log_root.glob("rsl_rl/*/*/run.json"))
    return found[0].parent if found else None


def wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the training process never reached the kill point")
        time.sleep(0.01)


def temporaries(directory: Path | None) -> list[Path]:
    return list(directory.glob(f".*{runs.TEMPORARY_SUFFIX}")) if directory else []


def listed_checkpoints(directory: Path | None) -> list[str]:
    manifest = runs.read_manifest(directory) if directory else None
    return [entry["file"] for entry in manifest["checkpoints"]] if manifest else []


KILL_POINTS = {
    # name: when to kill
    "while writing the first checkpoint": lambda d: bool(temporaries(d)) and not listed_checkpoints(d),
    "while writing the third checkpoint": lambda d: len(listed_checkpoints(d)) >= 2 and bool(temporaries(d)),
    "between two writes": lambda d: len(listed_checkpoints(d)) >= 3 and not temporaries(d),
}


@pytest.mark.slow
@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_the_newest_complete_checkpoint_loads_after_sigkill(point, log_root):
    process = start_training(log_root)
    try:
        wait_for(lambda: KILL_POINTS[point](run_dir(log_root)))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    directory = run_dir(log_root)
    manifest = json.loads((directory / "run.json").read_text())  # never a half-written manifest
    assert manifest["status"] == "running"  # killed: no chance to say otherwise

    for name in listed_checkpoints(directory):  # everything the manifest lists is complete
        rsl_rl.check_checkpoint(directory / name)
    for partial in temporaries(directory):  # a partial file is never named like a checkpoint
        assert not partial.name.startswith("model_") and partial.name.endswith(runs.TEMPORARY_SUFFIX)
    if point == "while writing the first checkpoint":
        with pytest.raises(runs.CheckpointNotFound):
            runs.resolve_checkpoint("latest", log_root=log_root, library="rsl_rl", task=TASK)
        assert temporaries(directory)
        return
    checkpoint, _ = runs.resolve_checkpoint("latest", log_root=log_root, library="rsl_rl", task=TASK)
    assert checkpoint.name == listed_checkpoints(directory)[-1]
    state = torch.load(checkpoint, weights_only=True)
    assert state["iter"] == int(checkpoint.stem.split("_")[1])


def test_temporaries_of_dead_writers_are_swept_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".model_3.pt.{dead.pid}.abc{runs.TEMPORARY_SUFFIX}"
    mine = tmp_path / f".model_4.pt.{os.getpid()}.def{runs.TEMPORARY_SUFFIX}"
    interrupted = tmp_path / f".model_5.pt.{os.getpid()}.ghi{runs.TEMPORARY_SUFFIX}"
    stale.write_bytes(b"partial")
    mine.write_bytes(b"being written")
    interrupted.mkdir()  # this process's, left by a Ctrl-C while the folder was being made: nobody writes in it
    runs._WRITING.add(mine.name)  # another thread of this process writes in it now
    try:
        runs.atomic_write_text(tmp_path / "run.json", "{}")
    finally:
        runs._WRITING.discard(mine.name)
    assert not stale.exists() and mine.exists() and not interrupted.exists()


@pytest.mark.parametrize("library", list(SHORT_RUNS))
def test_every_library_writes_its_checkpoints_through_rlruns_atomic_writer(library, tmp_path, monkeypatch):
    """Only the atomic writer records checkpoints in run.json, so a checkpoint file on disk that run.json
    does not list was written some other way (and could be left half-written by a kill)."""
    writes = []
    monkeypatch.setattr(
        runs, "atomic_save", lambda path, write, _save=runs.atomic_save: writes.append(path) or _save(path, write)
    )
    result = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/Pendulum-v1",
            library=library,
            num_envs=8,
            max_iterations=3,
            log_root=str(tmp_path),
            overrides=SHORT_RUNS[library],
        )
    )
    on_disk = {path for path in result.run_dir.rglob("*") if path.suffix in (".pt", ".pth", ".zip", ".pickle")}
    manifest = json.loads((result.run_dir / "run.json").read_text())
    recorded = {result.run_dir / entry["file"] for entry in manifest["checkpoints"]}
    assert on_disk and on_disk == recorded <= set(writes)
    assert not list(result.run_dir.rglob("*.rlrun-tmp"))
