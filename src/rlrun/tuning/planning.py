"""A study planned whole before anything runs: the search space's keys and both ends of every distribution (every
choice) go through the same planning as `rlrun.train`, so a key the library's configuration lacks, or a value it
refuses, is one user error before any folder is made.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rlrun.api.checks import check_fields
from rlrun.api.planning import import_core, plan_train
from rlrun.api.requests import TrainRequest
from rlrun.errors import InvalidArgument, MissingDependency, UserError
from rlrun.hermetic import Call
from rlrun.sweep import check_executor, has, out_folders, parse_seeds, training_request
from rlrun.tuning.request import TuneRequest
from rlrun.tuning.space import Param, check_space, parse_enqueued, parse_space


@dataclass(frozen=True)
class TunePlan:
    """A validated study: where it lives, what every worker slot runs, how many slots."""

    out: Path
    storage: str
    study: str
    direction: Literal["maximize", "minimize"]
    enqueue: tuple[dict[str, Any], ...]
    worker: Any
    """The `rlrun.tuning.worker.TuneWorker` every slot runs (with its slot number replaced)."""
    executor: str
    workers: int
    address: str | None
    report: bool
    best_request: TrainRequest
    """The request whose planned agent configuration, with the best params, is `best.yaml`."""


def plan_tune(call: Call, request: TuneRequest, echo: bool = False) -> TunePlan:
    """Check the whole study (changes nothing, makes no folder): its own values, its search space, its folders
    and storage, then the trials' training request through `rlrun.train`'s planning."""
    seeds, startup = _check_values(request)
    if not has("optuna"):
        raise MissingDependency("rlrun tune needs Optuna, which is not installed: pip install 'rlrun[tune]'.")
    call.import_modules(("sqlalchemy.engine", "sqlalchemy.exc", "rlrun.executors", "rlrun.tuning.worker"))
    from rlrun.tuning import storage as studies
    from rlrun.tuning import worker as tuning

    params, enqueue = _check_space(request)
    out, log_root, name = out_folders(request.out, request.log_root, request.study, "study", "tune")
    storage, lock = studies.storage_url(request.storage, out, request.executor)
    resolved = _trial_request(call, request, seeds[0], log_root, name)
    check_space(call, resolved, params, enqueue)
    worker = tuning.TuneWorker(
        storage=storage,
        study=name,
        lock=lock,
        n_trials=request.n_trials,
        params=params,
        request=resolved,
        seeds=seeds,
        env_steps=request.env_steps,
        iterations=request.iterations,
        seconds=None if request.seconds is None else float(request.seconds),
        objective=request.objective,
        eval_episodes=request.eval_episodes,
        sampler=request.sampler,
        pruner=request.pruner,
        startup_trials=startup,
        seed=request.seed,
        heartbeat_s=request.heartbeat_s,
        grace_s=request.grace_s,
        retries=request.retries,
        echo=echo,
        tune_pid=os.getpid(),
    )
    return TunePlan(
        out=out,
        storage=storage,
        study=name,
        direction="minimize" if request.direction == "minimize" else "maximize",  # one of DIRECTIONS, checked
        enqueue=enqueue,
        worker=worker,
        executor=request.executor,
        workers=1 if request.executor == "inline" else request.workers or 2,
        address=request.address,
        report=request.report,
        best_request=dataclasses.replace(resolved, max_iterations=None),
    )


def _check_values(request: TuneRequest) -> tuple[tuple[int, ...], int]:
    """The request's own values (the bounds and choices its fields state, one budget, the heartbeat below the
    grace period, the executor); its seeds, and its startup trials with the default filled in."""
    if not isinstance(request, TuneRequest):
        raise InvalidArgument(
            f"rlrun.tune takes a TuneRequest, not {type(request).__name__}; build it with rlrun.TuneRequest(...)."
        )
    check_fields(request)
    given = [name for name in ("env_steps", "iterations") if getattr(request, name) is not None]
    if len(given) != 1:
        raise InvalidArgument(
            "a study needs exactly one budget per trial: --env_steps N or --iterations N (--seconds S caps it)"
            + (f" (got {', '.join(given)})." if given else ".")
        )
    seeds = parse_seeds(request.seeds)
    if request.grace_s <= request.heartbeat_s:
        raise InvalidArgument(
            f"--grace_s {request.grace_s} must exceed --heartbeat_s {request.heartbeat_s} "
            f"(for example --grace_s {request.heartbeat_s * 4})."
        )
    check_executor(request.executor, request.address)
    startup = request.startup_trials
    return seeds, min(10, max(2, request.n_trials // 4)) if startup is None else startup


def _check_space(request: TuneRequest) -> tuple[tuple[Param, ...], tuple[dict[str, Any], ...]]:
    """The searched keys with their distributions, the trials to enqueue, and fixed overrides that search nothing."""
    params = parse_space(request.search_space)
    if not isinstance(request.enqueue, tuple | list):
        raise InvalidArgument(
            f"enqueue must be a list of mappings of searched keys to values, not {request.enqueue!r}."
        )
    enqueue = parse_enqueued(list(request.enqueue), params)
    if isinstance(request.overrides, str):
        raise InvalidArgument("overrides must be a list of 'agent.key=value' strings, not one string.")
    searched = {param.key for param in params}
    for word in request.overrides:
        if isinstance(word, str) and word.split("=", 1)[0] in searched:
            raise InvalidArgument(
                f"override {word!r} sets a searched key; drop it from overrides (enqueue it to try it first)."
            )
    return params, enqueue


def _trial_request(call: Call, request: TuneRequest, seed: int, log_root: Path, name: str) -> TrainRequest:
    """Every trial's training request, planned as `rlrun.train` plans it and resolved (task, library, algorithm,
    framework, envs and device as planning chose them)."""
    import_core(call, video=False)
    base = training_request(
        request,
        request,
        task=request.task,
        seed=seed,
        overrides=request.overrides,
        out=(log_root, name),
        iterations=request.iterations or 1,
    )
    try:
        plan = plan_train(call, base)
    except UserError as error:
        raise type(error)(f"tune: {error}") from None
    return dataclasses.replace(  # the task as asked: a `module:id` keeps its module, which a worker imports
        base,
        library=plan.library.name,
        algorithm=plan.algorithm,
        ml_framework=plan.ml_framework,
        num_envs=plan.num_envs,
        device=plan.device,
    )
