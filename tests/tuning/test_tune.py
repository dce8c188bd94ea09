"""`rlrun.tune`: the search space, the spec, and tiny studies (seconds each) on the inline executor."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("optuna")
import optuna

import rlrun
from rlrun import api
from rlrun.errors import InvalidArgument, UnknownConfigKey
from rlrun.hermetic import census
from rlrun.tuning import TuneRequest, load_spec
from rlrun.tuning.space import parse_enqueued, parse_space
from support import MEDDLING_TASK, SMALL_RSL_RL, drop_a_ctrl_c, two_nodes

SB3_SMALL = ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")


def tiny_study(out, **fields) -> TuneRequest:
    spec = {
        "task": "rlrun/CartPole-v1",
        "library": "sb3",
        "num_envs": 2,
        "iterations": 2,
        "n_trials": 2,
        "overrides": SB3_SMALL,
        "search_space": {"agent.learning_rate": "loguniform(1e-4, 1e-2)", "agent.n_epochs": "int(1, 4)"},
        "pruner": "none",
        "out": str(out),
    }
    spec.update(fields)
    return TuneRequest(**spec)


def trials_of(result) -> list[optuna.trial.FrozenTrial]:
    storage = optuna.storages.RDBStorage(result.storage)
    try:
        return optuna.load_study(study_name=result.study, storage=storage).get_trials()
    finally:
        storage.remove_session()
        storage.engine.dispose()


def dashboard_studies(storage: str) -> list[str]:
    """The study names optuna-dashboard's web app lists for a storage (its WSGI app, called without a server)."""
    import json
    from wsgiref.util import setup_testing_defaults

    import optuna_dashboard

    environ: dict = {}
    setup_testing_defaults(environ)
    environ["PATH_INFO"] = "/api/studies"
    status = []
    body = b"".join(optuna_dashboard.wsgi(storage)(environ, lambda code, headers, exc=None: status.append(code)))
    assert status == ["200 OK"], status
    return [summary["study_name"] for summary in json.loads(body)["study_summaries"]]


# --- the search space -----------------------------------------------------------------------------------------


def test_a_search_space_becomes_optuna_distributions_and_overrides():
    lr, epochs, arch = parse_space(
        {
            "agent.learning_rate": "loguniform(1e-5, 1e-2)",
            "agent.n_epochs": "int(1, 20)",
            "agent.policy_kwargs.net_arch": "choice([[16, 16], [64, 64]])",
        }
    )
    assert lr.distribution() == optuna.distributions.FloatDistribution(1e-5, 1e-2, log=True)
    assert epochs.distribution() == optuna.distributions.IntDistribution(1, 20)
    assert arch.distribution().choices == ("[16, 16]", "[64, 64]"), "lists are stored as JSON text"
    assert arch.override("[64, 64]") == "agent.policy_kwargs.net_arch=[64, 64]"
    assert lr.override(3e-4) == "agent.learning_rate=0.0003"
    assert parse_enqueued([{"agent.policy_kwargs.net_arch": [16, 16]}], (lr, epochs, arch)) == (
        {"agent.policy_kwargs.net_arch": "[16, 16]"},
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("lognormal(1, 2)", "Did you mean 'loguniform'"),
        ("uniform(2, 1)", "low must be below high"),
        ("loguniform(0, 1)", "positive low"),
        ("int(1.5, 3)", "int takes integers"),
        ("choice([])", "non-empty list"),
        ("choice([1, 1])", "twice"),
        ("uniform(a, b)", "literals"),
        ("0.5", "not a distribution"),
        ("uniform(1)", "two numbers"),
    ],
)
def test_a_bad_distribution_is_one_line_that_says_what_to_write(text, says):
    with pytest.raises(InvalidArgument, match=says) as raised:
        parse_space({"agent.gamma": text})
    assert "\n" not in str(raised.value) and "agent.gamma" in str(raised.value)


