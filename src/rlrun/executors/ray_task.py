"""What runs inside Ray's workers for the `ray` executor: the task around each item (`call`) and the actor a
run's tasks report their start and progress into (`Inbox`). Ray is imported by the task, in the worker."""

from __future__ import annotations

import contextlib
import importlib
import socket
from collections.abc import Callable
from typing import Any

from rlrun.executors.base import Where, describe_exception, placed, reporting_to

__all__ = ["Inbox", "call", "node_id"]


class Inbox:
    """The actor a run's tasks report into: `(index, started, message)` in the order each task sent them."""

    def __init__(self) -> None:
        self._messages: list[tuple[int, bool, Any]] = []

    def put(self, index: int, started: bool, message: Any) -> None:
        self._messages.append((index, started, message))

    def drain(self) -> list[tuple[int, bool, Any]]:
        messages, self._messages = self._messages, []
        return messages

    def flush(self) -> None:
        """Nothing: a caller that waits on it knows that every `put` it sent before has been taken."""


def call(function: Callable[[Any], Any], item: Any, home: str | None, index: int, inbox: Any) -> tuple[bool, Any]:
    """The Ray task: `(True, function(item))`, or `(False, one line)` when `function` raised. `where()` tells
    `function` this node's id and host, and whether it is away from `home`, the driver's node (None: the driver
    is on no node of the cluster, so every node is away). With an `inbox`, the task tells it that it started and
    sends it every `report` of `function`; all have arrived when the task returns."""
    ray = importlib.import_module("ray")
    node = node_id(ray)
    place = Where(node_id=node, host=socket.gethostname(), away=home is None or node != home)
    sink = None
    if inbox is not None:
        # Waited for: the connection to the inbox is made now, not in the middle of `function` (a hermetic call
        # that would see the connection's socket appear); through the reference's future, as `ray.get` or
        # `ray.wait` in a task would lend its CPUs back to Ray, which would start a queued task beside it.
        with contextlib.suppress(Exception):
            inbox.put.remote(index, True, None).future().result()

        def sink(message: Any) -> None:
            inbox.put.remote(index, False, message)

    try:
        with placed(place), reporting_to(sink):
            return True, function(item)
    except Exception as error:
        return False, describe_exception(error)
    finally:
        if inbox is not None:
            with contextlib.suppress(Exception):  # the run is gone: nobody waits for the messages
                inbox.flush.remote().future().result()


def node_id(ray: Any) -> str | None:
    """The id of the Ray node this process runs on (None where Ray cannot say: a Ray Client driver)."""
    try:
        node = ray.get_runtime_context().get_node_id()
    except Exception:
        return None
    return node if isinstance(node, str) else None
