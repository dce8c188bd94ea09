"""A tuner's worker: the ask, train, tell loop that every executor runs against the shared study.

`run_worker(worker)` is the module-level function the executors run, one item per worker slot: in this process
(inline), in a pool worker or as a Ray task. Each slot reopens the study from its storage URL and loops: ask a
trial (the sampler sees every finished and running trial in the storage), train it as hermetic `rlrun.train`
calls, one per seed, feeding the pruner from the live curve (`on_iteration`), and tell the outcome. The loop
ends when the study holds `n_trials` counted trials and none is running.

Which trials count towards `n_trials`, and how a dead process's trial is failed: `rlrun.tuning.storage`.

No trial runs twice: each is created by one `study.ask` (a storage transaction) and run by the slot that asked
it. On SQLite, the count and the ask happen under a file lock beside the database, so that slots and other
`rlrun tune` processes sharing the study never overshoot `n_trials`; without the lock (another database, or the
gRPC proxy that serves a SQLite study to other nodes), a slot whose new trial finds `n_trials` taken by trials
asked before it fails it at once as interrupted (not counted). A trial left RUNNING by a process that died is
failed (as interrupted) by the next slot that looks: at once when its process ran on this host (its pid is
gone), else once its heartbeat (recorded at iteration boundaries; Optuna's, or rlrun's `rlrun_beat` through
the proxy) is older than the grace period.

Importing this module imports `rlrun.tuning.storage`, which imports Optuna and warms its storage up once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from rlrun import api
from rlrun.api.requests import TrainRequest
from rlrun.errors import TrainingStopped
from rlrun.executors import where
from rlrun.runs.metrics import IterationRow
from rlrun.runs.transfer import pack_runs
from rlrun.signals import LATCH, inner
from rlrun.sweep import evaluation, one_line
from rlrun.tuning.space import Param
from rlrun.tuning.storage import (
    Owner,
    beat,
    close_storage,
    count,
    make_pruner,
    make_sampler,
    open_storage,
    quiet_optuna,
    reap,
    retry_failed,
    storage_lock,
    surplus,
)

FINAL_ROWS = 5
"""`final_return` is the mean of the last this many `metrics.csv` returns of a training (fewer if it has fewer)."""
REPORT_POINTS = 100
"""An env-step budget is reported to the pruner on a grid of this many points, the same for every trial, so that
trials whose iterations differ in size (a searched `n_steps`) are compared at the same steps."""
RUN_ARCHIVES = "run_archives"
"""The key of a trial row that carries its run folders from another node, by path (`rlrun.runs.transfer`)."""
POLL_S = 1.0
"""How often a slot whose study is full looks again while other trials still run."""


@dataclass(frozen=True)
class TuneWorker:
    """Everything a slot needs, picklable: where the study is, what a trial trains, how it is judged."""

    storage: str
    """The SQLAlchemy URL of the study's storage."""
    study: str
    lock: str | None
    """A file beside a SQLite database, locked around count and ask (None: no lock)."""
    n_trials: int
    params: tuple[Param, ...]
    request: TrainRequest
    """The trials' training request: task, library, algorithm, framework, fixed overrides, log_root."""
    seeds: tuple[int, ...]
    env_steps: int | None
    iterations: int | None
    seconds: float | None
    objective: str
    eval_episodes: int
    sampler: str
    pruner: str
    startup_trials: int
    seed: int
    heartbeat_s: int
    grace_s: int
    retries: int = 0
    """How many times a failed trial runs again (`rlrun.tuning.storage.retry`)."""
    echo: bool = False
    tune_pid: int = 0
    """The `rlrun tune` process: a worker in another process stops when it is orphaned (its parent changed)."""
    slot: int = 0


def total_steps(worker: TuneWorker) -> int:
    """A trial's whole budget in the pruner's units: every seed's env steps, or iterations, one after another."""
    per_seed = worker.env_steps if worker.env_steps is not None else worker.iterations
    assert per_seed is not None
    return per_seed * len(worker.seeds)


