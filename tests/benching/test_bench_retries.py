"""`--retries N`: a failed bench cell runs again, from the last checkpoint its failed attempt saved."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import rlrun
from rlrun.benching.cell import Cell, run_cell
from rlrun.benching.retries import folders_before, retry, run_folders
from support import SMALL_RSL_RL, bench_request, result_rows

pytest.importorskip("rsl_rl")

FLAKY = "dying_task:RlrunTestFlaky-v0"
EVERY_ITERATION = (*SMALL_RSL_RL, "agent.save_interval=1")
"""A checkpoint after every iteration: the flaky task fails in the third (step 20 of 8 per iteration)."""
ENV_STEPS_PER_ITERATION = 8 * 2


def flaky_bench(tmp_path: Path, monkeypatch, failures: int, **fields) -> rlrun.BenchRequest:
    counter = tmp_path / "failures"
    counter.write_text(str(failures), encoding="utf-8")
    monkeypatch.setenv("RLRUN_TEST_FAILURES", str(counter))  # pool workers are spawned with it
    spec = {"tasks": (FLAKY,), "runs": ("rsl_rl",), "iterations": 4, "overrides": EVERY_ITERATION}
    return bench_request(tmp_path / "bench", **{**spec, **fields})


def saved_rows(result: rlrun.BenchResult) -> list[dict]:
    return result_rows(result.out)


def test_a_worker_killed_mid_cell_is_retried_from_its_checkpoint_and_the_row_counts_both_parts(tmp_path, monkeypatch):
    result = rlrun.bench(flaky_bench(tmp_path, monkeypatch, failures=1, executor="process", workers=1, retries=1))
    ((row,),) = (result.rows,)
    assert row["status"] == "completed", row
    assert row["attempts"] == 2
    assert "worker died: killed by signal SIGKILL" in row["note"]
    # the killed attempt saved iterations 1 and 2 (the last commit may not have reached run.json at the kill)
    assert "resumed from" in row["note"] and ("at iteration 2" in row["note"] or "at iteration 1" in row["note"])
    assert row["iterations"] == 4 and row["env_steps"] == 4 * ENV_STEPS_PER_ITERATION
    assert saved_rows(result) == [row]
    folders = sorted((tmp_path / "bench" / "runs" / "rsl_rl" / "bench").iterdir())
    assert len(folders) == 2, folders  # the killed attempt's folder, and the one that went on from it
    killed = json.loads((folders[0] / "run.json").read_text(encoding="utf-8"))
    assert killed["status"] == "running"  # SIGKILL: nothing marked it; its checkpoints are listed all the same
    assert row["note"].count(str(folders[0])) == 1 and row["run_dir"] == str(folders[1])
    again = rlrun.bench(flaky_bench(tmp_path, monkeypatch, failures=1, executor="process", workers=1, retries=1))
    assert again.reused == 1 and again.rows == result.rows  # the resumed run vouches for the row's summed steps


def test_a_cell_whose_node_is_lost_goes_on_from_the_checkpoint_it_sent_to_storage(tmp_path, monkeypatch):
    """The killed attempt's folder is gone with its "node" (deleted before the SIGKILL); its checkpoints reached
    `--storage` as the training listed them, so the retry copies the newest one back and goes on from it."""
    experiment = tmp_path / "bench" / "runs" / "rsl_rl" / "bench"
    monkeypatch.setenv("RLRUN_TEST_LOST_FOLDER", str(experiment))
    bucket = tmp_path / "bucket"
    request = flaky_bench(tmp_path, monkeypatch, failures=1, executor="process", workers=1, retries=1)
    result = rlrun.bench(dataclasses.replace(request, storage=str(bucket)))
    ((row,),) = (result.rows,)
    assert row["status"] == "completed" and row["attempts"] == 2, row
    assert "worker died: killed by signal SIGKILL" in row["note"]
    assert "resumed from" in row["note"] and ("at iteration 2" in row["note"] or "at iteration 1" in row["note"])
    assert row["iterations"] == 4 and row["env_steps"] == 4 * ENV_STEPS_PER_ITERATION
    stored = sorted(path.name for path in (bucket / "rsl_rl" / "bench").iterdir())
    assert len(stored) == 2, stored  # the lost attempt's checkpoints, and the run that went on from them
    lost = json.loads((bucket / "rsl_rl" / "bench" / stored[0] / "run.json").read_text(encoding="utf-8"))
    assert lost["status"] == "running" and lost["checkpoints"], lost  # sent mid-training, before the kill
    for listed in lost["checkpoints"]:
        assert (bucket / "rsl_rl" / "bench" / stored[0] / listed["file"]).is_file()  # run.json went last
    here = sorted(path.name for path in experiment.iterdir())
    assert here == stored  # the copy the retry went on from, and the finished run
    assert Path(row["run_dir"]).name == stored[1]


def test_without_storage_a_cell_whose_node_is_lost_starts_over(tmp_path, monkeypatch):
    monkeypatch.setenv("RLRUN_TEST_LOST_FOLDER", str(tmp_path / "bench" / "runs" / "rsl_rl" / "bench"))
    result = rlrun.bench(flaky_bench(tmp_path, monkeypatch, failures=1, executor="process", workers=1, retries=1))
    ((row,),) = (result.rows,)
    assert row["status"] == "completed" and row["attempts"] == 2, row
    assert "resumed from" not in row["note"]
    assert row["iterations"] == 4 and row["env_steps"] == 4 * ENV_STEPS_PER_ITERATION


def test_an_inline_cell_that_keeps_raising_fails_after_its_retries_with_every_error_noted(tmp_path, monkeypatch):
    # RSL-RL's own interval: one checkpoint, after iteration 1; each retry goes on from it and fails again
    result = rlrun.bench(flaky_bench(tmp_path, monkeypatch, failures=5, retries=2, overrides=SMALL_RSL_RL))
    ((row,),) = (result.rows,)
    assert row["status"] == "failed" and row["attempts"] == 3
    assert "resumed from" in row["note"] and "at iteration 1" in row["note"]
    assert "the flaky task failed on purpose" in row["error"]
    assert row["note"].count("the flaky task failed on purpose") == 2  # the two attempts before the last
    assert (tmp_path / "failures").read_text(encoding="utf-8") == "2"  # three attempts, no more
    assert result.failed == 1 and saved_rows(result) == [row]


def test_an_inline_cell_that_raises_once_completes_on_its_retry(tmp_path, monkeypatch):
    result = rlrun.bench(flaky_bench(tmp_path, monkeypatch, failures=1, retries=3))
    ((row,),) = (result.rows,)
    assert row["status"] == "completed" and row["attempts"] == 2
    assert row["iterations"] == 4 and row["env_steps"] == 4 * ENV_STEPS_PER_ITERATION
    assert "at iteration 2" in row["note"]  # inline, the failure commits the checkpoints saved before it


def test_without_retries_a_failed_cell_runs_once(tmp_path, monkeypatch):
    result = rlrun.bench(flaky_bench(tmp_path, monkeypatch, failures=1))
    ((row,),) = (result.rows,)
    assert row["status"] == "failed" and row["attempts"] == 1 and row["note"] is None
    assert (tmp_path / "failures").read_text(encoding="utf-8") == "0"


# --- where a retry goes on from: only what the failed attempt's run.json lists, inside the log root --------------


def planned_cell(log_root: Path, key: str = "0123456789abcdef", storage: str | None = None) -> Cell:
    request = rlrun.TrainRequest(
        task="rlrun/Pendulum-v1", library="rsl_rl", log_root=str(log_root), experiment="bench", max_iterations=10
    )
    return Cell(
        key=key, run="rsl_rl/ppo", variant="", request=request, eval_episodes=0, seconds=None, threshold=None,
        storage=storage,
    )  # fmt: skip


def planted_run(log_root: Path, name: str, checkpoints: list, files: tuple[str, ...] = ()) -> Path:
    folder = log_root / "rsl_rl" / "bench" / name
    folder.mkdir(parents=True)
    for file in files:
        (folder / file).write_bytes(b"weights")
    (folder / "run.json").write_text(json.dumps({"status": "failed", "checkpoints": checkpoints}), encoding="utf-8")
    return folder


def entry(file: str, iteration, env_steps) -> dict:
    return {"file": file, "iteration": iteration, "env_steps": env_steps}


def test_a_retry_goes_on_from_the_newest_listed_checkpoint_of_a_folder_the_attempt_made(tmp_path):
    cell = planned_cell(tmp_path)
    planted_run(tmp_path, f"2026-01-01_00-00-00_{cell.key}", [entry("old.pt", 5, 500)], ("old.pt",))
    before = run_folders(cell, tmp_path)
    folder = planted_run(
        tmp_path, f"2026-01-02_00-00-00_{cell.key}", [entry("a.pt", 2, 200), entry("b.pt", 3, 300)], ("a.pt", "b.pt")
    )
    planted_run(tmp_path, "2026-01-03_00-00-00_fedcba9876543210", [entry("c.pt", 4, 400)], ("c.pt",))  # another cell
    again = retry(cell, {"status": "failed", "error": "boom", "wall_s": 2.0}, tmp_path, (before, set()))
    assert again.resume == {
        "checkpoint": str(folder / "b.pt"),
        "iterations": 3,
        "env_steps": 300,
        "wall_s": 2.0,
        "run_dir": str(folder),
    }
    assert (again.attempt, again.failures) == (2, ("boom",))


@pytest.mark.parametrize(
    "checkpoints, files",
    [
        ([entry("b.pt", 3, 300)], ()),  # listed, not on disk
        ([entry("../../../../outside.pt", 3, 300)], ()),  # outside the log root
        ([entry("b.pt", 10, 300)], ("b.pt",)),  # no iteration left to train
        ([entry("b.pt", 0, 0)], ("b.pt",)),
        ([entry("b.pt", "3", 300)], ("b.pt",)),  # not numbers
        ([entry("b.pt", 3, True)], ("b.pt",)),
        ([entry("b.pt", 3, -1)], ("b.pt",)),
        (["b.pt"], ("b.pt",)),
        ({"b.pt": 3}, ("b.pt",)),
    ],
)
def test_a_retry_starts_over_when_the_attempt_left_no_checkpoint_to_believe(tmp_path, checkpoints, files):
    (tmp_path / "outside.pt").write_bytes(b"planted")
    cell = planned_cell(tmp_path / "logs")
    planted_run(tmp_path / "logs", f"2026-01-02_00-00-00_{cell.key}", checkpoints, files)
    again = retry(cell, {"status": "failed", "error": "boom", "wall_s": 1.0}, tmp_path / "logs", (set(), set()))
    assert again.resume is None and again.attempt == 2


def test_a_retry_whose_attempt_left_nothing_here_goes_on_from_the_newest_checkpoint_in_storage(tmp_path):
    bucket = tmp_path / "bucket"
    cell = planned_cell(tmp_path / "logs", storage=str(bucket))
    planted_run(bucket, f"2026-01-01_00-00-00_{cell.key}", [entry("old.pt", 5, 500)], ("old.pt",))  # an earlier bench
    before = folders_before(cell, tmp_path / "logs")
    assert before == (set(), {f"2026-01-01_00-00-00_{cell.key}"})
    name = f"2026-01-02_00-00-00_{cell.key}"
    checkpoints = [entry("a.pt", 2, 200), entry("b.pt", 3, 300), entry("c.pt", 4, 400)]
    planted_run(bucket, name, checkpoints, ("a.pt", "b.pt"))  # c.pt listed, never sent: not believed
    again = retry(cell, {"status": "failed", "error": "node lost", "wall_s": 2.0}, tmp_path / "logs", before)
    folder = tmp_path / "logs" / "rsl_rl" / "bench" / name
    assert again.resume == {
        "checkpoint": str(folder / "b.pt"),
        "iterations": 3,
        "env_steps": 300,
        "wall_s": 2.0,
        "run_dir": str(folder),
        "stored": ["rsl_rl", "bench", name],
    }


@pytest.mark.parametrize(
    "checkpoints, files",
    [
        ([entry("b.pt", 3, 300)], ()),  # listed, not in the storage
        ([entry("../../../outside.pt", 3, 300)], ()),  # outside the folder
        ([entry("/abs/b.pt", 3, 300)], ()),
        ([entry("b.pt", 10, 300)], ("b.pt",)),  # no iteration left to train
        ([entry("b.pt", "3", 300)], ("b.pt",)),  # not numbers
        ([entry("linked.pt", 3, 300)], ()),  # a link in the storage
        ({"b.pt": 3}, ("b.pt",)),
    ],
)
def test_a_retry_starts_over_when_the_storage_holds_no_checkpoint_to_believe(tmp_path, checkpoints, files):
    bucket = tmp_path / "bucket"
    (bucket / "outside.pt").parent.mkdir(parents=True)
    (bucket / "outside.pt").write_bytes(b"planted")
    cell = planned_cell(tmp_path / "logs", storage=str(bucket))
    folder = planted_run(bucket, f"2026-01-02_00-00-00_{cell.key}", checkpoints, files)
    (folder / "linked.pt").symlink_to(bucket / "outside.pt")
    again = retry(cell, {"status": "failed", "error": "boom", "wall_s": 1.0}, tmp_path / "logs", (set(), set()))
    assert again.resume is None and again.attempt == 2


def test_a_stored_folder_there_before_the_round_is_not_the_attempts(tmp_path):
    bucket = tmp_path / "bucket"
    cell = planned_cell(tmp_path / "logs", storage=str(bucket))
    planted_run(bucket, f"2026-01-02_00-00-00_{cell.key}", [entry("b.pt", 3, 300)], ("b.pt",))
    before = folders_before(cell, tmp_path / "logs")
    again = retry(cell, {"status": "failed", "error": "boom", "wall_s": 1.0}, tmp_path / "logs", before)
    assert again.resume is None


def test_a_retry_refuses_a_stored_folder_that_holds_a_link_and_writes_nothing(tmp_path):
    bucket = tmp_path / "bucket"
    cell = planned_cell(tmp_path / "logs", storage=str(bucket))
    name = f"2026-01-02_00-00-00_{cell.key}"
    folder = planted_run(bucket, name, [entry("b.pt", 3, 300)], ("b.pt",))
    (tmp_path / "secret").write_text("not yours", encoding="utf-8")
    (folder / "metrics.csv").symlink_to(tmp_path / "secret")
    again = retry(cell, {"status": "failed", "error": "node lost", "wall_s": 1.0}, tmp_path / "logs", (set(), set()))
    row = run_cell(again)
    assert row["status"] == "failed" and row["error"].startswith("resuming from --storage: ")
    assert "'metrics.csv', which is not a file or a folder" in row["error"]
    assert "resumed from" not in str(row["note"])  # it did not
    assert not (tmp_path / "logs" / "rsl_rl" / "bench" / name).exists()
    before = folders_before(again, tmp_path / "logs")
    assert retry(again, row, tmp_path / "logs", before).resume is None  # the next attempt starts over


@pytest.mark.slow
def test_a_ray_cell_that_raises_is_retried_from_its_checkpoint(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    request = flaky_bench(tmp_path, monkeypatch, failures=1, executor="ray", workers=1, retries=1)
    result = rlrun.bench(request, check_leaks=False)  # Ray keeps threads and descriptors after `ray.shutdown()`
    ((row,),) = (result.rows,)
    assert row["status"] == "completed" and row["attempts"] == 2, row
    assert "the flaky task failed on purpose" in row["note"] and "at iteration 2" in row["note"]
    assert row["iterations"] == 4 and row["env_steps"] == 4 * ENV_STEPS_PER_ITERATION
