"""The process pool: workers serve many items, a dead worker fails its item alone and is replaced, errors come
back as one line, Ctrl-C and dropped runs stop the workers, and leaving the context leaves the process as it
was (threads, file descriptors, child processes: the leak detector's census)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
import workload

from rlrun.executors import Finished, ProcessExecutor, process
from rlrun.hermetic import census


@contextlib.contextmanager
def leaves_nothing_behind() -> Iterator[None]:
    """Fail unless the block leaves every entry of the leak detector's census as it found it."""
    before = census.snapshot()
    yield
    assert census.compare(before, census.snapshot()) == []


def by_index(finished: list[Finished], count: int) -> list[Finished]:
    assert sorted(f.index for f in finished) == list(range(count))
    return sorted(finished, key=lambda f: f.index)


def test_each_worker_serves_many_items_across_runs():
    with leaves_nothing_behind(), ProcessExecutor(workers=2) as pool:
        first = by_index(list(pool.run(workload.pid_of, range(8))), 8)
        second = by_index(list(pool.run(workload.pid_of, range(4))), 4)
        workers = set(pool.pids)
        assert len(workers) == 2
        assert {f.value[1] for f in first + second} == workers
        assert [f.value[0] for f in first] == list(range(8))


def test_results_come_back_as_items_finish(tmp_path):
    """Item 0 is released only when item 1 has come back: a pool that kept submission order would stall."""
    release = tmp_path / "release"
    items = [(str(tmp_path / "started-0"), str(release)), (str(tmp_path / "started-1"), str(tmp_path))]
    order = []
    with leaves_nothing_behind(), ProcessExecutor(workers=2) as pool:
        for finished in pool.run(workload.hold, items):
            order.append(finished)
            release.touch()
    assert order == [Finished(1, value=str(tmp_path)), Finished(0, value=str(release))]


DEATHS = [(workload.KILL, "worker died: killed by signal SIGKILL"), (workload.EXIT, "worker died: exited with code 3")]


@pytest.mark.parametrize(("item", "reason"), DEATHS)
def test_a_dead_worker_fails_its_item_alone_and_is_replaced(item, reason):
    """One worker: the items after the one that kills it can only be done by its replacement."""
    with leaves_nothing_behind(), ProcessExecutor(workers=1) as pool:
        [(_, first)] = [f.value for f in pool.run(workload.pid_of, [0])]
        items = [0, 1, 2, item, 4, 5, 6, 7]
        finished = by_index(list(pool.run(workload.square_or_die, items)), len(items))
        assert finished[3] == Finished(3, error=reason)
        assert [f.value for i, f in enumerate(finished) if i != 3] == [i * i for i in items if i != item]
        (second,) = pool.pids
        assert second != first
        assert [f.value for f in pool.run(workload.pid_of, [8])] == [(8, second)]


SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import workload
from rlrun.executors import ProcessExecutor

def main():
    with ProcessExecutor(workers=1) as pool:
        print([f.error or f.value for f in pool.run(workload.square_or_die, [3])])
