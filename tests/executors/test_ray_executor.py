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


def test_ray_gives_the_same_outcomes_and_leaves_no_process_or_python_thread():
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
