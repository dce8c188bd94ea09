"""Studies that show what `rlrun tune` is for: slow, learning on rlrun/CartPole-v1 with SB3.

A tiny study beats a deliberately poor start; a hopeless trial is pruned before its budget ends; inline and
two-worker runs finish the same number of trials; SIGKILL or Ctrl-C of the tune process loses no finished trial
and a rerun completes the study.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("optuna")
import optuna

import rlrun
from rlrun.tuning import TuneRequest, load_spec

pytestmark = pytest.mark.slow

SB3_SMALL = ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")
POOR = {"agent.learning_rate": 1e-6, "agent.n_epochs": 1}
GOOD = {"agent.learning_rate": 2e-3, "agent.n_epochs": 20}
SPACE = {"agent.learning_rate": "loguniform(1e-6, 3e-2)", "agent.n_epochs": "int(1, 20)"}


def trials_of(storage_url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    storage = optuna.storages.RDBStorage(storage_url)
    try:
        return optuna.load_study(study_name=study, storage=storage).get_trials()
    finally:
        storage.remove_session()
        storage.engine.dispose()


def test_a_tiny_study_beats_a_deliberately_poor_start(tmp_path):
    result = rlrun.tune(
        TuneRequest(
            task="rlrun/CartPole-v1",
            library="sb3",
            env_steps=16_384,
            n_trials=12,
            search_space=SPACE,
            enqueue=(POOR,),
            out=str(tmp_path / "tune"),
        )
    )
    trials = trials_of(result.storage, result.study)
    poor = trials[0]
    assert poor.params == POOR and poor.state == optuna.trial.TrialState.COMPLETE
    assert result.n_trials == 12 and result.completed >= 6
    assert result.best_value is not None and result.best_value > poor.value + 20, (result.best_value, poor.value)
    assert (tmp_path / "tune" / "best.yaml").is_file()


def test_a_hopeless_trial_is_pruned_before_its_budget_ends(tmp_path):
    result = rlrun.tune(
        TuneRequest(
            task="rlrun/CartPole-v1",
            library="sb3",
            env_steps=16_384,
            n_trials=3,
            startup_trials=2,
            search_space=SPACE,
            enqueue=(GOOD, {**GOOD, "agent.learning_rate": 3e-3}, POOR),
            out=str(tmp_path / "tune"),
            report=False,
        )
    )
    good, other, hopeless = trials_of(result.storage, result.study)
    assert good.state == other.state == optuna.trial.TrialState.COMPLETE
    assert hopeless.state == optuna.trial.TrialState.PRUNED
    assert hopeless.user_attrs["env_steps"] < 16_384, "pruned at an iteration boundary before the budget"
    assert result.pruned == 1 and result.n_trials == 3
    metrics = Path(hopeless.user_attrs["run_dirs"][0]) / "metrics.csv"
    assert len(metrics.read_text(encoding="utf-8").splitlines()) - 1 < 32, "its curve stops where it was pruned"


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_inline_and_two_workers_finish_the_same_number_of_trials(tmp_path, executor):
    result = rlrun.tune(
        TuneRequest(
            task="rlrun/CartPole-v1",
            library="sb3",
            num_envs=2,
            iterations=4,
            n_trials=5,
            overrides=SB3_SMALL,
            search_space={"agent.learning_rate": "loguniform(1e-4, 1e-2)"},
            pruner="none",
            executor=executor,
            workers=2,
            out=str(tmp_path / "tune"),
            report=False,
        )
    )
    trials = trials_of(result.storage, result.study)
    assert (result.n_trials, result.completed, result.ran) == (5, 5, 5)
    assert [trial.number for trial in trials] == list(range(5))
    assert all(trial.state == optuna.trial.TrialState.COMPLETE for trial in trials)
    assert {(trial.user_attrs["rlrun_host"], trial.user_attrs["rlrun_node"]) for trial in trials} == {
        (socket.gethostname(), None)
    }, "where each trial ran: this host, on no Ray node"
    if executor == "process":
        pids = {trial.user_attrs["rlrun_pid"] for trial in trials}
        assert len(pids) == 2 and os.getpid() not in pids, "two workers shared the study"


def _spec(tmp_path: Path, n_trials: int) -> Path:
    spec = tmp_path / "tune.yaml"
    spec.write_text(
        "task: rlrun/CartPole-v1\nlibrary: sb3\nnum_envs: 2\niterations: 80\n"
        f"n_trials: {n_trials}\npruner: none\nreport: false\nout: {tmp_path / 'tune'}\n"
        f"overrides: [{', '.join(repr(word) for word in SB3_SMALL)}]\n"
        "search_space: {agent.learning_rate: 'loguniform(1e-4, 1e-2)'}\n",
        encoding="utf-8",
    )
    return spec


def _start(spec: Path) -> subprocess.Popen:
    code = "import sys, rlrun; sys.exit(rlrun.main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, "tune", str(spec)], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _states(database: Path) -> list[str]:
    """The trials' states, read straight from SQLite, read-only (an Optuna storage would make the tables)."""
    if not database.is_file():
        return []
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        return [state for (state,) in connection.execute("SELECT state FROM trials ORDER BY number")]
    except sqlite3.OperationalError:  # the tables are not there yet
        return []
    finally:
        connection.close()