def load(worker: TuneWorker, storage: optuna.storages.BaseStorage) -> optuna.Study:
    return optuna.load_study(
        study_name=worker.study,
        storage=storage,
        sampler=make_sampler(worker.sampler, worker.seed, worker.startup_trials),
        pruner=make_pruner(worker.pruner, worker.startup_trials, total_steps(worker)),
    )


# --- the loop -------------------------------------------------------------------------------------------------


class _Orphaned(Exception):
    """The process that started this worker is gone: stop tuning."""


def run_worker(worker: TuneWorker) -> list[dict[str, Any]]:
    """One slot's loop (see the module docstring); returns a row per trial it ran. Ctrl-C or SIGTERM fails the
    running trial as interrupted, then propagates."""
    with quiet_optuna(), LATCH.installed(), inner():  # a stopped trial is the tune's to report
        return _work(worker)


def _work(worker: TuneWorker) -> list[dict[str, Any]]:
    storage = open_storage(worker.storage, worker.heartbeat_s, worker.grace_s)
    rows: list[dict[str, Any]] = []
    parent = os.getppid()
    try:
        study = load(worker, storage)
        distributions = {param.key: param.distribution() for param in worker.params}
        while True:
            LATCH.check()
            with storage_lock(worker.lock):
                reap(study, storage, locked=worker.lock is not None, retries=worker.retries, grace_s=worker.grace_s)
                trials = study.get_trials(deepcopy=False)
                trial = None
                waiting = any(item.state == TrialState.WAITING for item in trials)
                if waiting or count(trials) < worker.n_trials:
                    seed = (worker.seed * 1_000_003 + len(trials)) % 2**32
                    study.sampler = make_sampler(worker.sampler, seed, worker.startup_trials)
                    trial = _ask(study, storage, distributions)
                    if not waiting and worker.lock is None and surplus(study, trial, worker.n_trials):
                        _fail(study, trial, interrupted="n_trials were taken by trials asked before it")
                        trial = None
                elif not any(item.state == TrialState.RUNNING for item in trials):
                    break
            if trial is None:
                time.sleep(POLL_S)  # trials of other slots or processes are still running: they may fail
                continue
            try:
                rows.append(run_trial(study, storage, trial, worker, parent))
            except _Orphaned:
                break
    finally:
        close_storage(storage)
    return rows


def _ask(
    study: optuna.Study, storage: optuna.storages.BaseStorage, distributions: dict[str, Any]
) -> optuna.trial.Trial:
    """Ask a trial and mark it as this process's, failing it if anything interrupts the marking."""
    trial = study.ask(distributions)
    try:
        owner = Owner.here()
        beat(storage, trial._trial_id)
        trial.set_user_attr("rlrun_host", owner.host)
        trial.set_user_attr("rlrun_pid", owner.pid)
        trial.set_user_attr("rlrun_node", where().node_id)
    except BaseException:
        _fail(study, trial, interrupted="interrupted before it started")
        raise
    return trial


def _fail(study: optuna.Study, trial: optuna.trial.Trial, *, error: str = "", interrupted: str = "") -> None:
    """Record a trial as failed: on its own (`error`, counted) or interrupted (not counted)."""
    with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
        if error:
            trial.set_user_attr("error", error)
        if interrupted:
            trial.set_user_attr("interrupted", interrupted)
    study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)


