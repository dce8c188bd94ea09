"""`rlrun.tune`: a hyperparameter search with Optuna, every trial a hermetic training, on the bench's executors.

    result = rlrun.tune(rlrun.TuneRequest(task="rlrun/CartPole-v1", library="sb3", env_steps=20_000, n_trials=12,
                                          search_space={"agent.learning_rate": "loguniform(1e-5, 1e-2)"},
                                          out="tune/cartpole"))
    result.best_params, result.best_value, result.best_config   # <out>/best.yaml

The whole study is planned first: the search space's keys and both ends of every distribution (every choice)
go through the same planning as `rlrun.train`, so a key the library's configuration lacks, or a value it
refuses, is one user error before any folder is made. The study lives in an Optuna RDB storage (SQLite
`<out>/study.db` unless `storage` names another SQLAlchemy URL), so that running the same request again resumes
it up to `n_trials` in total, several workers (`process`, `ray`) and several `rlrun tune` processes share it,
and `optuna-dashboard <out>/study.db` shows it. The trials run in `rlrun.api.tuning` (the worker's loop; see
`rlrun.api.studies` for how trials are counted and how a dead process's trial is failed). At the end: `trials.csv`,
`best.yaml` (the best trial's complete agent configuration), the plots and `report.md` (`rlrun.reports.tune`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.api.planning import import_core, plan_train
from rlrun.api.requests import TrainRequest, checked_fields
from rlrun.api.search_space import check_space, parse_enqueued, parse_space
from rlrun.api.specs import read_spec
from rlrun.errors import InvalidArgument, MissingDependency, UserError, did_you_mean
from rlrun.hermetic import Call, hermetic_call

OBJECTIVES = ("final_return", "eval_return")
DIRECTIONS = ("maximize", "minimize")
SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "hyperband", "none")
EXECUTOR_NAMES = ("inline", "process", "ray")
BEST_FILE = "best.yaml"


@checked_fields
@dataclass(frozen=True)
class TuneRequest:
    """A hyperparameter search with Optuna: a task, a library, a budget per trial, a search space, n trials."""

    task: str
    """Task id, native or Gymnasium."""
    library: str | None = None
    """None: the task's default library."""
    algorithm: str | None = None
    """None: the library's default."""
    ml_framework: str | None = None
    """None: the library's default (torch)."""
    search_space: dict[str, str] = field(default_factory=dict, metadata={"cli": False})
    """`agent.`/`env.` keys to `loguniform(a, b)`, `uniform(a, b)`, `int(a, b)` or `choice([x, y])`."""
    overrides: tuple[str, ...] = field(default=(), metadata={"cli": False})
    """Fixed `agent.`/`env.` overrides of every trial (the searched keys come after)."""
    enqueue: tuple[dict[str, Any], ...] = field(default=(), metadata={"cli": False})
    """Trials to run first, as mappings of searched keys to values (a known, or deliberately poor, start)."""
    n_trials: int = 20
    """Trials in the study, in total over every run of the same command (a rerun resumes up to it)."""
    env_steps: int | None = None
    """Budget per trial and seed in env steps (converted with each trial's iteration size)."""
    iterations: int | None = None
    """Budget per trial and seed in library iterations."""
    seconds: float | None = None
    """Optional cap per trial in seconds of training (it stops at the first iteration boundary past them)."""
    seeds: tuple[int, ...] | str = (0,)
    """Training seeds of every trial, or a string such as `0-2`; a trial's value is the mean over them."""
    objective: str = "final_return"
    """`final_return` (mean training return of the last metrics rows) or `eval_return` (deterministic episodes)."""
    eval_episodes: int = 10
    """Episodes of `eval_return`."""
    direction: str = "maximize"
    """`maximize` or `minimize` the objective."""
    sampler: str = "tpe"
    """`tpe` (Optuna's TPESampler) or `random`."""
    pruner: str = "median"
    """`median`, `hyperband` or `none`: stops hopeless trials from their live training curve."""
    startup_trials: int | None = None
    """Trials sampled at random, and not pruned, before TPE and the pruner start; None: n_trials // 4, 2 to 10."""
    seed: int = 0
    """The sampler's seed."""
    num_envs: int | None = None
    """Environments per trial; None: the tuned default."""
    device: str | None = None
    """Device of every trial; None: `cuda` when available, else `cpu`."""
    out: str = "tune"
    """Folder of `study.db`, `trials.csv`, `best.yaml`, the plots and `report.md`."""
    storage: str | None = None
    """An SQLAlchemy URL of the study's database; None: SQLite `<out>/study.db`."""
    study: str | None = None
    """The study's name in the storage; None: the out folder's name."""
    log_root: str | None = None
    """Trials' run directories' root; None: `<out>/runs`."""
    executor: str = "inline"
    """`inline` (hermetic calls in this process), `process` (a spawn pool) or `ray`."""
    workers: int | None = None
    """Trials at once for `process` and `ray` (default 2); inline runs one."""
    address: str | None = None
    """Ray cluster address; None starts a local Ray instance."""
    heartbeat_s: int = 10
    """Seconds between a running trial's heartbeats in the storage."""
    grace_s: int = 120
    """A trial whose heartbeat is older than this is failed as interrupted (its process on another host died)."""
    report: bool = field(default=True, metadata={"flag": "--no_report", "negate": True})
    """Write `trials.csv`, `best.yaml`, the plots and `report.md` at the end (`--no_report`: only the first two)."""


