"""What runs in Ray's workers for the `ray` executor, without Ray: a task's reports reach its inbox in batches."""

from __future__ import annotations

from typing import Any

from rlrun.executors.ray_task import SEND_EVERY_S, Batches, Inbox


class Remote:
    """Stands for an actor handle's method: `.remote(...)` runs the method on a real `Inbox` and counts the call."""

    def __init__(self, method: Any, calls: list[int]) -> None:
        self._method = method
        self._calls = calls

    def remote(self, *args: Any) -> None:
        self._calls.append(len(args[-1]))
        self._method(*args)


class Handle:
    def __init__(self, inbox: Inbox) -> None:
        self.calls: list[int] = []
        self.put_many = Remote(inbox.put_many, self.calls)


def test_reports_made_faster_than_the_window_go_together_in_order_and_none_is_lost():
    inbox = Inbox()
    handle = Handle(inbox)
    now = [100.0]
    sink = Batches(handle, 3, clock=lambda: now[0])
    for step in range(25):  # ten reports a second for 2.5 s
        sink(("iteration", step))
        now[0] += 0.1
    sink.send()  # the task ends
    sink.send()  # nothing waits: no call
    assert inbox.drain() == [(3, False, ("iteration", step)) for step in range(25)]
    assert handle.calls[0] == 1, "the first report goes at once"
    assert len(handle.calls) <= 2.5 / SEND_EVERY_S + 2, handle.calls
    assert sum(handle.calls) == 25


def test_a_report_after_a_quiet_window_goes_at_once():
    inbox = Inbox()
    handle = Handle(inbox)
    now = [0.0]
    sink = Batches(handle, 0, clock=lambda: now[0])
    for step in range(3):
        sink(step)
        assert inbox.drain() == [(0, False, step)], "a slow training's every report is shown when it is made"
        now[0] += SEND_EVERY_S