class _Curve:
    """A trial's `on_iteration`: heartbeats, the pruner's reports, the seconds budget, an orphan check."""

    def __init__(
        self,
        trial: optuna.trial.Trial,
        storage: optuna.storages.BaseStorage,
        worker: TuneWorker,
        parent: int,
    ) -> None:
        self.trial = trial
        self.storage = storage
        self.worker = worker
        self.parent = parent
        self.offset = 0
        self.reported = -1
        self.pruned = False
        self.orphaned = False
        self.rows: list[IterationRow] = []
        self.started = time.perf_counter()
        self.beat = time.monotonic()
        grid = worker.env_steps // REPORT_POINTS if worker.env_steps is not None else 1
        self.every = max(1, grid)

    def next_seed(self, budget: int) -> None:
        self.offset += budget
        self.rows = []

    def heartbeat(self, force: bool = False) -> None:
        if force or time.monotonic() - self.beat >= self.worker.heartbeat_s:
            self.beat = time.monotonic()
            beat(self.storage, self.trial._trial_id)

    def __call__(self, row: IterationRow) -> bool:
        self.rows.append(row)
        self.heartbeat()
        if LATCH.received:  # a Ctrl-C that Python dropped before this training took signals itself
            return True
        if os.getpid() != self.worker.tune_pid and os.getppid() != self.parent:  # the tune process died
            self.orphaned = True
            return True
        if self.worker.seconds is not None and time.perf_counter() - self.started >= self.worker.seconds:
            return True
        if row.mean_return is None:
            return False
        progress = row.env_steps if self.worker.env_steps is not None else row.iteration
        reached = (self.offset + progress) // self.every
        if reached <= self.reported:
            return False
        for point in range(max(self.reported + 1, reached - REPORT_POINTS), reached + 1):
            self.trial.report(row.mean_return, step=point * self.every)
        self.reported = reached
        if self.trial.should_prune():
            self.pruned = True
            return True
        return False

    def final_return(self) -> float | None:
        returns = [row.mean_return for row in self.rows if row.mean_return is not None]
        tail = returns[-FINAL_ROWS:]
        return sum(tail) / len(tail) if tail else None


def run_trial(
    study: optuna.Study,
    storage: optuna.storages.BaseStorage,
    trial: optuna.trial.Trial,
    worker: TuneWorker,
    parent: int,
) -> dict[str, Any]:
    """Train the trial (one hermetic training per seed), tell its outcome, return its row."""
    started = time.perf_counter()
    params = dict(trial.params)
    curve = _Curve(trial, storage, worker, parent)
    seeds = _Seeds()
    state, error = TrialState.COMPLETE, ""
    try:
        state = _train_seeds(study, trial, worker, params, curve, seeds)
    except (TrainingStopped, KeyboardInterrupt) as stop:
        trial.set_user_attr("env_steps", seeds.env_steps)
        _fail(study, trial, interrupted=getattr(stop, "reason", "interrupted"))
        _echo(worker, trial.number, "INTERRUPTED", None, params, time.perf_counter() - started)
        raise
    except _Orphaned:
        raise
    except Exception as failure:
        state, error = TrialState.FAIL, one_line(failure)
    wall = time.perf_counter() - started
    value = _tell(study, trial, state, error, seeds, curve, wall)
    if state == TrialState.FAIL and retry_failed(study, trial._trial_id, worker.retries, worker.lock):
        error += "; it runs again (--retries)"
    _echo(worker, trial.number, state.name, value, params, wall, error)
    row = {"number": trial.number, "state": state.name, "value": value, "params": params}
    row.update(env_steps=seeds.env_steps, wall_s=wall, error=error or None, run_dirs=seeds.run_dirs)
    if where().away:  # the trial's run folders are on this node's disk: they go home with the row
        row[RUN_ARCHIVES], row["not_sent"] = pack_runs(seeds.run_dirs)
    return row


@dataclass
class _Seeds:
    """What a trial's trainings gave so far: each seed's value, their env steps and run folders."""

    values: list[float] = dataclasses.field(default_factory=list)
    env_steps: int = 0
    run_dirs: list[str] = dataclasses.field(default_factory=list)


