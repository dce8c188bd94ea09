"""Checkpoint lookup: `latest`, `best`, `--load_run` and paths, over sound runs."""

from __future__ import annotations

import pytest

from rlrun import runs
from rlrun.errors import CheckpointNotFound


def make_run(root, library, task, name, created_at, checkpoints, experiment="exp"):
    run_dir = root / library / experiment / name
    run_dir.mkdir(parents=True)
    for entry in checkpoints:
        (run_dir / entry["file"]).write_bytes(b"weights")
    runs.write_manifest(
        run_dir, {"library": library, "task": task, "created_at": created_at, "checkpoints": checkpoints}
    )
    return run_dir


def test_latest_takes_the_newest_run_of_this_library_and_task_and_its_last_checkpoint(tmp_path):
    make_run(tmp_path, "rsl_rl", "T", "old", "2026-01-01", [{"file": "model_9.pt", "mean_return": 9.0}])
    newest = make_run(
        tmp_path,
        "rsl_rl",
        "T",
        "new",
        "2026-02-01",
        [{"file": "model_0.pt", "mean_return": 50.0}, {"file": "model_1.pt", "mean_return": 10.0}],
    )
    make_run(tmp_path, "rsl_rl", "other-task", "newer", "2026-03-01", [{"file": "model_5.pt"}])
    path, run = runs.resolve_checkpoint("latest", log_root=tmp_path, library="rsl_rl", task="T")
    assert path == newest / "model_1.pt" and run.path == newest
    path, _ = runs.resolve_checkpoint("best", log_root=tmp_path, library="rsl_rl", task="T")
    assert path == newest / "model_0.pt"


def test_load_run_selects_a_run_by_name_or_pattern(tmp_path):
    old = make_run(tmp_path, "rsl_rl", "T", "2026-01-01_a", "2026-01-01", [{"file": "model_1.pt"}])
    make_run(tmp_path, "rsl_rl", "T", "2026-02-01_b", "2026-02-01", [{"file": "model_2.pt"}])
    path, _ = runs.resolve_checkpoint("latest", log_root=tmp_path, library="rsl_rl", task="T", load_run="2026-01-01_a")
    assert path == old / "model_1.pt"
    path, _ = runs.resolve_checkpoint("model_1.pt", log_root=tmp_path, library="rsl_rl", task="T", load_run=".*_a")
    assert path == old / "model_1.pt"
    with pytest.raises(CheckpointNotFound, match="no run 'nope'"):
        runs.resolve_checkpoint("latest", log_root=tmp_path, library="rsl_rl", task="T", load_run="nope")


def test_a_checkpoint_listed_in_the_manifest_but_missing_on_disk_is_skipped(tmp_path):
    run_dir = make_run(tmp_path, "rsl_rl", "T", "r", "2026-01-01", [{"file": "model_0.pt"}, {"file": "model_1.pt"}])
    (run_dir / "model_1.pt").unlink()
    path, _ = runs.resolve_checkpoint("latest", log_root=tmp_path, library="rsl_rl", task="T")
    assert path == run_dir / "model_0.pt"


def test_a_path_is_taken_as_is_and_a_missing_one_is_refused(tmp_path):
    checkpoint = tmp_path / "elsewhere.pt"
    checkpoint.write_bytes(b"x")
    path, run = runs.resolve_checkpoint(str(checkpoint), log_root=tmp_path, library="rsl_rl", task="T")
    assert path == checkpoint and run is None
    with pytest.raises(CheckpointNotFound, match="train one first"):
        runs.resolve_checkpoint("latest", log_root=tmp_path / "empty", library="rsl_rl", task="T")
    with pytest.raises(CheckpointNotFound, match="neither a file"):
        runs.resolve_checkpoint(str(tmp_path / "missing.pt"), log_root=tmp_path, library="rsl_rl", task="T")
