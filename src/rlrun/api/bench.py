"""`rlrun.bench`: tasks x runs x seeds, every cell a hermetic training, on an executor, with a report.

    result = rlrun.bench(rlrun.BenchRequest(tasks=("rlrun/CartPole-v1",), runs=("sb3", "skrl"), seeds=(0, 1, 2),
                                            env_steps=100_000, out="bench/cartpole"))

The whole bench is planned before anything runs: every cell's training request goes through the same
planning as `rlrun.train` (task, library, algorithm, overrides, budget), so a bad spec is one user
error and no folder. A run that cannot act in a task's action space is skipped with a note. Rows
go to `<out>/results.jsonl` as cells finish, each write atomic (the file is replaced whole), so a
bench killed at any moment keeps every finished row; the same command again skips the cells that
completed (matched by the key of their fully resolved request) and reruns the rest (`force` reruns
all). The report (`rlrun.reports`) is written at the end.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rlrun import runs
from rlrun.api.cells import Cell, cell_key, run_cell
from rlrun.api.iterations import IterationRow
from rlrun.api.planning import import_core, plan_train
from rlrun.api.requests import TrainRequest, checked_fields
from rlrun.api.specs import read_spec
from rlrun.errors import InvalidArgument, MissingDependency, UserError, did_you_mean
from rlrun.hermetic import Call, hermetic_call

RESULTS_FILE = "results.jsonl"
EXECUTOR_NAMES = ("inline", "process", "ray")
SECONDS_BUDGET_ITERATIONS = 10**7
"""The iteration cap of a training whose budget is in seconds (it stops at the first iteration past them)."""
MAX_CELLS = 100_000


@checked_fields
@dataclass(frozen=True)
class BenchRun:
    """One row of a comparison: a library with its algorithm and framework, and optionally a named set of
    `agent.`/`env.` overrides (a variant: `lr=3e-4` against `lr=1e-3` is a bench too)."""

    library: str
    algorithm: str | None = None
    """None: the library's default."""
    ml_framework: str | None = None
    """None: the library's default (torch)."""
    variant: str = ""
    """The variant's name (required with `overrides`, so that two variants of one library differ in the report)."""
    overrides: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> BenchRun:
        """`library[:algorithm[:framework]]`, the command line's form (`sb3:sac`, `skrl:ppo:jax`)."""
        parts = text.strip().split(":")
        if len(parts) > 3 or not all(parts):
            raise InvalidArgument(
                f"run {text!r} is not of the form library[:algorithm[:framework]] "
                "(for example sb3:sac or skrl:ppo:jax)."
            )
        return cls(*parts)  # type-checked by planning


@checked_fields
@dataclass(frozen=True)
class BenchRequest:
    """A bench: the product of tasks x runs x seeds, trained with one budget, run on one executor."""

    tasks: tuple[str, ...]
    """Task ids, native or Gymnasium (comma-separated on the command line)."""
    runs: tuple[BenchRun | str, ...] = field(default=(), metadata={"flag": "--libraries", "aliases": ("--runs",)})
    """Runs to compare: `BenchRun`s, or `library[:algorithm[:framework]]` strings (comma-separated on the command
    line: rsl_rl,sb3:sac,skrl:ppo:jax)."""
    seeds: tuple[int, ...] | str = (0,)
    """Seeds, or a string such as `0-4` or `0,3,7`."""
    env_steps: int | None = None
    """Budget per cell in env steps (the same for every library: converted with each adapter's iteration size)."""
    iterations: int | None = None
    """Budget per cell in library iterations."""
    seconds: float | None = None
    """Budget per cell in seconds of training (it stops at the first iteration boundary past them)."""
    num_envs: int | None = None
    """Environments per cell; None: each run's tuned default."""
    overrides: tuple[str, ...] = field(default=(), metadata={"cli": False})
    """`agent.`/`env.` overrides for every cell (a run's own come after)."""
    eval_episodes: int = 0
    """Deterministic evaluation episodes after each training (0: none)."""
    out: str = "bench"
    """Folder of `results.jsonl`, `report.md` and `plots/`."""
    log_root: str | None = None
    """Run directories' root; None: `<out>/runs`. On Ray, a path every node can reach."""
    executor: str = "inline"
    """`inline` (hermetic calls in this process), `process` (a spawn pool) or `ray`."""
    workers: int | None = None
    """Pool size for `process` (default 2); ignored inline."""
    address: str | None = None
    """Ray cluster address; None starts a local Ray instance."""
    num_cpus: float = 1.0
    """CPUs per cell (Ray)."""
    num_gpus: float = 0.0
    """GPUs per cell (Ray)."""
    device: str | None = None
    """Device of every cell; None: `cuda` when available, else `cpu`."""
    force: bool = False
    """Rerun every cell, finished or not."""
    report: bool = field(default=True, metadata={"flag": "--no_report", "negate": True})
    """Write `report.md` and `plots/` at the end (`--no_report`: do not)."""
    name: str | None = None
    """The bench's name (the run directories' experiment folder); None: the out folder's name."""


