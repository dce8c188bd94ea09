"""Run directories and names: claimed atomically, one per run, never one that would break the layout."""

from __future__ import annotations

import datetime as dt
import multiprocessing
from pathlib import Path

import pytest

from rlrun import runs
from rlrun.errors import InvalidArgument


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
