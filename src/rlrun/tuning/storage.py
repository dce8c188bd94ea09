"""Optuna studies as rlrun keeps them: the storage (URL, opening, the file lock), which trials count, failing
the trials of processes that died, samplers and pruners, Optuna kept quiet.

`rlrun.tune` opens the study with these, and every worker slot (`rlrun.tuning.worker`) reopens it with them.

Counting (the study's `n_trials` is its total, over every run of the same command):
- counted: COMPLETE, PRUNED, RUNNING, WAITING, and FAIL trials that failed on their own (user attribute
  `error`: the training raised, or a sampled value was rejected);
- not counted: FAIL trials that were interrupted (Ctrl-C, SIGTERM, SIGKILL of their process, a stale heartbeat):
  the study runs another trial in their place, so that an interrupted study resumes to `n_trials` results;
  and FAIL trials that were run again (`retry`): their retry, a trial with the same parameters that names them
  (user attribute `rlrun_retry_for`), takes their place.

Importing this module imports Optuna and opens (and disposes) an in-memory SQLite storage once: SQLAlchemy's
dialect, Alembic and Optuna's log handler are import effects, done before a hermetic call captures.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import optuna
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.trial import TrialState

from rlrun.errors import InvalidArgument
from rlrun.trust.limits import whole_number
from rlrun.tuning.request import check_storage
from rlrun.tuning.space import Param

WARMUP_FRACTION = 0.25
"""The median pruner prunes no trial before this fraction of its budget."""
STUDY_FILE = "study.db"
MAX_VALUE = 1e12
"""A trial value further from zero is no return a training made (as `rlrun.runs.lookup.MAX_RETURN`): a study is a
shared file, and such a value was written into it by hand."""
COUNTED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING, TrialState.WAITING)


GRPC = "grpc://"
"""The scheme of a study served by Optuna's gRPC storage proxy (`grpc://host:port`, `rlrun.tuning.proxy`): what
the worker slots on other Ray nodes open when the study is a SQLite file on the driver's disk."""
BEAT = "rlrun_beat"
"""The user attribute that holds a trial's last heartbeat (seconds since the epoch) in a storage without Optuna's
heartbeats (the gRPC proxy): `reap` fails a RUNNING trial whose beat is older than the grace period."""


def open_storage(url: str, heartbeat_s: int, grace_s: int) -> optuna.storages.BaseStorage:
    """The study's storage: an RDB storage with heartbeats (SQLite waits up to a minute for a lock another process
    holds), or, for `grpc://host:port`, Optuna's gRPC storage proxy (waited for up to a minute)."""
    if url.startswith(GRPC):
        host, _, port = url[len(GRPC) :].rpartition(":")
        proxy = optuna.storages.GrpcStorageProxy(host=host, port=int(port))
        proxy.wait_server_ready(timeout=60)
        return proxy
    engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(
        url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_s, grace_period=grace_s
    )


def close_storage(storage: optuna.storages.BaseStorage) -> None:
    """Close the session and the engine's pooled connections (their file descriptors), or the proxy's channel."""
    if not isinstance(storage, optuna.storages.RDBStorage):
        cast(Any, storage).close()
        return
    try:
        storage.remove_session()
    finally:
        storage.engine.dispose()


def beat(storage: optuna.storages.BaseStorage, trial_id: int) -> None:
    """Record that the trial's process is alive: Optuna's heartbeat, or `BEAT` where the storage has none."""
    if isinstance(storage, BaseHeartbeat):
        storage.record_heartbeat(trial_id)
    else:
        storage.set_trial_user_attr(trial_id, BEAT, time.time())


def surplus(study: optuna.Study, trial: optuna.trial.Trial, n_trials: int) -> bool:
    """Whether `trial`, just asked without the storage lock (another database, or the gRPC proxy), is one too many:
    trials asked before it already take every one of `n_trials` (two slots asked at once at the end)."""
    trials = study.get_trials(deepcopy=False)
    again = retried(trials)
    before = [item for item in trials if item.number < trial.number]
    return sum(item.state in COUNTED or failed_for_good(item, again) for item in before) >= n_trials


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


