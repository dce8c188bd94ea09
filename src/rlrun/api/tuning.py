"""A tuner's worker: the ask, train, tell loop that every executor runs against the shared study.

`run_worker(worker)` is the module-level function the executors run, one item per worker slot: in this process
(inline), in a pool worker or as a Ray task. Each slot reopens the study from its storage URL and loops: ask a
trial (the sampler sees every finished and running trial in the storage), train it as hermetic `rlrun.train`
calls, one per seed, feeding the pruner from the live curve (`on_iteration`), and tell the outcome. The loop
ends when the study holds `n_trials` counted trials and none is running.

Counting (the study's `n_trials` is its total, over every run of the same command):
- counted: COMPLETE, PRUNED, RUNNING, WAITING, and FAIL trials that failed on their own (user attribute
  `error`: the training raised, or a sampled value was rejected);
- not counted: FAIL trials that were interrupted (Ctrl-C, SIGTERM, SIGKILL of their process, a stale heartbeat):
  the study runs another trial in their place, so that an interrupted study resumes to `n_trials` results.

No trial runs twice: each is created by one `study.ask` (a storage transaction) and run by the slot that asked
it. On SQLite, the count and the ask happen under a file lock beside the database, so that slots and other
`rlrun tune` processes sharing the study never overshoot `n_trials`; on another database two processes may
overshoot by a trial at the very end. A trial left RUNNING by a process that died is failed (as interrupted)
by the next slot that looks: at once when its process ran on this host (its pid is gone), else once its
heartbeat (recorded at iteration boundaries) is older than the grace period (Optuna's `fail_stale_trials`).

Importing this module imports Optuna and opens (and disposes) an in-memory SQLite storage once: SQLAlchemy's
dialect, Alembic and Optuna's log handler are import effects, done before a hermetic call captures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from rlrun.api.cells import evaluation
from rlrun.api.iterations import IterationRow
from rlrun.api.requests import TrainRequest
from rlrun.api.search_space import Param
from rlrun.errors import InvalidArgument

FINAL_ROWS = 5
"""`final_return` is the mean of the last this many `metrics.csv` returns of a training (fewer if it has fewer)."""
REPORT_POINTS = 100
"""An env-step budget is reported to the pruner on a grid of this many points, the same for every trial, so that
trials whose iterations differ in size (a searched `n_steps`) are compared at the same steps."""
WARMUP_FRACTION = 0.25
"""The median pruner prunes no trial before this fraction of its budget."""
POLL_S = 1.0
"""How often a slot whose study is full looks again while other trials still run."""
STUDY_FILE = "study.db"
COUNTED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)


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
    echo: bool = False
    tune_pid: int = 0
    """The `rlrun tune` process: a worker in another process stops when it is orphaned (its parent changed)."""
    slot: int = 0


@dataclass(frozen=True)
class Owner:
    """The process running a trial, recorded on it so that a later look can tell a dead one from a live one."""

    host: str
    pid: int

    @classmethod
    def here(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid())


# --- storage --------------------------------------------------------------------------------------------------


def open_storage(url: str, heartbeat_s: int, grace_s: int) -> optuna.storages.RDBStorage:
    """The study's RDB storage with heartbeats (SQLite waits up to a minute for a lock another process holds)."""
    engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(
        url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_s, grace_period=grace_s
    )


def close_storage(storage: optuna.storages.RDBStorage) -> None:
    """Close the session and the engine's pooled connections (their file descriptors)."""
    try:
        storage.remove_session()
    finally:
        storage.engine.dispose()


@contextlib.contextmanager
def storage_lock(path: str | None) -> Iterator[None]:
    """An exclusive lock on `path` (fcntl), held by this process for the block; no-op without a path."""
    if path is None:
        yield
        return
    import fcntl

    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def counted(trial: optuna.trial.FrozenTrial) -> bool:
    """Whether a trial takes one of the study's `n_trials` (see the module docstring)."""
    return trial.state in COUNTED or (trial.state == TrialState.FAIL and "error" in trial.user_attrs)


def reap(study: optuna.Study, storage: optuna.storages.RDBStorage, locked: bool) -> int:
    """Fail (as interrupted) the RUNNING trials whose process is gone: on this host by pid, elsewhere by a
    stale heartbeat. With `locked` (the caller holds the storage lock, under which every ask marks its trial
    with its process), a RUNNING trial with no mark was asked by a process that died before marking it.
    Returns how many this call failed."""
    before = sum(trial.state == TrialState.FAIL for trial in study.get_trials(deepcopy=False))
    optuna.storages.fail_stale_trials(study)
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        pid = trial.user_attrs.get("rlrun_pid")
        unmarked = locked and "rlrun_pid" not in trial.user_attrs
        mine = trial.user_attrs.get("rlrun_host") == host and isinstance(pid, int)
        if not unmarked and (not mine or _alive(pid)):  # type: ignore[arg-type]
            continue
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            reason = "interrupted before it started" if unmarked else f"its process (pid {pid}) ended"
            storage.set_trial_user_attr(trial._trial_id, "interrupted", reason)
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    return sum(trial.state == TrialState.FAIL for trial in study.get_trials(deepcopy=False)) - before


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_sampler(name: str, seed: int, startup_trials: int) -> optuna.samplers.BaseSampler:
    """The sampler for one ask, seeded by the study's seed and the trial's number: reproducible inline, and
    different in every slot and process that shares the study."""
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup_trials, constant_liar=True)