@dataclass(frozen=True)
class BenchResult:
    """What a bench produced."""

    out: Path
    results: Path
    """`<out>/results.jsonl`."""
    report: Path | None
    rows: tuple[dict[str, Any], ...]
    """One row per cell of this bench (reused rows of an earlier run included), in cell order."""
    completed: int
    failed: int
    skipped: int
    reused: int
    """Cells not run again because an earlier run of the same bench completed them."""


SPEC_KEYS = tuple(item.name for item in dataclasses.fields(BenchRequest))
RUN_KEYS = tuple(item.name for item in dataclasses.fields(BenchRun))


# --- spec files ---------------------------------------------------------------------------------------------


def load_spec(path: str | Path, **overrides: Any) -> BenchRequest:
    """A `BenchRequest` from a YAML spec (its keys are the request's fields; `runs` entries are mappings with
    library, algorithm, ml_framework, variant, overrides, or `library[:algorithm[:framework]]` strings);
    keyword arguments that are not None replace the spec's values."""
    spec = read_spec(
        path,
        "bench spec",
        SPEC_KEYS,
        overrides,
        not_a_file="pass a YAML spec or use --tasks/--libraries.",
        example="tasks, runs, seeds",
    )
    spec["runs"] = tuple(_spec_run(entry) for entry in _sequence(spec.get("runs", ()), "runs"))
    for key in ("tasks", "overrides"):
        if key in spec:
            spec[key] = tuple(_sequence(spec[key], key))
    if isinstance(spec.get("seeds"), list):
        spec["seeds"] = tuple(spec["seeds"])
    return BenchRequest(**spec)


def _sequence(value: Any, key: str) -> list[Any]:
    if isinstance(value, str):
        return [part for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple):
        raise InvalidArgument(f"bench spec key {key!r} must be a list, not {value!r}.")
    return list(value)


def _spec_run(entry: Any) -> BenchRun | str:
    if isinstance(entry, str):
        return entry
    if not isinstance(entry, dict):
        raise InvalidArgument(f"a bench run must be a mapping (library: ...) or 'library[:algorithm]', not {entry!r}.")
    for key in entry:
        if key not in RUN_KEYS:
            raise InvalidArgument(
                f"bench run key {key!r} is unknown.{did_you_mean(str(key), RUN_KEYS, listing=0)} "
                f"Valid keys: {', '.join(RUN_KEYS)}."
            )
    if "library" not in entry:
        raise InvalidArgument(f"bench run {entry!r} names no library; add library: sb3 (or another, rlrun list).")
    fields = dict(entry)
    fields["overrides"] = tuple(_sequence(fields.get("overrides", ()), "overrides"))
    fields["variant"] = str(fields.get("variant") or "")
    return BenchRun(**fields)


def parse_seeds(seeds: tuple[int, ...] | str | int) -> tuple[int, ...]:
    """`(0, 1)`, `"0-4"`, `"0,3,7"` or `3` as a tuple of distinct seeds, in order."""
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = (seeds,)
    if isinstance(seeds, str):
        values: list[int] = []
        for part in seeds.split(","):
            match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
            if match is None:
                raise InvalidArgument(f"--seeds {seeds!r} is not a seed list: use 0-4, 0,3,7 or 1.")
            low, high = int(match[1]), int(match[2] or match[1])
            if high < low or high - low > MAX_CELLS:
                raise InvalidArgument(f"--seeds {seeds!r}: the range {part.strip()!r} is empty or too long.")
            values.extend(range(low, high + 1))
        seeds = tuple(values)
    if not isinstance(seeds, tuple | list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise InvalidArgument(f"--seeds {seeds!r} must be integers, such as 0-4 or 0,3,7.")
    if not seeds:
        raise InvalidArgument("--seeds is empty: give at least one seed, such as 0 or 0-4.")
    return tuple(dict.fromkeys(seeds))


# --- planning: every cell resolved before anything runs -----------------------------------------------------


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
    from rlrun.api.planning import env_errors
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


# --- running ------------------------------------------------------------------------------------------------


class ResultsFile:
    """`<out>/results.jsonl`: every row of the bench, rewritten atomically (temporary file, fsync, replace) at
    each finished cell, so that no kill leaves it half-written."""

    def __init__(self, out: Path) -> None:
        self.path = out / RESULTS_FILE
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line torn by a tool other than rlrun; rlrun's own writes are whole
                if isinstance(row, dict) and isinstance(row.get("key"), str):
                    self.rows[row["key"]] = row

    def add(self, row: dict[str, Any]) -> None:
        self.rows.pop(row["key"], None)
        self.rows[row["key"]] = row
        text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in self.rows.values())
        runs.atomic_write_text(self.path, text)