def test_a_spec_key_the_request_lacks_names_the_nearest(tmp_path):
    spec = tmp_path / "tune.yaml"
    spec.write_text("task: rlrun/CartPole-v1\nn_trial: 3\n", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="Did you mean 'n_trials'"):
        load_spec(spec)


def test_a_searched_key_the_library_lacks_is_refused_before_any_folder(tmp_path):
    out = tmp_path / "tune"
    with pytest.raises(UnknownConfigKey, match=r"search space: .*Did you mean .agent\.learning_rate"):
        rlrun.tune(tiny_study(out, search_space={"agent.learnig_rate": "loguniform(1e-4, 1e-2)"}))
    with pytest.raises(InvalidArgument, match="expects an integer"):
        rlrun.tune(tiny_study(out, search_space={"agent.n_epochs": "uniform(1, 4)"}))
    assert not out.exists()


# --- tiny studies ---------------------------------------------------------------------------------------------


def test_a_study_runs_its_trials_writes_its_outputs_and_resumes_to_n_trials(tmp_path):
    out = tmp_path / "tune"
    first = rlrun.tune(tiny_study(out, enqueue=({"agent.learning_rate": 1e-4, "agent.n_epochs": 1},)))
    assert (first.n_trials, first.completed, first.ran) == (2, 2, 2)
    trials = trials_of(first)
    assert trials[0].params == {"agent.learning_rate": 1e-4, "agent.n_epochs": 1}, "the enqueued trial runs first"
    assert first.best_trial in (0, 1) and first.best_params == trials[first.best_trial].params
    best = (out / "best.yaml").read_text(encoding="utf-8")
    assert f"n_epochs: {first.best_params['agent.n_epochs']}" in best and "n_steps: 8" in best
    assert (out / "study.db").is_file() and (out / "trials.csv").is_file() and (out / "report.md").is_file()
    assert len((out / "trials.csv").read_text(encoding="utf-8").splitlines()) == 3
    assert (out / "plots" / "history.png").is_file() and (out / "plots" / "parallel_coordinates.png").is_file()

    again = rlrun.tune(tiny_study(out, enqueue=({"agent.learning_rate": 1e-4, "agent.n_epochs": 1},)))
    assert (again.n_trials, again.ran) == (2, 0), "the same command again finds the study full"
    assert dashboard_studies(first.storage) == [first.study], "optuna-dashboard reads the study"

    more = rlrun.tune(tiny_study(out, n_trials=3, report=False))
    assert (more.n_trials, more.ran, more.completed) == (3, 1, 3)
    assert [trial.number for trial in trials_of(more)] == [0, 1, 2]
    assert [trial.value for trial in trials_of(more)][:2] == [trial.value for trial in trials]


def test_a_trial_that_raises_is_failed_and_the_study_goes_on(tmp_path):
    request = tiny_study(
        tmp_path / "tune",
        task=MEDDLING_TASK,
        library="rsl_rl",
        overrides=(*SMALL_RSL_RL, "env.max_episode_steps=8"),
        search_space={"env.fail_at": "choice([0, 12])"},
        enqueue=({"env.fail_at": 12}, {"env.fail_at": 0}),
    )
    result = rlrun.tune(request)
    assert (result.n_trials, result.completed, result.failed) == (2, 1, 1)
    failed, completed = trials_of(result)
    assert failed.state == optuna.trial.TrialState.FAIL and "exploded" in failed.user_attrs["error"]
    assert completed.state == optuna.trial.TrialState.COMPLETE and result.best_trial == 1


def test_an_inline_study_is_census_clean(tmp_path):
    rlrun.tune(tiny_study(tmp_path / "warm", n_trials=1))  # imports, fonts, dialects: import effects, once
    before = census.snapshot()
    rlrun.tune(tiny_study(tmp_path / "tune"))
    after = census.settle(before)
    assert census.compare(before, after) == []