def make_pruner(name: str, startup_trials: int, total_steps: int) -> optuna.pruners.BasePruner:
    """The pruner, in the units trials report in (env steps on the budget's grid, or iterations)."""
    if name == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=startup_trials, n_warmup_steps=int(total_steps * WARMUP_FRACTION)
        )
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=max(1, total_steps // 27), max_resource=total_steps)
    return optuna.pruners.NopPruner()


def total_steps(worker: TuneWorker) -> int:
    """A trial's whole budget in the pruner's units: every seed's env steps, or iterations, one after another."""
    per_seed = worker.env_steps if worker.env_steps is not None else worker.iterations
    assert per_seed is not None
    return per_seed * len(worker.seeds)


def load(worker: TuneWorker, storage: optuna.storages.RDBStorage) -> optuna.Study:
    return optuna.load_study(
        study_name=worker.study,
        storage=storage,
        sampler=make_sampler(worker.sampler, worker.seed, worker.startup_trials),
        pruner=make_pruner(worker.pruner, worker.startup_trials, total_steps(worker)),
    )


def storage_url(url: str | None, out: Path, executor: str) -> tuple[str, str | None]:
    """The study's storage URL (default: SQLite `<out>/study.db`) checked, and for a SQLite file the lock file
    beside it."""
    if url is None:
        return f"sqlite:///{out / STUDY_FILE}", str(out / f"{STUDY_FILE}.lock")
    if not isinstance(url, str) or "://" not in url:
        raise InvalidArgument(
            f"--storage {url!r} is not an SQLAlchemy URL; write sqlite:///path/study.db or "
            "postgresql://user@host/db (or leave it out for <out>/study.db)."
        )
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as error:
        raise InvalidArgument(f"--storage {url!r} is not an SQLAlchemy URL ({error}).") from None
    if parsed.get_backend_name() != "sqlite":
        return url, None
    database = parsed.database
    if not database or database == ":memory:":
        if executor != "inline":
            raise InvalidArgument(
                f"--storage {url!r} is an in-memory database, which workers cannot share; use a file "
                "(sqlite:///study.db) or --executor inline."
            )
        return url, None
    path = Path(database).absolute()
    if not path.parent.is_dir():
        raise InvalidArgument(
            f"--storage {url!r}: the folder {str(path.parent)!r} does not exist; create it or pick another path."
        )
    return url, str(path.with_name(path.name + ".lock"))


# --- the loop -------------------------------------------------------------------------------------------------


class _Orphaned(Exception):
    """The process that started this worker is gone: stop tuning."""


def run_worker(worker: TuneWorker) -> list[dict[str, Any]]:
    """One slot's loop (see the module docstring); returns a row per trial it ran. Ctrl-C or SIGTERM fails the
    running trial as interrupted, then propagates."""
    with quiet_optuna():
        return _work(worker)


def _work(worker: TuneWorker) -> list[dict[str, Any]]:
    storage = open_storage(worker.storage, worker.heartbeat_s, worker.grace_s)
    rows: list[dict[str, Any]] = []
    parent = os.getppid()
    try:
        study = load(worker, storage)
        distributions = {param.key: param.distribution() for param in worker.params}
        while True:
            with storage_lock(worker.lock):
                reap(study, storage, locked=worker.lock is not None)
                trials = study.get_trials(deepcopy=False)
                trial = None
                waiting = any(item.state == TrialState.WAITING for item in trials)
                if waiting or sum(counted(item) for item in trials) < worker.n_trials:
                    seed = (worker.seed * 1_000_003 + len(trials)) % 2**32
                    study.sampler = make_sampler(worker.sampler, seed, worker.startup_trials)
                    trial = _ask(study, storage, distributions)
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


def _ask(study: optuna.Study, storage: optuna.storages.RDBStorage, distributions: dict[str, Any]) -> optuna.trial.Trial:
    """Ask a trial and mark it as this process's, failing it if anything interrupts the marking."""
    trial = study.ask(distributions)
    try:
        owner = Owner.here()
        storage.record_heartbeat(trial._trial_id)
        trial.set_user_attr("rlrun_host", owner.host)
        trial.set_user_attr("rlrun_pid", owner.pid)
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
        storage: optuna.storages.RDBStorage,
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
            self.storage.record_heartbeat(self.trial._trial_id)

    def __call__(self, row: IterationRow) -> bool:
        self.rows.append(row)
        self.heartbeat()
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
    storage: optuna.storages.RDBStorage,
    trial: optuna.trial.Trial,
    worker: TuneWorker,
    parent: int,
) -> dict[str, Any]:
    """Train the trial (one hermetic training per seed), tell its outcome, return its row."""
    import rlrun
    from rlrun.errors import TrainingStopped

    started = time.perf_counter()
    params = dict(trial.params)
    overrides = (*worker.request.overrides, *(param.override(params[param.key]) for param in worker.params))
    curve = _Curve(trial, storage, worker, parent)
    values: list[float] = []
    env_steps = 0
    run_dirs: list[str] = []
    state = TrialState.COMPLETE
    error = ""
    try:
        for index, seed in enumerate(worker.seeds):
            request = dataclasses.replace(
                worker.request, seed=seed, overrides=overrides, run_name=f"trial{trial.number:04d}-seed{seed}"
            )
            iterations = worker.iterations or _iterations(request, worker.env_steps)
            if index:
                curve.next_seed(worker.env_steps or worker.iterations or 0)
            result = rlrun.train(dataclasses.replace(request, max_iterations=iterations), on_iteration=curve)
            env_steps += result.env_steps
            run_dirs.append(str(result.run_dir))
            trial.set_user_attr("run_dirs", run_dirs)
            if curve.orphaned:
                _fail(study, trial, interrupted="the tune process ended")
                raise _Orphaned
            if curve.pruned:
                state = TrialState.PRUNED
                break
            value = curve.final_return() if worker.objective == "final_return" else _evaluate(request, result, worker)
            curve.heartbeat(force=True)
            if value is None or not math.isfinite(value):
                raise RuntimeError(f"seed {seed}: no episode ended within the budget, so the trial has no return")
            values.append(value)
    except (TrainingStopped, KeyboardInterrupt) as stop:
        reason = getattr(stop, "reason", "interrupted")
        trial.set_user_attr("env_steps", env_steps)
        _fail(study, trial, interrupted=reason)
        _echo(worker, trial.number, "INTERRUPTED", None, params, time.perf_counter() - started)
        raise
    except _Orphaned:
        raise
    except Exception as failure:
        state, error = TrialState.FAIL, _one_line(failure)
    wall = time.perf_counter() - started
    trial.set_user_attr("env_steps", env_steps)
    trial.set_user_attr("wall_s", round(wall, 3))
    value = sum(values) / len(values) if values and state == TrialState.COMPLETE else None
    if state == TrialState.FAIL:
        _fail(study, trial, error=error)
    elif state == TrialState.PRUNED:
        study.tell(trial, state=TrialState.PRUNED, skip_if_finished=True)
        value = curve.rows[-1].mean_return if curve.rows else None
    else:
        study.tell(trial, value, skip_if_finished=True)
    _echo(worker, trial.number, state.name, value, params, wall, error)
    return {
        "number": trial.number,
        "state": state.name,
        "value": value,
        "params": params,
        "env_steps": env_steps,
        "wall_s": wall,
        "error": error or None,
    }


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
    import rlrun

    if result.checkpoint is None:
        raise RuntimeError("the training saved no checkpoint to evaluate")
    played = rlrun.play(evaluation(request, result.checkpoint, worker.eval_episodes))
    return played.mean_return