@dataclass(frozen=True)
class TuneResult:
    """What a study holds after this call."""

    out: Path
    storage: str
    """The study's SQLAlchemy URL (`optuna-dashboard` takes it)."""
    study: str
    n_trials: int
    """The study's counted trials (see `rlrun.api.studies`)."""
    completed: int
    pruned: int
    failed: int
    """Trials that failed on their own (interrupted ones are not counted)."""
    ran: int
    """Trials this call ran."""
    best_trial: int | None
    best_value: float | None
    best_params: dict[str, Any]
    best_config: Path | None
    """`<out>/best.yaml`: the best trial's complete agent configuration (`--agent_config` takes it)."""
    trials: Path
    """`<out>/trials.csv`."""
    report: Path | None


SPEC_KEYS = tuple(item.name for item in dataclasses.fields(TuneRequest))


def load_spec(path: str | Path, **overrides: Any) -> TuneRequest:
    """A `TuneRequest` from a YAML spec (its keys are the request's fields); keyword arguments that are not
    None replace the spec's values."""
    spec = read_spec(
        path,
        "tune spec",
        SPEC_KEYS,
        overrides,
        not_a_file="pass a YAML spec such as tune.yaml.",
        example="task, search_space",
    )
    for key in ("overrides", "enqueue"):
        value = spec.get(key)
        if isinstance(value, str) and key == "overrides":
            value = [part for part in value.split(",") if part.strip()]
        if isinstance(value, dict) and key == "enqueue":
            value = [value]
        if isinstance(value, list):
            spec[key] = tuple(value)
    if isinstance(spec.get("seeds"), list):
        spec["seeds"] = tuple(spec["seeds"])
    if "task" not in spec:
        source = runs.check_path(path, "tune spec")
        raise InvalidArgument(f"tune spec {str(source)!r} names no task; add task: rlrun/CartPole-v1 (or --task).")
    return TuneRequest(**spec)


# --- planning ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TunePlan:
    """A validated study: where it lives, what every worker slot runs, how many slots."""

    out: Path
    storage: str
    study: str
    direction: str
    enqueue: tuple[dict[str, Any], ...]
    worker: Any
    """The `rlrun.api.tuning.TuneWorker` every slot runs (with its slot number replaced)."""
    executor: str
    workers: int
    address: str | None
    report: bool
    best_request: TrainRequest
    """The request whose planned agent configuration, with the best params, is `best.yaml`."""


