"""A bench run again reuses a completed row only when the run folder it names vouches for it."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import rlrun
from support import SMALL_RSL_RL, bench_request, result_rows

pytest.importorskip("rsl_rl")


def tiny_bench(out: Path, **fields) -> rlrun.BenchRequest:
    spec = {"tasks": ("rlrun/Pendulum-v1",), "runs": ("rsl_rl",), "overrides": SMALL_RSL_RL}
    return bench_request(out, **{**spec, **fields})


lines = result_rows


def rewrite_row(out: Path, change) -> dict:
    results = out / "results.jsonl"
    (row,) = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    planted = change(dict(row), out)
    results.write_text(json.dumps(planted) + "\n", encoding="utf-8")
    return row


def test_an_honest_completed_row_is_reused_without_a_word(tmp_path):
    out = tmp_path / "bench"
    first = rlrun.bench(tiny_bench(out))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = rlrun.bench(tiny_bench(out))
    assert (again.reused, again.completed) == (1, 1) and again.rows == first.rows


def another_cells_run(row: dict, out: Path) -> dict:
    other = rlrun.bench(tiny_bench(out, seeds=(1,)))  # the same bench folder, another seed
    return {**row, "run_dir": other.rows[0]["run_dir"], "checkpoint": other.rows[0]["checkpoint"]}


def outside_copy(row: dict, out: Path) -> dict:
    copy = out.parent / "elsewhere"
    shutil.copytree(row["run_dir"], copy)
    return {**row, "run_dir": str(copy), "checkpoint": str(copy / Path(row["checkpoint"]).name)}


def removed_folder(row: dict, out: Path) -> dict:
    shutil.rmtree(row["run_dir"])
    return row


def marked_failed(row: dict, out: Path) -> dict:
    manifest = Path(row["run_dir"]) / "run.json"
    text = manifest.read_text(encoding="utf-8").replace('"status": "completed"', '"status": "failed"')
    manifest.write_text(text, encoding="utf-8")
    return row


PLANTED = {
    "a return of 1e6": (lambda row, out: {**row, "final_return": 1e6}, "final return 1000000.0"),
    "a finite return where the run had none": (lambda row, out: {**row, "final_return": 3.0}, "final return 3.0"),
    "env steps doubled": (lambda row, out: {**row, "env_steps": row["env_steps"] * 2}, "env steps"),
    "env steps as text": (lambda row, out: {**row, "env_steps": str(row["env_steps"])}, "env steps"),
    "no run folder": (lambda row, out: {**row, "run_dir": None}, "names no run folder"),
    "a relative run folder": (lambda row, out: {**row, "run_dir": "runs/x"}, "names no run folder"),
    "a run folder outside the log root": (outside_copy, "outside the bench's log root"),
    "a run folder that is gone": (removed_folder, "no readable run.json"),
    "a run that failed": (marked_failed, "not a completed training of this cell"),
    "another cell's run": (another_cells_run, "not a completed training of this cell"),
    "another checkpoint": (
        lambda row, out: {**row, "checkpoint": str(Path(row["run_dir"]) / "model_0.pt")},
        "checkpoint",
    ),
    "no checkpoint": (lambda row, out: {**row, "checkpoint": None}, "checkpoint"),
}


@pytest.mark.parametrize("case", PLANTED)
def test_a_completed_row_its_run_folder_does_not_vouch_for_trains_again_with_a_warning(tmp_path, case):
    out = tmp_path / "bench"
    rlrun.bench(tiny_bench(out))
    change, says = PLANTED[case]
    honest = rewrite_row(out, change)
    with pytest.warns(UserWarning, match="is not reused") as caught:
        again = rlrun.bench(tiny_bench(out))
    assert says in str(caught[0].message) and "\n" not in str(caught[0].message)
    assert (again.reused, again.completed) == (0, 1)
    (row,) = [row for row in again.rows if row["seed"] == 0]
    assert row["final_return"] == honest["final_return"] and row["env_steps"] == honest["env_steps"]
    # trained again into a new folder (the name of a removed one, when it starts in the same second)
    assert Path(row["run_dir"], "run.json").is_file() and row["run_dir"] in {r["run_dir"] for r in lines(out)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rlrun.bench(tiny_bench(out)).reused == 1  # the new row is vouched for