def _echo(
    worker: TuneWorker, number: int, state: str, value: float | None, params: dict[str, Any], wall: float, error=""
) -> None:
    if not worker.echo:
        return
    shown = "" if value is None else f" {value:.2f}"
    settings = " ".join(f"{key}={_short(item)}" for key, item in params.items())
    detail = f"  ({error})" if error else ""
    print(f"trial {number}: {state}{shown}  {settings}  [{wall:.1f} s]{detail}", file=sys.stderr, flush=True)


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna's INFO lines ("A new study created ...") off for the block, and the warnings that say heartbeats
    and `fail_stale_trials` are experimental, or meant for `Study.optimize` (rlrun records the heartbeats itself):
    rlrun prints its own progress."""
    previous = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            yield
    finally:
        optuna.logging.set_verbosity(previous)


def _warm_up() -> None:
    """Open and dispose an in-memory storage once (see the module docstring)."""
    storage = optuna.storages.RDBStorage("sqlite://")
    try:
        with quiet_optuna():
            study = optuna.create_study(storage=storage, study_name="rlrun-warm-up")
            study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
    finally:
        close_storage(storage)


_warm_up()

__all__ = [
    "TuneWorker",
    "close_storage",
    "counted",
    "load",
    "make_pruner",
    "make_sampler",
    "open_storage",
    "quiet_optuna",
    "reap",
    "run_worker",
    "storage_lock",
    "storage_url",
]