def plan_tune(call: Call, request: TuneRequest, echo: bool = False) -> TunePlan:
    """Check the whole study (changes nothing, makes no folder)."""
    from rlrun.api.bench_request import parse_seeds

    if not isinstance(request, TuneRequest):
        raise InvalidArgument(
            f"rlrun.tune takes a TuneRequest, not {type(request).__name__}; build it with rlrun.TuneRequest(...)."
        )
    for name, value, valid in (
        ("--objective", request.objective, OBJECTIVES),
        ("--direction", request.direction, DIRECTIONS),
        ("--sampler", request.sampler, SAMPLERS),
        ("--pruner", request.pruner, PRUNERS),
        ("--executor", request.executor, EXECUTOR_NAMES),
    ):
        if value not in valid:
            raise InvalidArgument(
                f"{name} {value!r} is not one of {', '.join(valid)}.{did_you_mean(str(value), valid)}"
            )
    _positive_int(request.n_trials, "--n_trials")
    budgets = {"env_steps": request.env_steps, "iterations": request.iterations}
    given = {name: value for name, value in budgets.items() if value is not None}
    if len(given) != 1:
        raise InvalidArgument(
            "a study needs exactly one budget per trial: --env_steps N or --iterations N (--seconds S caps it)"
            + (f" (got {', '.join(given)})." if given else ".")
        )
    for name, value in given.items():
        _positive_int(value, f"--{name}")
    seconds = request.seconds
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0
    ):
        raise InvalidArgument(f"--seconds {seconds!r} must be a positive number.")
    seeds = parse_seeds(request.seeds)
    _positive_int(request.eval_episodes, "--eval_episodes")
    startup = request.startup_trials
    if startup is None:
        startup = min(10, max(2, request.n_trials // 4))
    elif isinstance(startup, bool) or not isinstance(startup, int) or startup < 0:
        raise InvalidArgument(f"--startup_trials {startup!r} must be 0 or a positive integer.")
    if isinstance(request.seed, bool) or not isinstance(request.seed, int) or request.seed < 0:
        raise InvalidArgument(f"--seed {request.seed!r} must be 0 or a positive integer.")
    _positive_int(request.heartbeat_s, "--heartbeat_s")
    _positive_int(request.grace_s, "--grace_s")
    if request.grace_s <= request.heartbeat_s:
        raise InvalidArgument(
            f"--grace_s {request.grace_s} must exceed --heartbeat_s {request.heartbeat_s} "
            f"(for example --grace_s {request.heartbeat_s * 4})."
        )
    if request.workers is not None:
        _positive_int(request.workers, "--workers")
    if request.address is not None and request.executor != "ray":
        raise InvalidArgument(f"--address is for --executor ray, not {request.executor!r}: add --executor ray.")
    if request.executor == "ray" and not _has("ray"):
        raise MissingDependency("--executor ray needs Ray, which is not installed: pip install 'rlrun[ray]'.")
    if not _has("optuna"):
        raise MissingDependency("rlrun tune needs Optuna, which is not installed: pip install 'rlrun[tune]'.")
    call.import_modules(("sqlalchemy.engine", "sqlalchemy.exc", "rlrun.executors", "rlrun.api.tuning"))
    from rlrun.api import studies, tuning

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

    out = runs.check_path(request.out, "--out").absolute()
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"--out {str(out)!r} is a file; pass a folder for the study's results.")
    runs.check_log_root(out, "--out")
    log_root = runs.check_log_root(request.log_root) if request.log_root else out / "runs"
    name = runs.check_name(request.study or runs.experiment_name(out.name or "tune"), "study name")
    storage, lock = studies.storage_url(request.storage, out, request.executor)

    import_core(call, video=False)
    base = TrainRequest(
        task=request.task,
        library=request.library,
        algorithm=request.algorithm,
        ml_framework=request.ml_framework,
        num_envs=request.num_envs,
        seed=seeds[0],
        device=request.device,
        overrides=tuple(request.overrides),
        log_root=str(log_root),
        experiment=name,
        max_iterations=request.iterations or 1,
    )
    try:
        plan = plan_train(call, base)
    except UserError as error:
        raise type(error)(f"tune: {error}") from None
    resolved = dataclasses.replace(
        base,
        task=plan.task,
        library=plan.library.name,
        algorithm=plan.algorithm,
        ml_framework=plan.ml_framework,
        num_envs=plan.num_envs,
        device=plan.device,
    )
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
        seconds=None if seconds is None else float(seconds),
        objective=request.objective,
        eval_episodes=request.eval_episodes,
        sampler=request.sampler,
        pruner=request.pruner,
        startup_trials=startup,
        seed=request.seed,
        heartbeat_s=request.heartbeat_s,
        grace_s=request.grace_s,
        echo=echo,
        tune_pid=os.getpid(),
    )
    return TunePlan(
        out=out,
        storage=storage,
        study=name,
        direction=request.direction,
        enqueue=enqueue,
        worker=worker,
        executor=request.executor,
        workers=1 if request.executor == "inline" else request.workers or 2,
        address=request.address,
        report=request.report,
        best_request=dataclasses.replace(resolved, max_iterations=None),
    )