class Board(Protocol):
    """What a bench tells its progress display (`rlrun.progress.BenchBoard`)."""

    def start(self, key: str) -> None: ...

    def iteration(self, key: str, iteration: int, steps_per_s: float, mean_return: float | None) -> None: ...

    def finish(self, key: str, status: str, summary: str) -> None: ...

    def stop(self) -> None: ...


BoardFactory = Callable[[list[tuple[str, str]]], Board]
"""Makes the display from the (key, label) of every cell to run."""


def bench(
    request: BenchRequest, *, check_leaks: bool | None = None, display: BoardFactory | None = None
) -> BenchResult:
    """Run a bench: every cell a hermetic training on the chosen executor; rows to `<out>/results.jsonl`."""
    with hermetic_call(check_leaks=check_leaks, name="rlrun.bench") as call:
        return bench_in_call(call, request, display)


def bench_in_call(call: Call, request: BenchRequest, display: BoardFactory | None = None) -> BenchResult:
    """`bench` within an already open hermetic call. The cells' own calls nest inside it (inline) or run in
    workers; the bench's own work (folders, results, report) happens inside a guarded span."""
    plan = plan_bench(call, request)
    call.import_modules(("rlrun.executors",))  # multiprocessing.util registers an exit hook when imported
    if plan.report:
        from rlrun.reports import HEAVY_MODULES

        call.import_modules(HEAVY_MODULES)
    if plan.executor == "ray":
        call.import_modules(("ray",))
    with call.guarded():
        plan.out.mkdir(parents=True, exist_ok=True)
        results = ResultsFile(plan.out)
        done = {key for key, row in results.rows.items() if row.get("status") == "completed"}
        todo = [cell for cell in plan.cells if plan.force or cell.key not in done]
        reused = len(plan.cells) - len(todo)
        for row in plan.skipped:
            results.add(row)
        for finished_row in _execute(plan, todo, display):
            results.add(finished_row)
        rows = tuple(results.rows[cell.key] for cell in plan.cells) + plan.skipped
        report = None
        if plan.report:
            from rlrun.reports import write_report

            report = write_report(plan.out)
    return BenchResult(
        out=plan.out,
        results=results.path,
        report=report,
        rows=rows,
        completed=sum(row["status"] == "completed" for row in rows),
        failed=sum(row["status"] == "failed" for row in rows),
        skipped=len(plan.skipped),
        reused=reused,
    )


def _execute(plan: BenchPlan, cells: Sequence[Cell], display: BoardFactory | None) -> Iterator[dict[str, Any]]:
    """Run `cells` on the plan's executor; yield each row as its cell ends (a dead worker fails its cell)."""
    from rlrun.executors import Resources, make_executor

    if not cells:
        return
    executor = make_executor(
        plan.executor,
        workers=plan.workers,
        address=plan.address,
        resources=Resources(num_cpus=plan.num_cpus, num_gpus=plan.num_gpus),
    )
    board = None if display is None else display([(cell.key, _cell_label(cell)) for cell in cells])
    function: Callable[[Any], Any] = run_cell
    on_progress = None
    if board is not None:
        shown = board
        function = functools.partial(run_cell, listener=_report_iteration)

        def on_progress(index: int, message: Any) -> None:
            iteration, steps_per_s, mean_return = message
            shown.iteration(cells[index].key, iteration, steps_per_s, mean_return)

    started: dict[int, float] = {}

    def on_start(index: int) -> None:
        started[index] = time.perf_counter()
        if board is not None:
            board.start(cells[index].key)

    try:
        with executor:
            for finished in executor.run(function, cells, on_start, on_progress):
                cell = cells[finished.index]
                row = finished.value
                if finished.error is not None or not isinstance(row, Mapping):
                    wall = time.perf_counter() - started.get(finished.index, time.perf_counter())
                    row = cell.row(status="failed", error=finished.error or f"no row: {row!r}", wall_s=wall)
                if board is not None:
                    board.finish(cell.key, row["status"], _summary(row))
                yield dict(row)
    finally:
        if board is not None:
            board.stop()


def _report_iteration(cell: Cell, row: IterationRow) -> None:
    """A cell's iteration, to the bench's display wherever the cell runs (inline, or a pool worker's pipe)."""
    from rlrun.executors import report

    report((row.iteration, row.steps_per_s, row.mean_return))


def _cell_label(cell: Cell) -> str:
    return f"{cell.request.task}  {cell.run}  seed {cell.request.seed}"


def _summary(row: Mapping[str, Any]) -> str:
    if row["status"] != "completed":
        return str(row.get("error") or row["status"])
    shown = "-" if row.get("final_return") is None else f"{row['final_return']:.1f}"
    evaluated = "" if row.get("eval_return") is None else f", eval {row['eval_return']:.1f}"
    return f"return {shown}{evaluated}, {row['env_steps']:,} steps in {row['wall_s']:.1f} s"


__all__ = ["BenchRequest", "BenchResult", "BenchRun", "bench", "bench_in_call", "load_spec", "parse_seeds"]
