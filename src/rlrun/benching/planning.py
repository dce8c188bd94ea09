"""A bench planned whole before anything runs: every cell's training request goes through `rlrun.train`'s
planning (task, library, algorithm, overrides, budget), so a bad spec is one user error and no folder; a run
that cannot act in a task's action space, or see its image observations (Atari), is skipped with a note.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.api.checks import check_fields
from rlrun.api.planning import import_core, plan_train
from rlrun.api.requests import TrainRequest
from rlrun.benching.cell import Cell, cell_key
from rlrun.benching.request import BenchRequest, BenchRun
from rlrun.benching.suites import plan_suite
from rlrun.errors import InvalidArgument, UserError
from rlrun.hermetic import Call
from rlrun.sweep import MAX_CELLS, check_executor, out_folders, parse_seeds, training_request
from rlrun.trust.remote import check_storage

SECONDS_BUDGET_ITERATIONS = 10**7
"""The iteration cap of a training whose budget is in seconds (it stops at the first iteration past them)."""


@dataclass(frozen=True)
class BenchPlan:
    """A validated bench: its cells in order, the skipped ones with their notes, where results go."""

    out: Path
    log_root: Path
    cells: tuple[Cell, ...]
    skipped: tuple[dict[str, Any], ...]
    executor: str
    workers: int | None
    """The pool's size; on Ray, at most this many cells queued or running (None: every cell, Ray queues them)."""
    address: str | None
    num_cpus: float
    num_gpus: float
    force: bool
    report: bool
    retries: int
    """How many times a failed cell runs again."""
    storage: str | None
    """Where every cell uploads its run folder (`--storage`, as fsspec spells it), or None."""


def plan_bench(call: Call, request: BenchRequest) -> BenchPlan:
    """Check the whole bench and resolve every cell (changes nothing, makes no folder)."""
    tasks, bench_runs, labels, seeds, budgets = _check_values(request)
    out, log_root, name = out_folders(request.out, request.log_root, request.name, "bench", "bench")
    storage = None if request.storage is None else check_storage(request.storage)
    import_core(call, video=False)
    cells: list[Cell] = []
    skipped: list[dict[str, Any]] = []
    for task in tasks:
        space = _action_space(call, task)
        threshold = _reward_threshold(call, task)
        budget, amount = budgets[task]
        for run, given in zip(bench_runs, labels, strict=True):
            for seed in seeds:
                train = training_request(
                    run,
                    request,
                    task=task,
                    seed=seed,
                    overrides=(*request.overrides, *run.overrides),
                    out=(log_root, name),
                    iterations=int(amount) if budget == "iterations" else 1,
                )
                where = f"{task} x {given} x seed {seed}"
                unseen = _unseen(task, run)
                if unseen is not None:
                    label = "/".join(part for part in (run.library, run.algorithm, run.ml_framework) if part)
                    cell = Cell(cell_key(train, request.eval_episodes, None), label, run.variant, train, 0, None, None)
                    skipped.append(cell.row(status="skipped", note=unseen))
                    continue
                cell, fits = _cell(call, train, run, where, (budget, amount), request.eval_episodes, threshold, space)
                cell = dataclasses.replace(cell, storage=storage)
                if not fits:
                    note = f"{cell.run} cannot act in {task}'s {space} action space"
                    skipped.append(cell.row(status="skipped", note=note))
                    continue
                cells.append(cell)
    if not cells:
        notes = "; ".join(sorted({row["note"] for row in skipped}))
        raise InvalidArgument(
            f"the bench has no cell to run ({notes or 'empty product'}); add runs that fit the tasks."
        )
    return BenchPlan(
        out=out,
        log_root=log_root,
        cells=tuple(cells),
        skipped=tuple(skipped),
        executor=request.executor,
        workers=request.workers or (2 if request.executor == "process" else None),
        address=request.address,
        num_cpus=request.num_cpus,
        num_gpus=request.num_gpus,
        force=request.force,
        report=request.report,
        retries=request.retries,
        storage=storage,
    )