def test_an_eval_return_objective_is_the_mean_return_rlrun_play_gives_the_trials_checkpoint(tmp_path):
    """`objective: eval_return` plays each trial's checkpoint through `rlrun.play` (the same evaluation request a
    bench cell makes): replaying the best run's checkpoint gives the trial's value."""
    from rlrun.sweep import evaluation

    result = rlrun.tune(
        tiny_study(tmp_path / "tune", n_trials=1, objective="eval_return", eval_episodes=3, seeds=(5,), report=False)
    )
    (trial,) = trials_of(result)
    assert trial.state == optuna.trial.TrialState.COMPLETE
    (run_dir,) = (tmp_path / "tune" / "runs" / "sb3").glob("*/*")
    checkpoint = max(run_dir.glob("*.zip"), key=lambda path: path.stat().st_mtime_ns)
    request = rlrun.TrainRequest(
        task="rlrun/CartPole-v1", library="sb3", seed=5, overrides=SB3_SMALL, log_root=str(tmp_path / "tune" / "runs")
    )
    assert trial.value == pytest.approx(rlrun.play(evaluation(request, checkpoint, 3)).mean_return)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped Ctrl-C itself
def test_a_ctrl_c_that_python_drops_in_a_finalizer_still_interrupts_the_running_trial(tmp_path, monkeypatch):
    """A SIGINT whose `KeyboardInterrupt` lands in a weakref finalizer is printed as "Exception ignored" and
    dropped by Python; the slow suite once saw a study run to its end through such a Ctrl-C. The tune worker
    remembers it: the trial is failed as interrupted, the study stops, and the caller's handler comes back."""
    import signal

    train = api.train

    def train_after_a_dropped_ctrl_c(*args, **kwargs):
        drop_a_ctrl_c()  # Python drops the KeyboardInterrupt raised in a finalizer
        return train(*args, **kwargs)

    monkeypatch.setattr(api, "train", train_after_a_dropped_ctrl_c)
    request = tiny_study(tmp_path / "tune")
    with pytest.raises(KeyboardInterrupt):
        rlrun.tune(request)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'tune' / 'study.db'}")
    try:
        (trial,) = optuna.load_study(study_name="tune", storage=storage).get_trials()
    finally:
        storage.remove_session()
        storage.engine.dispose()
    assert trial.state == optuna.trial.TrialState.FAIL and "interrupted" in trial.user_attrs["interrupted"]


@pytest.mark.slow
def test_a_sqlite_study_on_two_nodes_is_served_to_both_through_optunas_grpc_proxy(tmp_path, monkeypatch, capfd):
    """A real two-node Ray cluster whose second node has its own disk where the tune's out folder is (see
    `support.two_nodes`): the default study.db cannot be opened there, so the driver serves it through Optuna's gRPC
    proxy. Trials run on both nodes, none is lost, the count is exactly n_trials, and the proxy is gone after."""
    pytest.importorskip("ray")
    out, node_disk = tmp_path / "tune", tmp_path / "node-disk"
    with two_nodes(out, node_disk, monkeypatch) as (address, away_id):
        request = tiny_study(out, executor="ray", address=address, workers=2, n_trials=4, report=False)
        result = rlrun.tune(request, check_leaks=False, echo=True)  # Ray keeps threads after `ray.shutdown()`
    assert "through Optuna's gRPC proxy at grpc://" in capfd.readouterr().err
    assert (result.n_trials, result.completed, result.failed, result.lost_slots) == (4, 4, 0, 0)
    trials = trials_of(result)
    assert [trial.state for trial in trials].count(optuna.trial.TrialState.COMPLETE) == 4
    surplus = [trial for trial in trials if trial.state != optuna.trial.TrialState.COMPLETE]
    assert all("taken by trials asked before it" in trial.user_attrs["interrupted"] for trial in surplus)
    nodes = {trial.user_attrs["rlrun_node"] for trial in trials if trial.state == optuna.trial.TrialState.COMPLETE}
    assert away_id in nodes and len(nodes) == 2, "trials ran on both nodes"
    for trial in trials:
        if trial.state == optuna.trial.TrialState.COMPLETE:
            assert all(Path(run_dir).is_dir() for run_dir in trial.user_attrs["run_dirs"])  # home on this disk
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert "rlrun.tuning.proxy" not in processes, "the proxy ended with the tune"


