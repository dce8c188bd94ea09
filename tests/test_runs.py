"""Run directories, manifests, atomic writes and checkpoint lookup."""

from __future__ import annotations

import datetime as dt
import multiprocessing
from pathlib import Path

import pytest

from rlrun import runs
from rlrun.errors import CheckpointNotFound, InvalidArgument


def make_run(root, library, task, name, created_at, checkpoints, experiment="exp"):
    run_dir = root / library / experiment / name
    run_dir.mkdir(parents=True)
    for entry in checkpoints:
        (run_dir / entry["file"]).write_bytes(b"weights")
    runs.write_manifest(
        run_dir, {"library": library, "task": task, "created_at": created_at, "checkpoints": checkpoints}
    )
    return run_dir


def test_atomic_write_leaves_the_old_file_and_no_temporary_when_writing_fails(tmp_path):
    target = tmp_path / "model.pt"
    target.write_text("old")

    def broken(path):
        with open(path, "w") as file:
            file.write("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.atomic_save(target, broken)
    assert target.read_text() == "old"
    assert [path.name for path in tmp_path.iterdir()] == ["model.pt"]
    runs.atomic_write_text(target, "new")
    assert target.read_text() == "new" and [path.name for path in tmp_path.iterdir()] == ["model.pt"]


def test_new_run_dir_claims_a_timestamped_directory_and_never_reuses_one(tmp_path):
    now = dt.datetime(2026, 11, 29, 15, 4, 5)
    first = runs.new_run_dir(tmp_path, "rsl_rl", "exp", "try", now=now)
    assert first == tmp_path / "rsl_rl" / "exp" / "2026-11-29_15-04-05_try"
    assert first.is_dir() and not any(first.iterdir())  # claimed: made, empty
    assert runs.new_run_dir(tmp_path, "rsl_rl", "exp", "try", now=now).name == "2026-11-29_15-04-05_try_2"
    (first.parent / "2026-11-29_15-04-05_try_3").write_text("a file in the way")
    assert runs.new_run_dir(tmp_path, "rsl_rl", "exp", "try", now=now).name == "2026-11-29_15-04-05_try_4"
    assert runs.new_run_dir(tmp_path, "rsl_rl", "exp", now=now).name == "2026-11-29_15-04-05"


def _claim_run_dirs(log_root, start, claims, results):
    """In a child process: wait for the start signal, then claim `claims` run directories in the same second."""
    start.wait()
    now = dt.datetime(2026, 11, 29, 15, 4, 5)
    try:
        results.put([str(runs.new_run_dir(log_root, "sb3", "exp", now=now)) for _ in range(claims)])
    except BaseException as error:
        results.put(repr(error))


def test_processes_claiming_run_dirs_in_the_same_second_all_get_their_own(tmp_path):
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    processes, claims = 6, 5
    children = [
        context.Process(target=_claim_run_dirs, args=(tmp_path, start, claims, results)) for _ in range(processes)
    ]
    for child in children:
        child.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
    results.close()
    results.join_thread()
    assert all(isinstance(outcome, list) for outcome in outcomes), outcomes  # no claim failed
    claimed = [Path(path) for outcome in outcomes for path in outcome]
    assert len(set(claimed)) == len(claimed) == processes * claims  # all distinct
    assert all(path.is_dir() for path in claimed)
    stamp = "2026-11-29_15-04-05"
    assert {path.name for path in claimed} == {stamp, *(f"{stamp}_{n}" for n in range(2, processes * claims + 1))}
    assert [child.exitcode for child in children] == [0] * processes


@pytest.mark.parametrize("name", ["", "../escape", "a/b", "-flag", "with space"])
def test_names_that_would_break_the_layout_are_refused(name):
    with pytest.raises(InvalidArgument, match="not a valid directory name"):
        runs.check_name(name, "--run_name")


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