def _check_values(
    request: BenchRequest,
) -> tuple[list[str], list[BenchRun], list[str], tuple[int, ...], dict[str, tuple[str, float]]]:
    """The request's own values: its tasks (given, or a suite's), runs (each label once), seeds, the bounds and
    choices its fields state, one budget per task (exactly one given, or a suite's per task), the executor, the
    product's size."""
    if not isinstance(request, BenchRequest):
        raise InvalidArgument(
            f"rlrun.bench takes a BenchRequest, not {type(request).__name__}; build it with rlrun.BenchRequest(...)."
        )
    suite_budgets: dict[str, int] = {}
    if request.suite is not None:
        if request.tasks:
            raise InvalidArgument(
                f"give --suite or --tasks, not both: --suite {str(request.suite)[:40]} names its own tasks "
                "(drop --tasks, or drop --suite and list the tasks)."
            )
        suite_budgets = plan_suite(request.suite).budgets
        tasks = list(suite_budgets)
    else:
        tasks = _names(request.tasks, "--tasks", "a task id such as rlrun/CartPole-v1, or give --suite")
    bench_runs = [BenchRun.parse(run) if isinstance(run, str) else run for run in _names(request.runs, "--libraries")]
    labels = [_label(run) for run in bench_runs]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise InvalidArgument(f"run {duplicated[0]!r} appears twice; give each variant its own name (variant: ...).")
    seeds = parse_seeds(request.seeds)
    given = {name: getattr(request, name) for name in ("env_steps", "iterations", "seconds")}
    given = {name: value for name, value in given.items() if value is not None}
    if len(given) != 1 and not (suite_budgets and not given):
        raise InvalidArgument(
            "a bench needs exactly one budget per cell: --env_steps N, --iterations N or --seconds S"
            + (f" (got {', '.join(given)})." if given else " (or --suite, which has a budget per task).")
        )
    check_fields(request)
    check_executor(request.executor, request.address)
    if len(tasks) * len(bench_runs) * len(seeds) > MAX_CELLS:
        raise InvalidArgument(f"the bench has more than {MAX_CELLS:,} cells; split it.")
    if given:
        ((budget, amount),) = given.items()
        return tasks, bench_runs, labels, seeds, dict.fromkeys(tasks, (budget, amount))
    return (
        tasks,
        bench_runs,
        labels,
        seeds,
        {task: ("env_steps", float(steps)) for task, steps in suite_budgets.items()},
    )


def _unseen(task: str, run: BenchRun) -> str | None:
    """The note of a run skipped because its library has no policy for the task's image observations (an Atari
    id, `rlrun.libraries.blind_to`); None when it has one, or when planning is to say what is wrong with it."""
    from rlrun.envs.atari import is_atari
    from rlrun.libraries import blind_to, get_library

    if not is_atari(task):
        return None
    try:
        library = get_library(run.library)
    except UserError:
        return None
    return blind_to(library, task, images=True)


def _cell(
    call: Call,
    train: TrainRequest,
    run: BenchRun,
    where: str,
    budget: tuple[str, float],
    eval_episodes: int,
    threshold: float | None,
    space: str,
) -> tuple[Cell, bool]:
    """One cell planned through `rlrun.train`'s planning, resolved and keyed, and whether its algorithm can act
    in the task's action space `space`."""
    try:
        plan = plan_train(call, train)
    except UserError as error:
        raise InvalidArgument(f"bench cell {where}: {error}") from None
    resolved = dataclasses.replace(
        train,
        # `module:id` stays as given: a pool worker or Ray node imports the module from it
        task=train.task if ":" in train.task else plan.task,
        library=plan.library.name,
        algorithm=plan.algorithm,
        ml_framework=plan.ml_framework,
        num_envs=plan.num_envs,
        device=plan.device,
        max_iterations=_iterations(*budget, plan.env_steps_per_iteration),
    )
    seconds = float(budget[1]) if budget[0] == "seconds" else None
    key = cell_key(resolved, eval_episodes, seconds)
    framework = [plan.ml_framework] if plan.ml_framework != plan.library.frameworks[0] else []
    label = "/".join([plan.library.name, plan.algorithm, *framework]) + (f"[{run.variant}]" if run.variant else "")
    cell = Cell(
        key=key,
        run=label,
        variant=run.variant,
        request=dataclasses.replace(resolved, run_name=key),
        eval_episodes=eval_episodes,
        seconds=seconds,
        threshold=threshold,
    )
    return cell, space in plan.adapter.ALGORITHMS[plan.algorithm]


def _names(values: Any, flag: str, example: str = "") -> list[Any]:
    if isinstance(values, str):
        values = [part for part in values.split(",") if part.strip()]
    if not isinstance(values, tuple | list) or not values:
        raise InvalidArgument(f"{flag} is empty; name at least one{f' ({example})' if example else ''}.")
    return [value.strip() if isinstance(value, str) else value for value in values]


def _label(run: BenchRun) -> str:
    if not isinstance(run, BenchRun):
        raise InvalidArgument(f"a bench run must be a BenchRun or 'library[:algorithm]', not {run!r}.")
    if run.overrides and not run.variant:
        raise InvalidArgument(f"bench run {run.library} has overrides but no variant name; add variant: NAME.")
    parts = [run.library, run.algorithm or "default", *([run.ml_framework] if run.ml_framework else [])]
    return "/".join(parts) + (f"[{run.variant}]" if run.variant else "")


def _iterations(budget: str, amount: float, per_iteration: int) -> int:
    if budget == "iterations":
        return int(amount)
    if budget == "env_steps":
        return max(1, math.ceil(amount / per_iteration))
    return SECONDS_BUDGET_ITERATIONS


def _action_space(call: Call, task: str) -> str:
    """The task's action space class, from a one-env instance built inside a guarded span."""
    from rlrun.api.resolution import env_errors
    from rlrun.envs import make_env, resolve_task

    resolved = resolve_task(task, call.import_modules)
    with call.guarded(), env_errors(resolved):
        env = make_env(resolved, 1)
        try:
            return type(env.single_action_space).__name__
        finally:
            env.close()


def _reward_threshold(call: Call, task: str) -> float | None:
    import gymnasium

    from rlrun.envs import resolve_task

    spec = gymnasium.registry.get(resolve_task(task, call.import_modules))
    return None if spec is None or spec.reward_threshold is None else float(spec.reward_threshold)