def test_a_trial_asked_when_n_trials_are_taken_is_surplus_and_a_silent_one_is_reaped():
    """Without the file lock (the gRPC proxy, another database), `surplus` tells the later of two trials asked at
    once at the end; in a storage without Optuna's heartbeats, `reap` fails a RUNNING trial whose `rlrun_beat` is
    older than the grace period."""
    import time

    from rlrun.tuning import storage as studies

    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage)
    first, second = study.ask(), study.ask()
    assert not studies.surplus(study, first, 2) and not studies.surplus(study, second, 2)
    assert not studies.surplus(study, first, 1) and studies.surplus(study, second, 1)
    studies.beat(storage, first._trial_id)
    storage.set_trial_user_attr(second._trial_id, studies.BEAT, time.time() - 600)
    assert studies.reap(study, storage, locked=False, grace_s=300) == 1
    states = {trial.number: trial.state for trial in study.get_trials()}
    assert states == {0: optuna.trial.TrialState.RUNNING, 1: optuna.trial.TrialState.FAIL}
    assert "heartbeat stopped" in study.get_trials()[1].user_attrs["interrupted"]
    assert studies.reap(study, storage, locked=False, grace_s=0) == 0  # no grace: beats are not read


def test_a_module_task_keeps_its_module_in_every_trials_request(tmp_path):
    """A pool or Ray worker imports the module itself: the trial request must still name it."""
    from rlrun.hermetic import hermetic_call
    from rlrun.tuning.planning import plan_tune

    request = tiny_study(tmp_path / "tune", task="dying_task:RlrunTestDying-v0", library="sb3")
    with hermetic_call(name="test") as call:
        plan = plan_tune(call, request)
    assert plan.worker.request.task == "dying_task:RlrunTestDying-v0"
    assert not (tmp_path / "tune").exists()


# --- --retries: a failed trial runs again with the same parameters ----------------------------------------------

FLAKY = "dying_task:RlrunTestFlaky-v0"  # fails at its 20th step while the counter file says so


def flaky_study(tmp_path, monkeypatch, failures: int, **fields) -> TuneRequest:
    counter = tmp_path / "failures"
    counter.write_text(str(failures), encoding="utf-8")
    monkeypatch.setenv("RLRUN_TEST_FAILURES", str(counter))  # pool workers are spawned with it
    spec = {
        "task": FLAKY,
        "library": "rsl_rl",
        "overrides": SMALL_RSL_RL,
        "iterations": 4,  # 8 steps per iteration: the 20th step comes in the third
        "search_space": {"agent.algorithm.learning_rate": "loguniform(1e-4, 1e-2)"},
        "report": False,
        **fields,
    }
    return tiny_study(tmp_path / "tune", **spec)


def test_a_trial_that_raises_runs_again_with_the_same_parameters_in_its_place(tmp_path, monkeypatch):
    result = rlrun.tune(flaky_study(tmp_path, monkeypatch, failures=1, retries=1))
    assert (result.n_trials, result.completed, result.failed, result.retried, result.ran) == (2, 2, 0, 1, 3)
    failed, again, other = trials_of(result)
    assert failed.state == optuna.trial.TrialState.FAIL and "failed on purpose" in failed.user_attrs["error"]
    assert again.state == optuna.trial.TrialState.COMPLETE and again.params == failed.params
    assert [again.user_attrs[key] for key in ("rlrun_retry_for", "rlrun_retry_of", "rlrun_attempt")] == [0, 0, 2]
    assert "error" not in again.user_attrs and other.state == optuna.trial.TrialState.COMPLETE
    assert "rlrun_attempt" not in other.user_attrs