"""


@pytest.mark.parametrize("guarded", [False, True])
def test_a_script_without_the_main_guard_is_told_why_its_workers_die(tmp_path, guarded):
    """Spawn imports the calling script again in each worker: unguarded, the worker runs its pool too, which
    multiprocessing refuses (exit 1) before the worker ran anything. The row names the fix."""
    script = tmp_path / "script.py"
    call = 'if __name__ == "__main__":\n    main()\n' if guarded else "main()\n"
    script.write_text(SCRIPT.format(tests=os.path.dirname(workload.__file__)) + call)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if guarded:
        assert done.stdout.strip() == "[9]"
    else:
        assert "worker died: exited with code 1; it died while starting" in done.stdout
        assert 'if __name__ == "__main__":' in done.stdout
        assert "bootstrapping phase" in done.stderr  # Python's own explanation, from the worker


def test_a_worker_that_exits_with_code_1_after_starting_gets_no_hint():
    with leaves_nothing_behind(), ProcessExecutor(workers=1) as pool:
        finished = by_index(list(pool.run(workload.square_or_die, [2, workload.EXIT_ONE, 4])), 3)
    assert [f.error or f.value for f in finished] == [4, "worker died: exited with code 1", 16]


@pytest.mark.parametrize(("item", "reason"), DEATHS)
def test_the_pool_goes_on_when_a_worker_dies(item, reason):
    items = [0, item, 2, 3, item, 5, 6, 7, 8, 9]
    with leaves_nothing_behind(), ProcessExecutor(workers=2) as pool:
        finished = by_index(list(pool.run(workload.square_or_die, items)), len(items))
        assert [f.error for f in finished] == [reason if i == item else None for i in items]
        assert [f.value for f in finished] == [None if i == item else i * i for i in items]
        assert 1 <= len(pool.pids) <= 2


def test_an_exception_fails_its_item_and_the_worker_serves_on():
    with leaves_nothing_behind(), ProcessExecutor(workers=1) as pool:
        items = [2, workload.RAISE, 3]
        finished = by_index(list(pool.run(workload.square_or_die, items)), 3)
        (worker,) = pool.pids
        assert finished == [Finished(0, 4), Finished(1, error="ValueError: no square for this item"), Finished(2, 9)]
        assert pool.pids == (worker,)


def test_an_interrupt_inside_a_worker_fails_its_item_and_the_worker_is_replaced():
    """A `KeyboardInterrupt` in a worker is no Ctrl-C of the parent (workers ignore SIGINT): its item fails, the
    worker leaves (its state is unknown after it) and a new one serves the rest."""
    with leaves_nothing_behind(), ProcessExecutor(workers=1) as pool:
        [(_, first)] = [f.value for f in pool.run(workload.pid_of, [0])]
        items = [workload.INTERRUPT, 2, 3]
        finished = by_index(list(pool.run(workload.square_or_die, items)), 3)
        assert finished == [Finished(0, error="KeyboardInterrupt"), Finished(1, 4), Finished(2, 9)]
        assert pool.pids != (first,)


def test_a_busy_worker_that_ignores_sigterm_is_killed_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "GRACE_S", 0.2)
    started = tmp_path / "started"

    def on_start(index: int) -> None:
        workload.wait_until_exists(started)  # the worker ignores SIGTERM from now on
        raise KeyboardInterrupt

    items = [(str(started), str(tmp_path / "never"))]
    with leaves_nothing_behind(), pytest.raises(KeyboardInterrupt), ProcessExecutor(workers=1) as pool:
        list(pool.run(workload.hold_through_sigterm, items, on_start))
    assert pool.pids == ()


def test_what_cannot_be_pickled_fails_its_item_alone():
    with leaves_nothing_behind(), ProcessExecutor(workers=1) as pool:
        (sent,) = list(pool.run(lambda item: item, [1]))
        assert sent.index == 0
        assert sent.error == (
            "the item could not be sent to a worker: AttributeError: "
            "Can't pickle local object 'test_what_cannot_be_pickled_fails_its_item_alone.<locals>.<lambda>'"
        )
        (returned,) = list(pool.run(workload.lock, [1]))
        assert returned == Finished(
            0, error="the result could not be sent back: TypeError: cannot pickle '_thread.lock' object"
        )
        assert [f.value for f in pool.run(workload.square_or_die, [5])] == [25]


def test_workers_ignore_sigint(tmp_path):
    """Ctrl-C reaches the whole process group; the workers leave it to the parent."""
    started, release = tmp_path / "started", tmp_path / "release"

    def on_start(index: int) -> None:
        workload.wait_until_exists(started)  # the item is running in the worker now
        os.kill(pool.pids[0], signal.SIGINT)
        release.touch()

    with leaves_nothing_behind(), ProcessExecutor(workers=1) as pool:
        finished = list(pool.run(workload.hold, [(str(started), str(release))], on_start))
        assert finished == [Finished(0, value=str(release))]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the parent's mask is back


@pytest.mark.parametrize("where", ["on_start", "loop"])
def test_ctrl_c_in_the_parent_stops_every_worker(where, tmp_path):
    """Item 0 never ends unless stopped; Ctrl-C comes while it runs (from `on_start` of item 1, or as a real
    SIGINT while the loop handles item 1's result)."""
    started, never = tmp_path / "started", str(tmp_path / "never")
    items = [(str(started), never), (str(tmp_path / "other"), str(tmp_path))]  # item 1 ends at once
    workers: list[int] = []

    def on_start(index: int) -> None:
        if index == 1:
            workload.wait_until_exists(started)
            workers.extend(pool.pids)
            if where == "on_start":
                raise KeyboardInterrupt

    with leaves_nothing_behind(), pytest.raises(KeyboardInterrupt), ProcessExecutor(workers=2) as pool:
        for finished in pool.run(workload.hold, items, on_start):
            assert finished == Finished(1, value=str(tmp_path))
            signal.raise_signal(signal.SIGINT)
    assert len(workers) == 2
    assert pool.pids == ()


def test_a_dropped_run_stops_its_running_items_and_the_pool_goes_on(tmp_path):
    started, never = tmp_path / "started", str(tmp_path / "never")
    items = [(str(started), never), (str(tmp_path / "other"), str(tmp_path))]
    with leaves_nothing_behind(), ProcessExecutor(workers=2) as pool:
        run = pool.run(workload.hold, items)
        assert next(run) == Finished(1, value=str(tmp_path))
        workload.wait_until_exists(started)
        assert len(pool.pids) == 2
        run.close()  # the caller stopped reading: item 0's worker is stopped, the idle one stays
        assert len(pool.pids) == 1
        assert [f.value for f in pool.run(workload.square_or_die, [3, 4])] in ([9, 16], [16, 9])


def test_one_run_at_a_time():
    with ProcessExecutor(workers=1) as pool:
        run = pool.run(workload.square_or_die, [1])
        with pytest.raises(RuntimeError, match="one run at a time"):
            pool.run(workload.square_or_die, [2])
        assert list(run) == [Finished(0, 1)]
        assert list(pool.run(workload.square_or_die, [2])) == [Finished(0, 4)]


def test_no_items_start_no_worker():
    with leaves_nothing_behind(), ProcessExecutor(workers=2) as pool:
        assert list(pool.run(workload.square_or_die, [])) == []
        assert pool.pids == ()


def test_a_pool_dropped_without_close_stops_its_workers():
    """The finalizer (also run at interpreter exit) stops the workers of a pool nobody closed."""
    with leaves_nothing_behind():
        pool = ProcessExecutor(workers=1)
        assert list(pool.run(workload.square_or_die, [2])) == [Finished(0, 4)]
        del pool


def test_a_pool_stops_the_resource_tracker_it_started(tmp_path):
    """Spawning starts `multiprocessing`'s resource tracker (a child process and a descriptor, for good); the pool
    stops it again when it started it. A fresh interpreter, so that no earlier test has started one."""
    script = tmp_path / "pool.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {os.path.dirname(workload.__file__)!r})\n"
        "import workload\n"
        "from rlrun.executors import ProcessExecutor\n"
        "def children():\n"
        "    with open(f'/proc/{os.getpid()}/task/{os.getpid()}/children') as listing:\n"
        "        return listing.read().split()\n"
        "if __name__ == '__main__':\n"
        "    fds = sorted(os.listdir('/proc/self/fd'))\n"
        "    with ProcessExecutor(workers=2) as pool:\n"
        "        print(sorted(f.value for f in pool.run(workload.square_or_die, [1, 2, 3])))\n"
        "        print(len(children()))\n"
        "    print(children(), sorted(os.listdir('/proc/self/fd')) == fds)\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["[1, 4, 9]", "3", "[] True"]  # two workers and the tracker, then none