def count(trials: Sequence[optuna.trial.FrozenTrial]) -> int:
    """How many of `trials` (a study's) take one of its `n_trials` (see the module docstring)."""
    again = retried(trials)
    return sum(trial.state in COUNTED or failed_for_good(trial, again) for trial in trials)


def failed_for_good(trial: optuna.trial.FrozenTrial, again: set[int]) -> bool:
    """Whether `trial` failed on its own (user attribute `error`) and was not run again (its number not in
    `again`, the study's `retried`): a failure that counts."""
    return trial.state == TrialState.FAIL and "error" in trial.user_attrs and trial.number not in again


def retried(trials: Sequence[optuna.trial.FrozenTrial]) -> set[int]:
    """The numbers of the failed trials among `trials` that were run again: a retry names each (`rlrun_retry_for`)."""
    return {trial.user_attrs[RETRY_FOR] for trial in trials if isinstance(trial.user_attrs.get(RETRY_FOR), int)}


RETRY_FOR = "rlrun_retry_for"
"""The user attribute of a retry: the number of the failed trial it runs again (and takes the place of)."""


def retry(study: optuna.Study, trial: optuna.trial.FrozenTrial, retries: int) -> bool:
    """Run the failed `trial` again when its line has retries left: a WAITING trial with the same parameters
    (`enqueue_trial`, the next ask takes it) whose user attributes name the failed trial (`rlrun_retry_for`), the
    line's first (`rlrun_retry_of`) and the attempt (`rlrun_attempt`). Optuna's `RetryHeartbeatStaleTrialCallback`
    would copy every user attribute of the failed trial (its error, process and run folders) onto the retry, so
    rlrun enqueues the retry itself. Once per failed trial; returns whether it enqueued one."""
    attempt = trial.user_attrs.get("rlrun_attempt", 1)
    if not whole_number(attempt, 1) or attempt > retries or not trial.params:
        return False
    if trial.number in retried(study.get_trials(deepcopy=False)):
        return False  # run again already (by the slot that ran it, or another look)
    first = trial.user_attrs.get("rlrun_retry_of", trial.number)
    attrs = {RETRY_FOR: trial.number, "rlrun_retry_of": first, "rlrun_attempt": attempt + 1}
    study.enqueue_trial(dict(trial.params), user_attrs=attrs, skip_if_exists=False)
    return True


def retry_failed(study: optuna.Study, trial_id: int, retries: int, lock: str | None) -> bool:
    """`retry` for a trial that this slot has just failed, under the storage lock that reaping slots hold."""
    if not retries:
        return False
    with storage_lock(lock):
        return retry(study, study._storage.get_trial(trial_id), retries)


def best_trial(study: optuna.Study, params: Sequence[Param], direction: str) -> optuna.trial.FrozenTrial | None:
    """The study's best COMPLETE trial among those that could be rlrun's: a finite value, and parameters that are
    exactly the search space's keys with values inside their distributions. A study is a shared file, and a
    trial written into it by hand (a choice outside the space, an infinite value) is ignored for `best` with a
    one-line warning each, never trained from nor written to best.yaml. Ties go to the earlier trial."""
    best: tuple[float, optuna.trial.FrozenTrial] | None = None
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        reason = _not_rlruns(trial, params)
        if reason is not None:
            import warnings

            note = f"trial {trial.number} of study {study.study_name!r} is ignored for best: {reason}."
            warnings.warn_explicit(note, UserWarning, "rlrun", 0)  # one line, no `__warningregistry__` written
            continue
        value = float(cast(float, trial.value))  # a finite number: `_not_rlruns` checked it
        if best is None or (value > best[0] if direction == "maximize" else value < best[0]):
            best = value, trial
    return None if best is None else best[1]


