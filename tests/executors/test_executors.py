"""What every executor shares: the table and `make_executor`, the same values and the same one-line errors for
the same items, inline's Ctrl-C, Ray's missing-dependency error, and the package's import discipline."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import workload

from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.executors import (
    EXECUTORS,
    Executor,
    Finished,
    InlineExecutor,
    ProcessExecutor,
    RayExecutor,
    Resources,
    Where,
    death_reason,
    describe_exception,
    make_executor,
    where,
)
from rlrun.hermetic import census

ITEMS = [3, 1, 4, 1, 5, 9, 2, 6]


def outcomes(executor: Executor, function, items) -> list[Finished]:
    """Every `Finished` of a run, by index; each index exactly once."""
    finished = list(executor.run(function, items))
    assert sorted(f.index for f in finished) == list(range(len(items)))
    return sorted(finished, key=lambda f: f.index)


def test_the_table_names_every_executor():
    assert {"inline": InlineExecutor, "process": ProcessExecutor, "ray": RayExecutor} == EXECUTORS
    assert {cls.name for cls in EXECUTORS.values()} == set(EXECUTORS)


def test_unknown_executor_names_the_nearest():
    with pytest.raises(InvalidArgument, match=r"Unknown executor 'proces'\. Did you mean 'process'\?"):
        make_executor("proces")


@pytest.mark.parametrize("workers", [0, -2, 1.5, True, "4"])
def test_workers_must_be_a_positive_integer(workers):
    with pytest.raises(InvalidArgument, match="workers must be an integer >= 1"):
        make_executor("process", workers=workers)
    with pytest.raises(InvalidArgument, match="workers must be an integer >= 1"):
        ProcessExecutor(workers=workers)


def test_an_address_is_for_ray_only():
    with pytest.raises(InvalidArgument, match="ray executor only"):
        make_executor("process", address="127.0.0.1:6379")


@pytest.mark.parametrize("field", ["num_cpus", "num_gpus"])
@pytest.mark.parametrize("value", [-1, float("nan"), "1", None])
def test_resources_are_numbers_from_zero(field, value):
    with pytest.raises(InvalidArgument, match=f"{field} must be a number >= 0"):
        Resources(**{field: value})
    assert Resources(**{field: 0}) is not None


def test_make_executor_builds_the_named_one():
    with make_executor("inline", workers=3) as inline:
        assert isinstance(inline, InlineExecutor)
    with make_executor("process", workers=3) as pool:
        assert isinstance(pool, ProcessExecutor)
        assert pool.workers == 3
        assert pool.pids == ()  # workers start when a run needs them


def test_inline_and_process_give_the_same_values_and_errors():
    items = [*ITEMS, workload.RAISE, 7]
    before = census.snapshot()
    with InlineExecutor() as inline:
        expected = outcomes(inline, workload.square_or_die, items)
    with ProcessExecutor(workers=2) as pool:
        assert outcomes(pool, workload.square_or_die, items) == expected
    assert census.compare(before, census.snapshot()) == []
    assert [f.value for f in expected[: len(ITEMS)]] == [item * item for item in ITEMS]
    assert expected[len(ITEMS)] == Finished(len(ITEMS), error="ValueError: no square for this item")
    assert expected[-1] == Finished(len(items) - 1, value=49)


def test_inline_runs_in_order_and_calls_on_start_before_each_item():
    events: list[tuple[str, int]] = []

    def on_start(index: int) -> None:
        events.append(("start", index))

    with InlineExecutor() as inline:
        for finished in inline.run(workload.square_or_die, [2, workload.RAISE, 3], on_start):
            events.append(("end", finished.index))
    assert events == [("start", 0), ("end", 0), ("start", 1), ("end", 1), ("start", 2), ("end", 2)]


@pytest.mark.parametrize("where", ["function", "on_start", "loop"])
def test_inline_lets_ctrl_c_through_with_nothing_left_running(where, tmp_path):
    ran: list[int] = []

    def function(item: int) -> int:
        ran.append(item)
        if where == "function" and item == 1:
            raise KeyboardInterrupt
        return item

    def on_start(index: int) -> None:
        if where == "on_start" and index == 1:
            raise KeyboardInterrupt

    seen = []
    before = census.snapshot()
    with pytest.raises(KeyboardInterrupt), InlineExecutor() as inline:
        for finished in inline.run(function, [0, 1, 2], on_start):
            seen.append(finished.index)
            if where == "loop":
                raise KeyboardInterrupt
    assert census.compare(before, census.snapshot()) == []
    assert seen == [0]
    assert ran == {"function": [0, 1], "on_start": [0], "loop": [0]}[where]


def test_a_closed_executor_refuses_to_run():
    for executor in (InlineExecutor(), ProcessExecutor(workers=1)):
        executor.close()
        executor.close()  # idempotent
        with pytest.raises(RuntimeError, match="closed"):
            executor.run(workload.square_or_die, [1])


def test_one_line_reasons():
    assert describe_exception(ValueError("first\nsecond")) == "ValueError: first"
    assert describe_exception(KeyboardInterrupt()) == "KeyboardInterrupt"
    assert death_reason(-9) == "worker died: killed by signal SIGKILL"
    assert death_reason(-11) == "worker died: killed by signal SIGSEGV"
    assert death_reason(3) == "worker died: exited with code 3"


def test_ray_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` finds when Ray is not installed
    with pytest.raises(MissingDependency, match=r"pip install 'rlrun\[ray\]'"):
        RayExecutor()
    with pytest.raises(MissingDependency, match=r"pip install 'rlrun\[ray\]'"):
        make_executor("ray")


def test_the_package_imports_no_library():
    code = (
        "import sys, rlrun.executors\n"
        "heavy = [m for m in ('ray', 'torch', 'rlrun.api', 'gymnasium', 'numpy') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


@pytest.mark.parametrize("name", ["inline", "process"])
def test_reports_reach_on_progress_in_order_before_their_item_finishes(name):
    """`report(message)` inside an item's function reaches `on_progress(index, message)` in this process, in
    order and before the item's `Finished`, inline and from pool workers alike; outside a run it is dropped."""
    events: list[tuple] = []
    before = census.snapshot()
    with make_executor(name, workers=2) as executor:
        for finished in executor.run(
            workload.count_aloud, [3, 0, 2], on_progress=lambda index, message: events.append((index, message))
        ):
            events.append((finished.index, "finished", finished.value))
    assert census.compare(before, census.snapshot()) == []
    for index, item in enumerate([3, 0, 2]):
        mine = [event for event in events if event[0] == index]
        assert mine == [*((index, (item, step)) for step in range(item)), (index, "finished", item)]
    assert workload.count_aloud(2) == 2  # no run listening: the reports go nowhere


def test_progress_sent_before_a_worker_died_arrives_and_the_item_fails():
    events: list[tuple] = []
    with make_executor("process", workers=1) as pool:
        finished = list(pool.run(workload.report_then_die, [5], on_progress=lambda *event: events.append(event)))
    assert events == [(0, (5, 0))]
    assert finished == [Finished(0, error="worker died: killed by signal SIGKILL")]


@pytest.mark.parametrize("name", ["inline", "process"])
def test_inline_and_pool_items_run_on_this_host_on_no_ray_node(name):
    """`where()` inside an item: this machine's host name, no Ray node id, nothing away (the files an item
    writes are on the driver's disk)."""
    with make_executor(name, workers=2) as executor:
        places = {finished.value for finished in executor.run(workload.place, [0, 1])}
    assert places == {(0, None, socket.gethostname(), False), (1, None, socket.gethostname(), False)}
    assert where() == Where(node_id=None, host=socket.gethostname())  # outside any run: here