def _train_seeds(
    study: optuna.Study,
    trial: optuna.trial.Trial,
    worker: TuneWorker,
    params: dict[str, Any],
    curve: _Curve,
    seeds: _Seeds,
) -> TrialState:
    """Train the trial once per seed, in order, feeding the pruner; `PRUNED` as soon as it prunes, else
    `COMPLETE` with every seed's value in `seeds`. A seed without a finite value fails the trial (it raises)."""
    overrides = (*worker.request.overrides, *(param.override(params[param.key]) for param in worker.params))
    for index, seed in enumerate(worker.seeds):
        request = dataclasses.replace(
            worker.request, seed=seed, overrides=overrides, run_name=f"trial{trial.number:04d}-seed{seed}"
        )
        iterations = worker.iterations or _iterations(request, worker.env_steps)
        if index:
            curve.next_seed(worker.env_steps or worker.iterations or 0)
        LATCH.check()
        result = api.train(dataclasses.replace(request, max_iterations=iterations), on_iteration=curve)
        LATCH.check()  # a Ctrl-C dropped in the training's imports: the curve stopped it, the trial ends here
        seeds.env_steps += result.env_steps
        seeds.run_dirs.append(str(result.run_dir))
        trial.set_user_attr("run_dirs", seeds.run_dirs)
        if curve.orphaned:
            _fail(study, trial, interrupted="the tune process ended")
            raise _Orphaned
        if curve.pruned:
            return TrialState.PRUNED
        value = curve.final_return() if worker.objective == "final_return" else _evaluate(request, result, worker)
        LATCH.check()
        curve.heartbeat(force=True)
        if value is None or not math.isfinite(value):
            raise RuntimeError(f"seed {seed}: no episode ended within the budget, so the trial has no return")
        seeds.values.append(value)
    return TrialState.COMPLETE


def _tell(
    study: optuna.Study,
    trial: optuna.trial.Trial,
    state: TrialState,
    error: str,
    seeds: _Seeds,
    curve: _Curve,
    wall: float,
) -> float | None:
    """Tell the study the trial's outcome; its value (the mean over seeds, or the pruned curve's last return)."""
    trial.set_user_attr("env_steps", seeds.env_steps)
    trial.set_user_attr("wall_s", round(wall, 3))
    if state == TrialState.FAIL:
        _fail(study, trial, error=error)
        return None
    if state == TrialState.PRUNED:
        study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
        return curve.rows[-1].mean_return if curve.rows else None
    value = sum(seeds.values) / len(seeds.values)
    study.tell(trial, value, skip_if_finished=True)
    return value


def _iterations(request: TrainRequest, env_steps: int | None) -> int:
    """The iterations that make `env_steps` for this trial's configuration (its own iteration size)."""
    from rlrun.api.planning import plan_train
    from rlrun.hermetic import hermetic_call

    assert env_steps is not None
    with hermetic_call(name="rlrun.tune") as call:
        plan = plan_train(call, dataclasses.replace(request, max_iterations=1))
    return max(1, math.ceil(env_steps / plan.env_steps_per_iteration))


def _evaluate(request: TrainRequest, result: Any, worker: TuneWorker) -> float | None:
    """`eval_return`: deterministic episodes of the trained checkpoint through `rlrun.play`."""
    if result.checkpoint is None:
        raise RuntimeError("the training saved no checkpoint to evaluate")
    played = api.play(evaluation(request, result.checkpoint, worker.eval_episodes))
    return played.mean_return


def _echo(
    worker: TuneWorker, number: int, state: str, value: float | None, params: dict[str, Any], wall: float, error=""
) -> None:
    if not worker.echo:
        return
    shown = "" if value is None else f" {value:.2f}"
    settings = " ".join(
        f"{key}={item:.4g}" if isinstance(item, float) else f"{key}={item}" for key, item in params.items()
    )
    detail = f"  ({error})" if error else ""
    print(f"trial {number}: {state}{shown}  {settings}  [{wall:.1f} s]{detail}", file=sys.stderr, flush=True)


__all__ = ["TuneWorker", "load", "run_worker"]