def _not_rlruns(trial: optuna.trial.FrozenTrial, params: Sequence[Param]) -> str | None:
    """Why a COMPLETE trial cannot be one that rlrun ran on this search space, or None."""
    value = trial.value
    if isinstance(value, bool) or not isinstance(value, int | float) or not -MAX_VALUE <= value <= MAX_VALUE:
        return f"its value {_short(value)} is not a finite number within {MAX_VALUE:g} of zero"
    by_key = {param.key: param for param in params}
    if set(trial.params) != set(by_key):
        return f"its parameters {_short(sorted(trial.params))} are not the search space's {_short(sorted(by_key))}"
    for key, stored in trial.params.items():
        param = by_key[key]
        try:
            loaded = param.load(stored)
        except ValueError:
            return f"{key} holds {_short(stored)}, which is no value of its distribution {param.text()}"
        if not param.contains(loaded):
            return f"{key}={_short(loaded)} lies outside its distribution {param.text()}"
    return None


def _short(value: Any, limit: int = 60) -> str:
    """A stored value as a warning quotes it: escaped, cut."""
    text = repr(value).encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


@dataclass(frozen=True)
class Owner:
    """The process running a trial, recorded on it (`rlrun_host`, `rlrun_pid`) so that a later look (`reap`) can
    tell a dead one from a live one."""

    host: str
    pid: int

    @classmethod
    def here(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid())


def reap(
    study: optuna.Study, storage: optuna.storages.BaseStorage, locked: bool, retries: int = 0, grace_s: float = 0.0
) -> int:
    """Fail (as interrupted) the RUNNING trials whose process is gone: on this host by pid, elsewhere by a
    stale heartbeat (Optuna's, or `BEAT` older than `grace_s` where the storage has none). With `locked` (the
    caller holds the storage lock, under which every ask marks its trial with its process), a RUNNING trial with no
    mark was asked by a process that died before marking it. With `retries`, each trial failed here is run again
    (`retry`). Returns how many this call failed."""
    running = {trial._trial_id for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    optuna.storages.fail_stale_trials(study)
    reaped = [  # failed by Optuna for a stale heartbeat just now: no attribute of rlrun's says why
        trial
        for trial in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if trial._trial_id in running and not {"error", "interrupted"} & set(trial.user_attrs)
    ]
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        pid, last = trial.user_attrs.get("rlrun_pid"), trial.user_attrs.get(BEAT)
        unmarked = locked and "rlrun_pid" not in trial.user_attrs
        gone = trial.user_attrs.get("rlrun_host") == host and isinstance(pid, int) and not _alive(pid)
        silent = time.time() - float(last) if isinstance(last, int | float) and not isinstance(last, bool) else 0.0
        stale = grace_s > 0 and silent > grace_s
        if not (unmarked or gone or stale):
            continue
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
            reason = "interrupted before it started" if unmarked else f"its process (pid {pid}) ended"
            reason = f"its heartbeat stopped {silent:.0f} s ago" if stale and not (unmarked or gone) else reason
            storage.set_trial_user_attr(trial._trial_id, "interrupted", reason)
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
            reaped.append(trial)
    for trial in reaped if retries else ():
        retry(study, trial, retries)
    return len(reaped)


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


def storage_url(url: str | None, out: Path, executor: str) -> tuple[str, str | None]:
    """The study's storage URL (default: SQLite `<out>/study.db`) checked, and for a SQLite file the lock file
    beside it."""
    if url is None:
        return f"sqlite:///{out / STUDY_FILE}", str(out / f"{STUDY_FILE}.lock")
    check_storage(url)
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
    "BEAT",
    "GRPC",
    "Owner",
    "beat",
    "best_trial",
    "close_storage",
    "count",
    "failed_for_good",
    "make_pruner",
    "make_sampler",
    "open_storage",
    "quiet_optuna",
    "reap",
    "retried",
    "retry",
    "retry_failed",
    "storage_lock",
    "storage_url",
    "surplus",
]
