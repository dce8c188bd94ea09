"""The Ray executor on a local instance of 2 CPUs (slow: Ray takes seconds to start).

What Ray leaves in the calling process after `ray.shutdown()` (measured with Ray 2.60 on Linux): no Python
thread and no child process (the executor shuts down with `wait_for_processes=True`), but about ten native
threads (gRPC and event-engine threads, two more per further start), about eleven file descriptors (epoll,
eventfd, timerfd, a socket and the session's log files), three environment variables (`RAY_AUTH_MODE`,
`RAY_USAGE_STATS_ENABLED`, `PYTHONBREAKPOINT`), a SIGTERM handler, one more exit hook, and the `random`
module's state moved on. The hermetic scope puts back what can be put back; the rest makes Ray not census-clean.
"""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
import workload

from rlrun.executors import Finished, InlineExecutor, RayExecutor, Resources, make_executor

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")

TOO_BIG = "too big"


def children() -> set[str]:
    pid = os.getpid()
    found: set[str] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as listing:
            found.update(listing.read().split())
    return found


def by_index(finished: list[Finished], count: int) -> list[Finished]:
    assert sorted(f.index for f in finished) == list(range(count))
    return sorted(finished, key=lambda f: f.index)


def test_ray_gives_the_same_outcomes_and_leaves_no_process_or_python_thread(monkeypatch):
    """`workload` is importable only through this process's `sys.path` (pytest put its folder there): the local
    instance's workers inherit it as `PYTHONPATH`, and the caller's own `PYTHONPATH` is put back."""
    monkeypatch.setenv("PYTHONPATH", "/the/callers/own")
    items = [3, 1, 4, 1, 5, workload.RAISE, 9, 2, 6]
    with InlineExecutor() as inline:
        expected = by_index(list(inline.run(workload.square_or_die, items)), len(items))
    threads, processes = set(threading.enumerate()), children()
    started: list[int] = []
    with make_executor("ray", workers=2) as executor:
        finished = by_index(list(executor.run(workload.square_or_die, items, started.append)), len(items))
        assert ray.cluster_resources()["CPU"] == 2
        node = ray.get_runtime_context().get_node_id()
        places = [finished.value for finished in executor.run(workload.place, [0, 1])]
        assert children() - processes  # Ray's own processes run now
    assert finished == expected
    assert sorted(started) == list(range(len(items)))
    assert {place[1:] for place in places} == {(node, socket.gethostname(), False)}, "the driver's own node"
    assert not ray.is_initialized()
    assert children() == processes
    assert set(threading.enumerate()) == threads
    assert os.environ["PYTHONPATH"] == "/the/callers/own"


def test_ray_fails_a_task_whose_worker_died_and_cancels_a_dropped_run(tmp_path):
    def needs(item: object) -> Resources:
        return Resources(num_cpus=4) if item == TOO_BIG else Resources(num_cpus=1)

    items = [0, workload.KILL, 2, TOO_BIG, 4, 5]
    with RayExecutor(resources=needs, num_cpus=2) as executor:
        finished = by_index(list(executor.run(workload.square_or_die, items)), len(items))
        assert finished[1].error.startswith("worker died: ")  # WorkerCrashedError: The worker died unexpectedly...
        assert finished[3] == Finished(3, error="needs 4 CPUs and 0 GPUs; the local Ray instance has 2 CPUs and 0 GPUs")
        assert [finished[i].value for i in (0, 2, 4, 5)] == [0, 4, 16, 25]

        started, never = tmp_path / "started", str(tmp_path / "never")
        run = executor.run(workload.hold, [(str(started), never), (str(tmp_path / "other"), str(tmp_path))])
        assert next(run) == Finished(1, value=str(tmp_path))
        workload.wait_until_exists(started)
        run.close()  # item 0 never ends by itself: the dropped run's task is cancelled, its worker killed
        workload.wait_until_gone(int(started.read_text()))
        assert [f.value for f in executor.run(workload.square_or_die, [7])] == [49]
    assert not ray.is_initialized()


def test_ray_queues_every_item_and_calls_on_start_when_each_task_starts():
    """Without `workers`, every item is submitted at once and Ray queues what does not fit: on 2 CPUs, the third
    and fourth two-second items begin only once one of the first two has ended, and `on_start` says so (it is
    called when the task starts on its node, not when it is queued). Ordered by cause, on the wall clock the
    tasks and the driver share: a queued task's `on_start` comes after a first task ended, however late the
    driver hears of either under load. Reports arrive in order, after the start, before the item's `Finished`."""
    with RayExecutor(num_cpus=2) as executor:
        queued: list[int] = []
        on_start_at: dict[int, float] = {}

        def on_start(index: int) -> None:
            queued.append(len(executor._in_flight))
            on_start_at[index] = time.time()

        spans = {f.index: f.value for f in executor.run(workload.timed_nap, [2.0, 2.0, 2.0, 2.0], on_start)}
        assert max(queued) == 4, "every item was submitted before the first finished"
        assert sorted(spans) == sorted(on_start_at) == [0, 1, 2, 3]
        first, second, *later = sorted(spans, key=lambda index: spans[index][0])
        first_end = min(spans[first][1], spans[second][1])
        for index in later:
            assert spans[index][0] >= first_end, "a queued item began only once a CPU was free"
            assert on_start_at[index] >= first_end, "on_start came when the task started, not when it was queued"

        reports: list[tuple] = []
        for finished in executor.run(
            workload.count_aloud,
            [3, 0, 2],
            lambda index: reports.append((index, "start")),
            lambda index, message: reports.append((index, message)),
        ):
            reports.append((finished.index, "finished", finished.value))
    for index, item in enumerate([3, 0, 2]):
        mine = [event for event in reports if event[0] == index]
        assert mine == [(index, "start"), *((index, (item, step)) for step in range(item)), (index, "finished", item)]


def test_ray_with_workers_keeps_at_most_that_many_items_in_flight():
    with make_executor("ray", workers=1) as executor:
        in_flight: list[int] = []
        on_start = lambda index: in_flight.append(len(executor._in_flight))  # noqa: E731
        values = [f.value for f in executor.run(workload.square_or_die, [1, 2, 3], on_start)]
        assert sorted(values) == [1, 4, 9] and in_flight == [1, 1, 1], "one submitted at a time"
        assert ray.cluster_resources()["CPU"] == 1


RAY_SCRIPT = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import workload
from rlrun.executors import make_executor

with make_executor("ray", workers=1) as executor:
    finished = sorted(executor.run(workload.square_or_die, [workload.KILL, 3]), key=lambda f: f.index)
    time.sleep(2)  # Ray's message about the dead worker comes through a thread of its own
print(json.dumps([f.value for f in finished]))
"""


def test_rays_own_messages_never_reach_stdout():
    """A worker killed mid-task makes Ray print `(raylet) A worker died ...` from a thread of the driver, to stdout
    whatever `log_to_driver` says; the executor sends it to stderr, so stdout holds only what the program prints
    (`rlrun bench --json`)."""
    import subprocess
    import sys

    here = os.path.dirname(workload.__file__)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", RAY_SCRIPT, here], capture_output=True, text=True, timeout=300, env=env, check=True
    )
    assert done.stdout.splitlines() == ["[null, 9]"], done.stdout
    assert "(raylet)" in done.stderr, "Ray said the worker died (on stderr)"