def _wait_for(database: Path, finished: int, process: subprocess.Popen, limit: float = 240.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        states = _states(database)
        if states.count("COMPLETE") >= finished and "RUNNING" in states:
            return
        time.sleep(0.2)
    raise AssertionError("the study did not get going")


def test_a_study_killed_with_sigkill_resumes_and_loses_no_finished_trial(tmp_path):
    spec = _spec(tmp_path, n_trials=3)
    url = f"sqlite:///{tmp_path / 'tune' / 'study.db'}"
    process = _start(spec)
    try:
        _wait_for(tmp_path / "tune" / "study.db", 1, process)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    before = {trial.number: trial for trial in trials_of(url, "tune")}
    finished = {number: trial.value for number, trial in before.items() if trial.state.is_finished()}
    assert len(finished) >= 1 and any(trial.state == optuna.trial.TrialState.RUNNING for trial in before.values())

    result = rlrun.tune(load_spec(spec))
    after = {trial.number: trial for trial in trials_of(url, "tune")}
    assert {number: after[number].value for number in finished} == finished, "no finished trial lost or rerun"
    killed = [trial for trial in after.values() if trial.state == optuna.trial.TrialState.FAIL]
    assert len(killed) == 1 and killed[0].user_attrs["interrupted"]
    assert result.n_trials == 3 and result.completed == 3, "the killed trial's place is taken by a new one"
    assert not any(trial.state == optuna.trial.TrialState.RUNNING for trial in after.values())


def test_ctrl_c_fails_the_running_trial_as_interrupted_and_exits_130(tmp_path):
    spec = _spec(tmp_path, n_trials=2)
    url = f"sqlite:///{tmp_path / 'tune' / 'study.db'}"
    process = _start(spec)
    try:
        _wait_for(tmp_path / "tune" / "study.db", 0, process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, err
    trials = trials_of(url, "tune")
    assert not any(trial.state == optuna.trial.TrialState.RUNNING for trial in trials), "the study is consistent"
    interrupted = [trial for trial in trials if trial.state == optuna.trial.TrialState.FAIL]
    assert len(interrupted) == 1 and "interrupted" in interrupted[0].user_attrs["interrupted"]
    result = rlrun.tune(load_spec(spec))
    assert (result.n_trials, result.completed) == (2, 2)


def _running_pid(database: Path) -> int | None:
    """The process id recorded on the study's RUNNING trial, read straight from SQLite, read-only."""
    if not database.is_file():
        return None
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        found = connection.execute(
            "SELECT a.value_json FROM trial_user_attributes a JOIN trials t ON a.trial_id = t.trial_id "
            "WHERE a.key = 'rlrun_pid' AND t.state = 'RUNNING'"
        ).fetchone()
    except sqlite3.OperationalError:  # the tables are not there yet
        return None
    finally:
        connection.close()
    return None if found is None else int(found[0])


def test_a_dead_worker_slot_is_replaced_and_counted(tmp_path):
    """The pool worker running the first trial is SIGKILLed: that trial fails as interrupted (not counted), the
    slot is lost, a spare takes its place and the study still ends with `n_trials` completed; the result counts
    the lost slot."""
    out = tmp_path / "tune"
    killed: list[int] = []

    def kill_the_first_trial() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            pid = _running_pid(out / "study.db")
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_first_trial)
    killer.start()
    try:
        result = rlrun.tune(
            TuneRequest(
                task="rlrun/CartPole-v1",
                library="sb3",
                num_envs=2,
                iterations=40,
                n_trials=2,
                overrides=SB3_SMALL,
                search_space={"agent.learning_rate": "loguniform(1e-4, 1e-2)"},
                pruner="none",
                executor="process",
                workers=1,
                out=str(out),
                report=False,
            ),
            check_leaks=False,  # the killer thread ends during the call
        )
    finally:
        killer.join()
    assert killed and killed[0] != os.getpid()
    assert (result.lost_slots, result.completed, result.n_trials, result.ran) == (1, 2, 2, 2)
    first, *rest = trials_of(result.storage, result.study)
    assert first.state == optuna.trial.TrialState.FAIL and "ended" in first.user_attrs["interrupted"]
    assert [trial.state for trial in rest] == [optuna.trial.TrialState.COMPLETE] * 2
