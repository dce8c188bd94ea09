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
and `optuna-dashboard <out>/study.db` shows it. The trials run in `rlrun.tuning.worker` (the worker's loop; see
`rlrun.tuning.storage` for how trials are counted and how a dead process's trial is failed). At the end: `trials.csv`,
`best.yaml` (the best trial's complete agent configuration), the plots and `report.md` (`rlrun.reports.tune`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.api.planning import plan_train
from rlrun.configs.provenance import commented
from rlrun.errors import InvalidArgument, UserError
from rlrun.hermetic import Call, hermetic_call
from rlrun.signals import termination_delivered
from rlrun.trust.text import terminal
from rlrun.tuning.planning import TunePlan, plan_tune
from rlrun.tuning.request import BEST_FILE, TuneRequest, TuneResult


def tune(request: TuneRequest, *, check_leaks: bool | None = None, echo: bool = False) -> TuneResult:
    """Run (or resume) a study; the process is left as it was found. `echo` prints a line per finished trial."""
    with termination_delivered(), hermetic_call(check_leaks=check_leaks, name="rlrun.tune") as call:
        return tune_in_call(call, request, echo)


def tune_in_call(call: Call, request: TuneRequest, echo: bool = False) -> TuneResult:
    """`tune` within an already open hermetic call (the CLI's)."""
    plan = plan_tune(call, request, echo)
    if plan.report:
        from rlrun.reports.tune import HEAVY_MODULES

        call.import_modules(HEAVY_MODULES)
    if plan.executor == "ray":
        call.import_modules(("ray",))
    from rlrun.tuning import storage as studies

    with call.guarded(), studies.quiet_optuna():
        plan.out.mkdir(parents=True, exist_ok=True)
        with studies.storage_lock(plan.worker.lock):  # a new database's tables are made by one process
            storage = studies.open_storage(plan.storage, plan.worker.heartbeat_s, plan.worker.grace_s)
        try:
            study = _open_study(plan, storage)
            rows = _execute(plan, study, storage, (request.num_cpus, request.num_gpus))
            return _finish(call, plan, study, rows)
        finally:
            studies.close_storage(storage)


def _open_study(plan: TunePlan, storage: Any) -> Any:
    """Create the study, or load it to resume; enqueue the first trials into a new one."""
    import optuna

    from rlrun.tuning import storage as studies
    from rlrun.tuning import worker as tuning

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
        # a trial whose process died since the last run of this study runs again, when retries were asked for
        studies.reap(study, storage, locked=plan.worker.lock is not None, retries=plan.worker.retries)
    return study


def _execute(plan: TunePlan, study: Any, storage: Any, needs: tuple[float, float]) -> list[dict[str, Any]]:
    """Run the worker slots on the plan's executor (on Ray, each slot a task with `needs`: a trial's CPUs and
    GPUs); whatever stops them, fail the trials they left running."""
    from rlrun.executors import Resources, make_executor
    from rlrun.tuning import storage as studies
    from rlrun.tuning import worker as tuning

    # `workers` slots run at once; as many spares wait behind them, each starting when a slot ends: one that takes
    # a dead slot's place asks the trials that slot would have, one that starts after a slot that finished finds
    # the study full and ends at once.
    slots = [dataclasses.replace(plan.worker, slot=index) for index in range(2 * plan.workers)]
    executor = make_executor(
        plan.executor,
        workers=plan.workers,
        address=plan.address,
        resources=Resources(num_cpus=needs[0], num_gpus=needs[1]),
    )
    rows: list[dict[str, Any]] = []
    served = None
    try:
        with executor:
            slots, served = _served(plan, executor, slots)
            for finished in executor.run(tuning.run_worker, slots):
                if finished.error is not None:
                    rows.append({"number": None, "state": "WORKER", "error": finished.error})
                    if plan.worker.echo:
                        print(f"tune: a worker slot was lost ({finished.error})", file=sys.stderr, flush=True)
                else:
                    rows.extend(_home(plan, row) for row in finished.value)
    finally:
        if served is not None:
            from rlrun.tuning import proxy

            proxy.stop(served)
        with studies.storage_lock(plan.worker.lock):
            studies.reap(study, storage, locked=plan.worker.lock is not None, grace_s=plan.worker.grace_s)
    return rows


def _home(plan: TunePlan, row: dict[str, Any]) -> dict[str, Any]:
    """A trial's row, its run folders written into this machine's log root when it ran on another node (the row
    carries them, `rlrun.runs.transfer`): at the same path as there, or beside it when a run here took that name;
    `run_dirs` names where they are. A folder that could not come home is said in one warning line."""
    from rlrun.runs.transfer import unpack_home
    from rlrun.tuning.worker import RUN_ARCHIVES

    archives = row.pop(RUN_ARCHIVES, None)
    problems = [row.pop("not_sent")] if row.get("not_sent") else []
    if not isinstance(archives, dict):
        return row
    log_root = Path(str(plan.worker.request.log_root))  # the same path on every node: the planned request's
    homes = []
    for run_dir, data in archives.items():
        try:
            parts = Path(str(run_dir)).relative_to(log_root).parts
            homes.append(str(unpack_home(data, log_root, parts, f"the run folder of trial {row['number']}")))
        except (UserError, OSError, ValueError) as error:
            problems.append(f"{type(error).__name__}: {error}")
    row["run_dirs"] = homes
    if problems:
        note = f"tune: a run folder of trial {row['number']} did not come home from its node: {problems[0]}"
        warnings.warn_explicit(terminal(note), UserWarning, "rlrun", 0)  # one line, no registry written
    return row


def _served(plan: TunePlan, executor: Any, slots: list[Any]) -> tuple[list[Any], Any]:
    """The slots as they run, and the proxy that serves them the study (None: they open its storage themselves).
    A SQLite study file on a Ray cluster of several nodes is on this machine's disk, which the slots on the other
    nodes cannot open: it is served to every slot through Optuna's gRPC storage proxy (`rlrun.tuning.proxy`)."""
    from rlrun.executors import RayExecutor

    if plan.worker.lock is None or not isinstance(executor, RayExecutor):
        return slots, None
    nodes = executor.nodes()
    if nodes <= 1:
        return slots, None
    from rlrun.tuning import proxy

    served = proxy.serve(plan.storage)
    if plan.worker.echo:
        print(
            f"tune: the slots on {nodes} nodes reach {plan.storage} through Optuna's gRPC proxy at {served.url}",
            file=sys.stderr,
            flush=True,
        )
    return [dataclasses.replace(slot, storage=served.url, lock=None) for slot in slots], served


def _finish(call: Call, plan: TunePlan, study: Any, rows: list[dict[str, Any]]) -> TuneResult:
    """Write trials.csv, best.yaml and (with `report`) the plots and report.md; sum the study up."""
    from optuna.trial import TrialState

    from rlrun import configs
    from rlrun.reports import tune as tune_report
    from rlrun.tuning import storage as studies

    trials = study.get_trials(deepcopy=False)
    retried = studies.retried(trials)
    finished = [trial for trial in trials if trial.state == TrialState.COMPLETE]
    best = studies.best_trial(study, plan.worker.params, plan.direction)  # trials put in by hand are ignored
    trials_csv = tune_report.write_trials(plan.out, trials)
    best_config = None
    best_params: dict[str, Any] = {}
    if best is not None:
        by_key = {param.key: param for param in plan.worker.params}  # `best_trial` checked: every key searched
        best_params = {key: by_key[key].load(value) for key, value in best.params.items()}
        words = tuple(by_key[key].override(value) for key, value in best.params.items())
        request = dataclasses.replace(plan.best_request, overrides=(*plan.best_request.overrides, *words))
        best_plan = plan_train(
            call, dataclasses.replace(request, max_iterations=_trial_iterations(call, plan, request))
        )
        best_config = plan.out / BEST_FILE
        runs.atomic_write_text(
            best_config, _best_header(best_plan, best, plan) + configs.to_yaml(best_plan.agent_config)
        )
    if plan.report and plan.worker.echo:  # the figures take seconds: say what is being waited for
        count = f"{len(trials)} trial{'' if len(trials) == 1 else 's'}"
        print(f"tune: drawing the figures and report.md of {count} into {plan.out}", file=sys.stderr, flush=True)
    report = tune_report.write_report(plan.out, study, plan.storage, best) if plan.report else None
    return TuneResult(
        out=plan.out,
        storage=plan.storage,
        study=plan.study,
        n_trials=studies.count(trials),
        completed=len(finished),
        pruned=sum(trial.state == TrialState.PRUNED for trial in trials),
        failed=sum(studies.failed_for_good(trial, retried) for trial in trials),
        retried=len(retried),
        ran=sum(row.get("number") is not None for row in rows),
        lost_slots=sum(row.get("state") == "WORKER" for row in rows),
        best_trial=None if best is None else best.number,
        best_value=None if best is None else best.value,
        best_params=best_params,
        best_config=best_config,
        trials=trials_csv,
        report=report,
    )


def _best_header(best_plan: Any, best: Any, plan: TunePlan) -> str:
    """best.yaml's comment lines: which trial it is, what it scored, and the command that repeats its first seed."""
    seeds = ", ".join(str(seed) for seed in plan.worker.seeds)
    lines = [
        f"The agent configuration of trial {best.number} of study {plan.study}, the best ({plan.worker.objective} "
        f"{best.value:.6g}, the mean over seeds {seeds}).",
        f"seed and max_iterations are its first training's; repeat it: {best_plan.repeat_command(BEST_FILE)}",
    ]
    return commented(lines)


def _trial_iterations(call: Call, plan: TunePlan, request: Any) -> int:
    """The iterations each of the best trial's trainings ran (`--iterations`, or the env steps budget in the
    best configuration's iteration size), so that best.yaml repeats the trial's first seed, budget included."""
    if plan.worker.iterations:
        return int(plan.worker.iterations)
    probe = plan_train(call, dataclasses.replace(request, max_iterations=1))
    return max(1, math.ceil(plan.worker.env_steps / probe.env_steps_per_iteration))


__all__ = ["tune", "tune_in_call"]
