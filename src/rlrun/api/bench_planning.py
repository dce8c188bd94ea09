"""A bench planned whole before anything runs: every cell's training request goes through `rlrun.train`'s
planning (task, library, algorithm, overrides, budget), so a bad spec is one user error and no folder; a run
that cannot act in a task's action space is skipped with a note.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.api.bench_request import MAX_CELLS, BenchRequest, BenchRun, parse_seeds
from rlrun.api.cells import Cell, cell_key
from rlrun.api.planning import import_core, plan_train
from rlrun.api.requests import TrainRequest
from rlrun.errors import InvalidArgument, MissingDependency, UserError, did_you_mean
from rlrun.hermetic import Call

EXECUTOR_NAMES = ("inline", "process", "ray")
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
    workers: int
    address: str | None
    num_cpus: float
    num_gpus: float
    force: bool
    report: bool


def plan_bench(call: Call, request: BenchRequest) -> BenchPlan:
    """Check the whole bench and resolve every cell (changes nothing, makes no folder)."""
    if not isinstance(request, BenchRequest):
        raise InvalidArgument(
            f"rlrun.bench takes a BenchRequest, not {type(request).__name__}; build it with rlrun.BenchRequest(...)."
        )
    tasks = _names(request.tasks, "--tasks", "a task id such as rlrun/CartPole-v1")
    bench_runs = [BenchRun.parse(run) if isinstance(run, str) else run for run in _names(request.runs, "--libraries")]
    labels = [_label(run) for run in bench_runs]
    duplicated = sorted({label for label in labels if labels.count(label) > 1})
    if duplicated:
        raise InvalidArgument(f"run {duplicated[0]!r} appears twice; give each variant its own name (variant: ...).")
    seeds = parse_seeds(request.seeds)
    budgets = {"env_steps": request.env_steps, "iterations": request.iterations, "seconds": request.seconds}
    given = {name: value for name, value in budgets.items() if value is not None}
    if len(given) != 1:
        raise InvalidArgument(
            "a bench needs exactly one budget per cell: --env_steps N, --iterations N or --seconds S"
            + (f" (got {', '.join(given)})." if given else ".")
        )
    ((budget, amount),) = given.items()
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not math.isfinite(amount) or amount <= 0:
        raise InvalidArgument(f"--{budget} {amount!r} must be a positive number.")
    if budget != "seconds" and not isinstance(amount, int):
        raise InvalidArgument(f"--{budget} {amount!r} must be an integer.")
    if request.executor not in EXECUTOR_NAMES:
        raise InvalidArgument(
            f"--executor {request.executor!r} is not one of {', '.join(EXECUTOR_NAMES)}."
            f"{did_you_mean(str(request.executor), EXECUTOR_NAMES)}"
        )
    if request.workers is not None and (
        isinstance(request.workers, bool) or not isinstance(request.workers, int) or request.workers < 1
    ):
        raise InvalidArgument(f"--workers {request.workers!r} must be a positive integer.")
    if request.address is not None and request.executor != "ray":
        raise InvalidArgument(f"--address is for --executor ray, not {request.executor!r}: add --executor ray.")
    if request.executor == "ray" and not _has("ray"):
        raise MissingDependency("--executor ray needs Ray, which is not installed: pip install 'rlrun[ray]'.")
    for flag, value, low in (("--num_cpus", request.num_cpus, 0.0), ("--num_gpus", request.num_gpus, -1e-12)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= low:
            bound = "positive" if low == 0.0 else "0 or more"
            raise InvalidArgument(f"{flag} {value!r} must be a number, {bound}.")
    if (
        isinstance(request.eval_episodes, bool)
        or not isinstance(request.eval_episodes, int)
        or request.eval_episodes < 0
    ):
        raise InvalidArgument(f"--eval_episodes {request.eval_episodes!r} must be 0 or a positive integer.")
    out = runs.check_path(request.out, "--out").absolute()
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"--out {str(out)!r} is a file; pass a folder for the bench's results.")
    runs.check_log_root(out, "--out")
    log_root = runs.check_log_root(request.log_root) if request.log_root else out / "runs"
    name = runs.check_name(request.name or runs.experiment_name(out.name or "bench"), "bench name")
    if len(tasks) * len(bench_runs) * len(seeds) > MAX_CELLS:
        raise InvalidArgument(f"the bench has more than {MAX_CELLS:,} cells; split it.")

    import_core(call, video=False)
    cells: list[Cell] = []
    skipped: list[dict[str, Any]] = []
    for task in tasks:
        space = _action_space(call, task)
        threshold = _reward_threshold(call, task)
        for run, given in zip(bench_runs, labels, strict=True):
            for seed in seeds:
                train = TrainRequest(
                    task=task,
                    library=run.library,
                    algorithm=run.algorithm,
                    ml_framework=run.ml_framework,
                    num_envs=request.num_envs,
                    seed=seed,
                    device=request.device,
                    overrides=(*request.overrides, *run.overrides),
                    log_root=str(log_root),
                    experiment=name,
                    max_iterations=request.iterations if budget == "iterations" else 1,
                )
                try:
                    plan = plan_train(call, train)
                except UserError as error:
                    raise InvalidArgument(f"bench cell {task} x {given} x seed {seed}: {error}") from None
                key_request = dataclasses.replace(
                    train,
                    # `module:id` stays as given: a pool worker or Ray node imports the module from it
                    task=task if ":" in task else plan.task,
                    library=plan.library.name,
                    algorithm=plan.algorithm,
                    ml_framework=plan.ml_framework,
                    num_envs=plan.num_envs,
                    device=plan.device,
                    max_iterations=_iterations(budget, amount, plan.env_steps_per_iteration),
                )
                seconds = float(amount) if budget == "seconds" else None
                key = cell_key(key_request, request.eval_episodes, seconds)
                framework = [plan.ml_framework] if plan.ml_framework != plan.library.frameworks[0] else []
                label = "/".join([plan.library.name, plan.algorithm, *framework])
                label += f"[{run.variant}]" if run.variant else ""
                cell = Cell(
                    key=key,
                    run=label,
                    variant=run.variant,
                    request=dataclasses.replace(key_request, run_name=key),
                    eval_episodes=request.eval_episodes,
                    seconds=seconds,
                    threshold=threshold,
                )
                if space not in plan.adapter.ALGORITHMS[plan.algorithm]:
                    skipped.append(
                        cell.row(
                            status="skipped",
                            note=f"{label} cannot act in {task}'s {space} action space",
                        )
                    )
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
        workers=request.workers or (2 if request.executor == "process" else 1),
        address=request.address,
        num_cpus=request.num_cpus,
        num_gpus=request.num_gpus,
        force=request.force,
        report=request.report,
    )


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


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
