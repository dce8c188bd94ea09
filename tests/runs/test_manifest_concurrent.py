"""Two processes, one log root: `rlrun train` processes started together each get their own run directory."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from rlrun import runs

TASK = "rlrun/CartPole-v1"
PROCESSES = 3

STAMP = "2026-11-29_15-04-05"
# Each process imports rlrun's API, says it is ready and waits for the word; the parent tells every process
# at once. Their clock, as the run directory's name sees it, is stopped at STAMP: all start "in the same
# second", as two commands started together do (8 of 8 collided before run directories were claimed).
CHILD = """
import datetime, sys, types
import rlrun, rlrun.api, rlrun.runs.manifest

class Stopped(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 11, 29, 15, 4, 5) if tz is None else datetime.datetime.now(tz)

rlrun.runs.manifest._dt = types.SimpleNamespace(**{**vars(datetime), "datetime": Stopped})
print("ready", flush=True)
sys.stdin.readline()
sys.exit(rlrun.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_train_processes_started_together_all_succeed_in_their_own_run_directories(tmp_path):
    log_root = tmp_path / "logs"
    argv = ["train", "--task", TASK, "--library", "sb3", "--num_envs", "4", "--max_iterations", "1"]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, *argv, "--log_root", str(log_root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    for child in children:
        for line in child.stdout:
            if line.strip() == "ready":
                break
    for child in children:  # go
        with contextlib.suppress(BrokenPipeError):  # a process that failed already: its exit code tells
            child.stdin.write("go\n")
            child.stdin.flush()
    outputs = [child.communicate(timeout=300) for child in children]
    for child, (_, stderr) in zip(children, outputs, strict=True):
        assert child.returncode == 0, stderr
        assert "Traceback" not in stderr
    run_dirs = sorted((log_root / "sb3" / runs.experiment_name(TASK)).iterdir())
    assert len(run_dirs) == PROCESSES
    for run_dir in run_dirs:
        manifest = json.loads((run_dir / runs.MANIFEST).read_text())
        assert manifest["status"] == "completed" and manifest["checkpoints"]
        assert runs.manifest_problem(manifest) is None
    assert [run_dir.name for run_dir in run_dirs] == [STAMP, f"{STAMP}_2", f"{STAMP}_3"]
    newest, _ = runs.resolve_checkpoint("latest", log_root=log_root, library="sb3", task=TASK)
    created = {run_dir: json.loads((run_dir / runs.MANIFEST).read_text())["created_at"] for run_dir in run_dirs}
    assert newest.parent == max(created, key=created.__getitem__)  # latest follows creation, not the name