def _positive_int(value: Any, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{flag} {value!r} must be a positive integer.")


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# --- running ------------------------------------------------------------------------------------------------------


def tune(request: TuneRequest, *, check_leaks: bool | None = None, echo: bool = False) -> TuneResult:
    """Run (or resume) a study; the process is left as it was found. `echo` prints a line per finished trial."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.tune") as call:
        return tune_in_call(call, request, echo)


def tune_in_call(call: Call, request: TuneRequest, echo: bool = False) -> TuneResult:
    """`tune` within an already open hermetic call (the CLI's)."""
    plan = plan_tune(call, request, echo)
    if plan.report:
        from rlrun.reports.tune import HEAVY_MODULES

        call.import_modules(HEAVY_MODULES)
    if plan.executor == "ray":
        call.import_modules(("ray",))
    from rlrun.api import studies

    with call.guarded(), studies.quiet_optuna():
        plan.out.mkdir(parents=True, exist_ok=True)
        with studies.storage_lock(plan.worker.lock):  # a new database's tables are made by one process
            storage = studies.open_storage(plan.storage, plan.worker.heartbeat_s, plan.worker.grace_s)
        try:
            study = _open_study(plan, storage)
            rows = _execute(plan, study, storage)
            return _finish(call, plan, study, rows)
        finally:
            studies.close_storage(storage)


def _open_study(plan: TunePlan, storage: Any) -> Any:
    """Create the study, or load it to resume; enqueue the first trials into a new one."""
    import optuna

    from rlrun.api import studies, tuning

    with studies.storage_lock(plan.worker.lock):
        study = optuna.create_study(
            storage=storage,
            study_name=plan.study,
            direction=plan.direction,
            load_if_exists=True,
            sampler=studies.make_sampler(plan.worker.sampler, plan.worker.seed, plan.worker.startup_trials),
            pruner=studies.make_pruner(plan.worker.pruner, plan.worker.startup_trials, tuning.total_steps(plan.worker)),
        )
        if len(study.directions) != 1 or study.direction.name.lower() != plan.direction:
            raise InvalidArgument(
                f"study {plan.study!r} in {plan.storage} was made to {study.direction.name.lower()}, not "
                f"{plan.direction}; use that direction or another --study name."
            )
        if not study.get_trials(deepcopy=False):
            for params in plan.enqueue:
                study.enqueue_trial(params, skip_if_exists=False)
        studies.reap(study, storage, locked=plan.worker.lock is not None)
    return study


def _execute(plan: TunePlan, study: Any, storage: Any) -> list[dict[str, Any]]:
    """Run the worker slots on the plan's executor; whatever stops them, fail the trials they left running."""
    from rlrun.api import studies, tuning
    from rlrun.executors import Resources, make_executor

    slots = [dataclasses.replace(plan.worker, slot=index) for index in range(plan.workers)]
    executor = make_executor(
        plan.executor,
        workers=plan.workers,
        address=plan.address,
        resources=Resources(num_cpus=1.0, num_gpus=0.0),
    )
    rows: list[dict[str, Any]] = []
    try:
        with executor:
            for finished in executor.run(tuning.run_worker, slots):
                if finished.error is not None:
                    rows.append({"number": None, "state": "WORKER", "error": finished.error})
                else:
                    rows.extend(finished.value)
    finally:
        with studies.storage_lock(plan.worker.lock):
            studies.reap(study, storage, locked=plan.worker.lock is not None)
    return rows


def _finish(call: Call, plan: TunePlan, study: Any, rows: list[dict[str, Any]]) -> TuneResult:
    """Write trials.csv, best.yaml and (with `report`) the plots and report.md; sum the study up."""
    from optuna.trial import TrialState

    from rlrun import configs
    from rlrun.api import studies
    from rlrun.reports import tune as tune_report

    trials = study.get_trials(deepcopy=False)
    finished = [trial for trial in trials if trial.state == TrialState.COMPLETE]
    best = None
    if finished:
        best = study.best_trial
    trials_csv = tune_report.write_trials(plan.out, trials)
    best_config = None
    best_params: dict[str, Any] = {}
    if best is not None:
        by_key = {param.key: param for param in plan.worker.params}
        best_params = {key: by_key[key].load(value) if key in by_key else value for key, value in best.params.items()}
        words = tuple(by_key[key].override(value) for key, value in best.params.items() if key in by_key)
        request = plan.best_request
        best_plan = plan_train(call, dataclasses.replace(request, overrides=(*request.overrides, *words)))
        best_config = plan.out / BEST_FILE
        runs.atomic_write_text(best_config, configs.to_yaml(best_plan.agent_config))
    report = tune_report.write_report(plan.out, study, plan.storage) if plan.report else None
    return TuneResult(
        out=plan.out,
        storage=plan.storage,
        study=plan.study,
        n_trials=sum(studies.counted(trial) for trial in trials),
        completed=len(finished),
        pruned=sum(trial.state == TrialState.PRUNED for trial in trials),
        failed=sum(trial.state == TrialState.FAIL and "error" in trial.user_attrs for trial in trials),
        ran=sum(row.get("number") is not None for row in rows),
        best_trial=None if best is None else best.number,
        best_value=None if best is None else best.value,
        best_params=best_params,
        best_config=best_config,
        trials=trials_csv,
        report=report,
    )


__all__ = ["TuneRequest", "TuneResult", "load_spec", "plan_tune", "tune", "tune_in_call"]
