"""What runs inside Ray's workers for the `ray` executor: the task around each item (`call`) and the actor a
run's tasks report their start and progress into (`Inbox`). Ray is imported by the task, in the worker."""

from __future__ import annotations

import contextlib
import importlib
import socket
import time
from collections.abc import Callable
from typing import Any

from rlrun.executors.base import Where, describe_exception, placed, reporting_to

__all__ = ["Inbox", "call", "node_id"]

SEND_EVERY_S = 0.5
"""The shortest time between two sends of a task's reports to its inbox. Each send is an actor call into the one
inbox of the run: a training reports every iteration (ten a second is common), so a bench of a hundred cells on a
cluster would send a thousand calls a second into one actor. Batched, a cell sends at most two a second, and the
driver, which looks at the inbox every half second, shows the same progress."""


class Inbox:
    """The actor a run's tasks report into: `(index, started, message)` in the order each task sent them."""

    def __init__(self) -> None:
        self._messages: list[tuple[int, bool, Any]] = []

    def start(self, index: int) -> None:
        """Task `index` started."""
        self._messages.append((index, True, None))

    def put_many(self, index: int, messages: list[Any]) -> None:
        """Reports of task `index`, in the order it made them."""
        self._messages.extend((index, False, message) for message in messages)

    def drain(self) -> list[tuple[int, bool, Any]]:
        messages, self._messages = self._messages, []
        return messages

    def flush(self) -> None:
        """Nothing: a caller that waits on it knows that every `put` it sent before has been taken."""


def call(function: Callable[[Any], Any], item: Any, home: str | None, index: int, inbox: Any) -> tuple[bool, Any]:
    """The Ray task: `(True, function(item))`, or `(False, one line)` when `function` raised. `where()` tells
    `function` this node's id and host, and whether it is away from `home`, the driver's node (None: the driver
    is on no node of the cluster, so every node is away). With an `inbox`, the task tells it that it started and
    sends it every `report` of `function` (in batches: `Batches`); all have arrived when the task returns."""
    ray = importlib.import_module("ray")
    node = node_id(ray)
    place = Where(node_id=node, host=socket.gethostname(), away=home is None or node != home)
    sink: Batches | None = None
    if inbox is not None:
        # Waited for: the connection to the inbox is made now, not in the middle of `function` (a hermetic call
        # that would see the connection's socket appear); through the reference's future, as `ray.get` or
        # `ray.wait` in a task would lend its CPUs back to Ray, which would start a queued task beside it.
        with contextlib.suppress(Exception):
            inbox.start.remote(index).future().result()
        sink = Batches(inbox, index)

    try:
        with placed(place), reporting_to(sink):
            return True, function(item)
    except Exception as error:
        return False, describe_exception(error)
    finally:
        if sink is not None:
            with contextlib.suppress(Exception):  # the run is gone: nobody waits for the messages
                sink.send()
                inbox.flush.remote().future().result()


class Batches:
    """A task's `report` sink: each message goes to the inbox at once when the last send is `SEND_EVERY_S` old,
    else it waits for the next report that is, or for `send()` when the task ends. Nothing is dropped, and the
    order is kept."""

    def __init__(self, inbox: Any, index: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._inbox = inbox
        self._index = index
        self._clock = clock
        self._pending: list[Any] = []
        self._sent = float("-inf")

    def __call__(self, message: Any) -> None:
        self._pending.append(message)
        if self._clock() - self._sent >= SEND_EVERY_S:
            self.send()

    def send(self) -> None:
        """Send what waits, if anything does."""
        if self._pending:
            messages, self._pending = self._pending, []
            self._sent = self._clock()
            self._inbox.put_many.remote(self._index, messages)


def node_id(ray: Any) -> str | None:
    """The id of the Ray node this process runs on (None where Ray cannot say: a Ray Client driver)."""
    try:
        node = ray.get_runtime_context().get_node_id()
    except Exception:
        return None
    return node if isinstance(node, str) else None
