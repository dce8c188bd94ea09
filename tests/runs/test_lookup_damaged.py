"""Checkpoint lookup over runs that are damaged, copied away, interrupted or many: `runs.resolve_checkpoint`.

Every refusal is a one-line `UserError` that names the run (or the pattern) and creates no file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlrun import runs
from rlrun.errors import CheckpointNotFound, CorruptRun, InvalidArgument, UserError

TASK = "T"
LIBRARY = "rsl_rl"
EXPERIMENT = "T"  # the task's default experiment folder (runs.experiment_name("T"))


def make_run(root, name, created_at, checkpoints, *, experiment=EXPERIMENT, task=TASK, **fields):
    run_dir = root / LIBRARY / experiment / name
    run_dir.mkdir(parents=True)
    for entry in checkpoints:
        (run_dir / entry["file"]).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / entry["file"]).write_bytes(b"weights")
    manifest = {"library": LIBRARY, "task": task, "created_at": created_at, "checkpoints": checkpoints, **fields}
    runs.write_manifest(run_dir, manifest)
    return run_dir


def resolve(root, selector="latest", **options):
    return runs.resolve_checkpoint(selector, log_root=root, library=LIBRARY, task=TASK, **options)


def files(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


def refused(error_type, root, selector="latest", **options) -> str:
    """Resolve, expecting `error_type`; check the message is one line and that no file appeared; return it."""
    before = files(root)
    with pytest.raises(error_type) as caught:
        resolve(root, selector, **options)
    message = str(caught.value)
    assert isinstance(caught.value, UserError) and "\n" not in message
    assert files(root) == before
    return message


# --- run.json that does not parse or is malformed ------------------------------------------------------------

BROKEN_MANIFESTS = {
    "checkpoints null": (
        '{"library": "rsl_rl", "task": "T", "created_at": "2026-03-01", "checkpoints": null}',
        "checkpoints null, not a list",
    ),
    "entry without file": (
        '{"library": "rsl_rl", "task": "T", "checkpoints": [{"iteration": 3}]}',
        "checkpoints[0] without a 'file' name",
    ),
    "entry not an object": ('{"library": "rsl_rl", "task": "T", "checkpoints": ["model_3.pt"]}', "not an object"),
    "file not a string": ('{"library": "rsl_rl", "task": "T", "checkpoints": [{"file": 3}]}', "without a 'file'"),
    "file outside the run": (
        '{"library": "rsl_rl", "task": "T", "checkpoints": [{"file": "../other/model_1.pt"}]}',
        "not a path inside the run",
    ),
    "iteration a string": (
        '{"library": "rsl_rl", "task": "T", "checkpoints": [{"file": "model_1.pt", "iteration": "1"}]}',
        'iteration "1", not a number',
    ),
    "mean_return a string": (
        '{"library": "rsl_rl", "task": "T", "checkpoints": [{"file": "model_1.pt", "mean_return": "high"}]}',
        "mean_return",
    ),
    "library not a string": ('{"library": 5, "task": "T", "checkpoints": []}', "library 5, not a string"),
    "a list, not an object": ('[{"file": "model_1.pt"}]', "holds a list, not an object"),
    "truncated": ('{"library": "rsl_rl", "task": "T", "checkpoints": [{"fi', "does not parse as JSON"),
    "empty": ("", "does not parse as JSON"),
    "not UTF-8": (b"\xff\xfe\x00garbage", "not UTF-8"),
}


def make_broken_run(root, name="2026-03-01_09-00-00", text="", experiment=EXPERIMENT):
    run_dir = root / LIBRARY / experiment / name
    run_dir.mkdir(parents=True)
    (run_dir / "model_1.pt").write_bytes(b"weights")
    manifest = run_dir / runs.MANIFEST
    manifest.write_bytes(text) if isinstance(text, bytes) else manifest.write_text(text)
    return run_dir


@pytest.mark.parametrize("case", list(BROKEN_MANIFESTS))
def test_a_broken_newest_run_is_named_not_skipped_for_an_older_one(case, tmp_path):
    text, reason = BROKEN_MANIFESTS[case]
    make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "model_9.pt", "mean_return": 9.0}])
    broken = make_broken_run(tmp_path, text=text)
    for selector, options in (("latest", {}), ("best", {}), ("model_1.pt", {}), ("latest", {"load_run": broken.name})):
        message = refused(CorruptRun, tmp_path, selector, **options)
        assert str(broken) in message and reason in message and "repair or delete" in message
    message = refused(CorruptRun, tmp_path, str(broken / "model_1.pt"))  # a path inside it, too
    assert str(broken) in message


def test_a_broken_run_older_than_the_chosen_one_does_not_block_latest_but_blocks_best(tmp_path):
    broken = make_broken_run(tmp_path, "2026-01-01_09-00-00", '{"library": "rsl_rl", "task": "T", "checkpoints": 1}')
    newest = make_run(tmp_path, "2026-02-01_09-00-00", "2026-02-01T08:00:00+00:00", [{"file": "model_1.pt"}])
    assert resolve(tmp_path) == (newest / "model_1.pt", runs.read_run(newest))
    assert str(broken) in refused(CorruptRun, tmp_path, "best")  # it might hold the best checkpoint
    assert resolve(tmp_path, "best", load_run=newest.name)[0] == newest / "model_1.pt"  # the way around it


def test_broken_runs_of_other_tasks_or_elsewhere_do_not_count_unless_named(tmp_path):
    sound = make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "model_1.pt", "mean_return": 1.0}])
    make_broken_run(tmp_path, "2026-05-01_09-00-00", '{"library": "rsl_rl", "task": "Other", "checkpoints": null}')
    elsewhere = make_broken_run(tmp_path, "2026-05-02_09-00-00", "{", experiment="someone-elses")
    assert resolve(tmp_path)[0] == resolve(tmp_path, "best")[0] == sound / "model_1.pt"
    assert str(elsewhere) in refused(CorruptRun, tmp_path, load_run=elsewhere.name)
    assert str(elsewhere) in refused(CorruptRun, tmp_path, load_run="2026-05-02_.*")


def test_a_run_whose_manifest_is_sound_is_unaffected_by_extra_fields(tmp_path):
    run_dir = make_run(
        tmp_path,
        "2026-01-01_09-00-00",
        "2026-01-01",
        [{"file": "checkpoints/agent_8.pt", "iteration": 1, "env_steps": 64, "mean_return": None, "note": "x"}],
        status="completed",
        parent=None,
    )
    assert resolve(tmp_path, "best") == (run_dir / "checkpoints/agent_8.pt", runs.read_run(run_dir))
    assert runs.manifest_problem(runs.read_manifest(run_dir)) is None


def test_read_run_names_a_missing_or_broken_manifest(tmp_path):
    with pytest.raises(CorruptRun, match="is not a run folder"):
        runs.read_run(tmp_path)
    (tmp_path / runs.MANIFEST).write_text("[]")
    with pytest.raises(CorruptRun, match=f"run '{tmp_path}' cannot be used: its run.json holds a list"):
        runs.read_run(tmp_path)


# --- --load_run ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["2026-01-01_[", "*", "(unclosed", "a{2,1}", "x+++"])
def test_a_load_run_that_is_not_a_regex_is_one_line_naming_it_and_the_fix(pattern, tmp_path):
    make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "model_1.pt"}])
    message = refused(InvalidArgument, tmp_path, load_run=pattern)
    assert f"--load_run {pattern!r}" in message and "nor a valid regular expression" in message
    assert "escape" in message
    refused(InvalidArgument, tmp_path / "empty", load_run=pattern)  # with no runs at all, the same


def test_a_run_folder_name_is_taken_as_a_name_before_a_pattern(tmp_path):
    exact = make_run(tmp_path, "2026-01-01_09-00-00_x+++", "2026-01-01", [{"file": "model_1.pt"}])
    assert resolve(tmp_path, load_run=exact.name)[0] == exact / "model_1.pt"  # `x+++` alone is no regex


# --- --checkpoint best -------------------------------------------------------------------------------------------


def test_best_looks_across_runs_and_never_prefers_unscored_checkpoints(tmp_path):
    parent = make_run(
        tmp_path,
        "2026-01-01_09-00-00",
        "2026-01-01",
        [{"file": "model_10.pt", "mean_return": 20.0}, {"file": "model_20.pt", "mean_return": 80.0}],
    )
    make_run(  # resumed from the parent: newer, its checkpoints unscored (or NaN)
        tmp_path,
        "2026-02-01_09-00-00",
        "2026-02-01",
        [{"file": "model_30.pt", "mean_return": None}, {"file": "model_40.pt", "mean_return": float("nan")}],
    )
    assert resolve(tmp_path, "best") == (parent / "model_20.pt", runs.read_run(parent))
    better = make_run(tmp_path, "2026-03-01_09-00-00", "2026-03-01", [{"file": "model_5.pt", "mean_return": 81}])
    assert resolve(tmp_path, "best")[0] == better / "model_5.pt"
    entry = runs.checkpoint_entry(runs.read_run(better), better / "model_5.pt")
    assert entry is not None and entry["mean_return"] == 81


def test_best_keeps_to_the_matching_runs_and_ties_go_to_the_newest(tmp_path):
    make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "a.pt", "mean_return": 50.0}])
    newer = make_run(tmp_path, "2026-02-01_09-00-00", "2026-02-01", [{"file": "b.pt", "mean_return": 50.0}])
    make_run(tmp_path, "2026-03-01_09-00-00", "2026-03-01", [{"file": "c.pt", "mean_return": 99.0}], task="Other")
    make_run(tmp_path, "2026-04-01_09-00-00", "2026-04-01", [{"file": "d.pt", "mean_return": 99.0}], algorithm="sac")
    assert resolve(tmp_path, "best", match={"algorithm": "ppo"})[0] == newer / "b.pt"


def test_best_without_any_score_is_latest(tmp_path):
    make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "a.pt"}])
    newest = make_run(tmp_path, "2026-02-01_09-00-00", "2026-02-01", [{"file": "b.pt"}, {"file": "c.pt"}])
    assert resolve(tmp_path, "best")[0] == newest / "c.pt"


# --- checkpoints outside their run -------------------------------------------------------------------------------


def test_a_checkpoint_copied_out_of_its_run_has_no_run_and_one_in_a_subfolder_finds_its_own(tmp_path):
    run_dir = make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "checkpoints/agent_8.pt"}])
    copied = tmp_path / "copies" / "agent_8.pt"
    copied.parent.mkdir()
    copied.write_bytes((run_dir / "checkpoints/agent_8.pt").read_bytes())
    assert resolve(tmp_path, str(copied)) == (copied, None)
    path, run = resolve(tmp_path, str(run_dir / "checkpoints/agent_8.pt"))
    assert path == run_dir / "checkpoints/agent_8.pt" and run is not None and run.path == run_dir
    unlisted = run_dir / "videos" / "agent_9.pt"  # in a run folder, but not one of its checkpoints
    unlisted.parent.mkdir()
    unlisted.write_bytes(b"weights")
    assert resolve(tmp_path, str(unlisted)) == (unlisted, None)


def test_a_checkpoint_beside_a_broken_run_json_is_named(tmp_path):
    broken = make_broken_run(tmp_path, text='{"checkpoints": [')
    assert str(broken) in refused(CorruptRun, tmp_path, str(broken / "model_1.pt"))


# --- leftovers of interrupted writes -----------------------------------------------------------------------------


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_temporaries_left_by_a_killed_writer_are_never_taken_for_checkpoints(tmp_path):
    run_dir = make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "model_1.pt", "mean_return": 1.0}])
    pid = dead_pid()
    folder = run_dir / f".model_2.pt.{pid}.x7{runs.TEMPORARY_SUFFIX}"  # what `atomic_path` writes in
    folder.mkdir()
    (folder / "model_2.pt").write_bytes(b"half a checkpoint")
    (run_dir / f".run.json.{pid}.y8{runs.TEMPORARY_SUFFIX}").write_text('{"library": "rsl_rl", "ta')  # older form
    assert resolve(tmp_path)[0] == resolve(tmp_path, "best")[0] == run_dir / "model_1.pt"
    for selector, options in (
        (str(folder / "model_2.pt"), {}),
        (f"{folder.name}/model_2.pt", {"load_run": run_dir.name}),
        (str(run_dir / f".run.json.{pid}.y8{runs.TEMPORARY_SUFFIX}"), {}),
    ):
        message = refused(CheckpointNotFound, tmp_path, selector, **options)
        assert "temporary file left by an interrupted write" in message
    runs.atomic_write_text(run_dir / "notes.txt", "next write")  # the next write there removes them
    assert not list(run_dir.glob(f"*{runs.TEMPORARY_SUFFIX}"))


def test_lookups_never_write(tmp_path):
    make_run(tmp_path, "2026-01-01_09-00-00", "2026-01-01", [{"file": "model_1.pt"}])
    before = {path: path.stat().st_mtime_ns for path in files(tmp_path)}
    for selector in ("latest", "best", "model_1.pt"):
        resolve(tmp_path, selector)
    assert {path: path.stat().st_mtime_ns for path in files(tmp_path)} == before
    assert json.loads((tmp_path / LIBRARY / EXPERIMENT / "2026-01-01_09-00-00" / "run.json").read_text())
    assert os.listdir(tmp_path / LIBRARY / EXPERIMENT) == ["2026-01-01_09-00-00"]