def test_a_trial_that_keeps_failing_stops_after_its_retries_and_counts_once(tmp_path, monkeypatch):
    result = rlrun.tune(flaky_study(tmp_path, monkeypatch, failures=5, retries=2, n_trials=1))
    assert (result.n_trials, result.completed, result.failed, result.retried) == (1, 0, 1, 2)
    trials = trials_of(result)
    assert [trial.user_attrs.get("rlrun_attempt", 1) for trial in trials] == [1, 2, 3]
    assert all(trial.state == optuna.trial.TrialState.FAIL for trial in trials)
    assert len({trial.params["agent.algorithm.learning_rate"] for trial in trials}) == 1
    assert (tmp_path / "failures").read_text(encoding="utf-8") == "2"


def test_a_trial_whose_worker_died_runs_again_in_a_spare_slot(tmp_path, monkeypatch):
    """The flaky task SIGKILLs the pool worker running the first trial: the spare slot reaps that trial (its pid is
    gone) and runs it again with the same parameters before asking a new one."""
    result = rlrun.tune(flaky_study(tmp_path, monkeypatch, failures=1, retries=1, executor="process", workers=1))
    assert (result.lost_slots, result.n_trials, result.completed, result.retried) == (1, 2, 2, 1)
    killed, again, other = trials_of(result)
    assert killed.state == optuna.trial.TrialState.FAIL and "ended" in killed.user_attrs["interrupted"]
    assert again.state == optuna.trial.TrialState.COMPLETE and again.params == killed.params
    assert again.user_attrs["rlrun_attempt"] == 2 and other.state == optuna.trial.TrialState.COMPLETE


def test_a_trials_run_folders_come_home_from_another_node(tmp_path, monkeypatch):
    """A slot on a node other than the driver's (`where().away`) sends each trial's run folders with its row; they
    are moved off the driver's disk when the slot ends (as a node's own disk keeps them), and the driver writes
    them back at the same paths, byte for byte."""
    import shutil
    from pathlib import Path

    from rlrun.executors.base import Where
    from rlrun.tuning import worker

    node_disk = tmp_path / "node-disk"
    moved: dict[str, Path] = {}
    run_worker = worker.run_worker

    def on_another_node(slot):
        rows = run_worker(slot)
        for row in rows:
            for run_dir in row["run_dirs"]:
                moved[run_dir] = node_disk / Path(run_dir).name
                shutil.move(run_dir, moved[run_dir])
        return rows

    monkeypatch.setattr(worker, "where", lambda: Where(node_id="f" * 56, host="node-2", away=True))
    monkeypatch.setattr(worker, "run_worker", on_another_node)
    result = rlrun.tune(tiny_study(tmp_path / "tune", report=False))
    assert result.completed == 2 and len(moved) == 2
    for trial in trials_of(result):
        (run_dir,) = trial.user_attrs["run_dirs"]
        home = Path(run_dir)
        assert home.is_dir() and sorted(p.name for p in home.rglob("*")) == sorted(
            p.name for p in moved[run_dir].rglob("*")
        )
        assert all(
            (home / p.relative_to(moved[run_dir])).read_bytes() == p.read_bytes()
            for p in moved[run_dir].rglob("*")
            if p.is_file()
        )


def test_a_study_says_on_stderr_when_it_draws_its_report_and_nothing_without_echo(tmp_path, capsys):
    rlrun.tune(tiny_study(tmp_path / "tune", n_trials=1), echo=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1] == f"tune: drawing the figures and report.md of 1 trial into {tmp_path / 'tune'}", lines
    rlrun.tune(tiny_study(tmp_path / "quiet", n_trials=1))
    assert "drawing" not in capsys.readouterr().err
