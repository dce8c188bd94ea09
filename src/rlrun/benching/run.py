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

The request, its result and its spec file are `rlrun.api.bench_request`'s; the plan of every cell is
`rlrun.api.bench_planning`'s; this module runs the cells and writes the results.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rlrun import runs
from rlrun.benching.cell import Cell, receive_run, run_cell
from rlrun.benching.planning import BenchPlan, plan_bench
from rlrun.benching.request import BenchRequest, BenchResult
from rlrun.benching.retries import folders_before, retry
from rlrun.benching.reuse import resuming, reusable
from rlrun.errors import TrainingStopped
from rlrun.hermetic import Call, hermetic_call
from rlrun.reports.results import MAX_RESULTS_BYTES
from rlrun.runs.metrics import IterationRow
from rlrun.signals import LATCH, termination_delivered
from rlrun.trust.limits import file_size_within, parse_json

RESULTS_FILE = "results.jsonl"


class ResultsFile:
    """`<out>/results.jsonl`: every row of the bench, rewritten atomically (temporary file, fsync, replace) at
    each finished cell, so that no kill leaves it half-written."""

    def __init__(self, out: Path) -> None:
        self.path = out / RESULTS_FILE
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            path = file_size_within(self.path, RESULTS_FILE, MAX_RESULTS_BYTES)
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    row = parse_json(line, RESULTS_FILE)  # nesting bounded before it is parsed
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


BoardFactory = Callable[[list[tuple[str, str]], str, Path], Board]
"""Makes the display from the (key, label) of every cell to run, where they run (`inline`, `ray x2`, ...) and the
results file they go to."""


def bench(
    request: BenchRequest, *, check_leaks: bool | None = None, display: BoardFactory | None = None
) -> BenchResult:
    """Run a bench: every cell a hermetic training on the chosen executor; rows to `<out>/results.jsonl`.

    `LATCH` is held over the whole bench (outside its hermetic call, as `rlrun.train` holds it): a Ctrl-C that
    Python drops in a finalizer between two cells stops the next cell's training at its start, and so the bench,
    instead of being lost."""
    with termination_delivered(), LATCH.installed(), hermetic_call(check_leaks=check_leaks, name="rlrun.bench") as call:
        return bench_in_call(call, request, display)


def bench_in_call(
    call: Call,
    request: BenchRequest,
    display: BoardFactory | None = None,
    steps: Callable[[str], None] | None = None,
) -> BenchResult:
    """`bench` within an already open hermetic call. The cells' own calls nest inside it (inline) or run in
    workers; the bench's own work (folders, results, report) happens inside a guarded span. `steps(text)` hears
    each step of the report at the end (`rlrun.reports.write_report`'s `progress`)."""
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
        earlier = results.rows
        done = set() if plan.force else {cell.key for cell in plan.cells if reusable(earlier.get(cell.key), cell, plan)}
        todo = [resuming(cell, earlier.get(cell.key), plan) for cell in plan.cells if cell.key not in done]
        reused = len(plan.cells) - len(todo)
        for row in plan.skipped:
            results.add(row)
        try:
            for finished_row in _execute(plan, todo, display):
                results.add(finished_row)
        except TrainingStopped as stop:  # Ctrl-C or SIGTERM: the stopped cell's row, then the bench stops
            if stop.row is not None:
                results.add(dict(stop.row))
            stop.bench = plan.out
            raise
        rows = tuple(results.rows[cell.key] for cell in plan.cells) + plan.skipped
        report = None
        if plan.report:
            from rlrun.reports import write_report

            report = write_report(plan.out, progress=steps)
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
    """Run `cells` on the plan's executor; yield each row as its cell ends (a dead worker fails its cell). A failed
    cell with retries left runs again in the next round, on the same executor (`rlrun.benching.retries`); only its
    last attempt's row is yielded."""
    from rlrun.executors import Resources, make_executor

    if not cells:
        return
    executor = make_executor(
        plan.executor,
        workers=plan.workers,
        address=plan.address,
        resources=Resources(num_cpus=plan.num_cpus, num_gpus=plan.num_gpus),
    )
    board = None
    if display is not None:
        where = plan.executor if plan.workers is None else f"{plan.executor} x{plan.workers}"
        board = display([(cell.key, _cell_label(cell)) for cell in cells], where, plan.out / RESULTS_FILE)
    function: Callable[[Any], Any] = run_cell
    current: list[Cell] = list(cells)  # the round being run: the executor's indices are into it
    on_progress = None
    if board is not None:
        shown = board
        function = functools.partial(run_cell, listener=_report_iteration)

        def on_progress(index: int, message: Any) -> None:
            iteration, steps_per_s, mean_return = message
            shown.iteration(current[index].key, iteration, steps_per_s, mean_return)

    started: dict[int, float] = {}

    def on_start(index: int) -> None:
        started[index] = time.perf_counter()
        if board is not None:
            board.start(current[index].key)

    try:
        with executor:
            while current:
                again: list[Cell] = []
                folders = {cell.key: folders_before(cell, plan.log_root) for cell in current} if plan.retries else {}
                started.clear()
                for finished in executor.run(function, current, on_start, on_progress):
                    cell = current[finished.index]
                    row = finished.value
                    if finished.error is not None or not isinstance(row, Mapping):
                        wall = time.perf_counter() - started.get(finished.index, time.perf_counter())
                        row = cell.row(status="failed", error=finished.error or f"no row: {row!r}", wall_s=wall)
                    else:
                        row = receive_run(dict(row), cell, plan.log_root)  # a cell on another Ray node sent its folder
                    if row["status"] == "failed" and cell.attempt <= plan.retries:
                        again.append(retry(cell, row, plan.log_root, folders[cell.key]))
                        if board is not None:
                            board.finish(cell.key, "retrying", f"{_summary(row)}; attempt {cell.attempt + 1} queued")
                        continue
                    if board is not None:
                        board.finish(cell.key, row["status"], _summary(row))
                    yield dict(row)
                current[:] = again
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


__all__ = ["BenchRequest", "BenchResult", "bench", "bench_in_call"]
