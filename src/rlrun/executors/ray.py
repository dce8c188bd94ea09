"""The `ray` executor: each item a Ray task with the CPUs and GPUs it asks for.

Without an `address`, the first run starts a local Ray instance (`ray.init(num_cpus=..., include_dashboard=False)`)
and `close()` shuts it down; with one, it connects to that cluster and `close()` only disconnects. A Ray
session already open in this process (someone else's `ray.init`) is used as it is and left open.

- Tasks run `function(item)` through a small trampoline, so an exception from `function` comes back as the
  same one line as on the other executors; a task whose worker dies (SIGKILL, segfault, out of memory) fails
  its item with `worker died: ...` and is not retried (`max_retries=0`: a cell that kills its worker would
  only kill it again).
- Items are submitted as the cluster's total CPUs and GPUs allow, so `on_start(index)` is called when an item
  can start rather than when it is queued (on a shared cluster, other jobs may still hold it back).
- Leaving the context, dropping a run half-way or Ctrl-C cancels the tasks still running (`ray.cancel(force=True)`).
- A local instance's workers get this process's `sys.path` (`PYTHONPATH` in the job's runtime environment), so
  that a function importable here is importable there, as in the process pool. On a cluster, the function's
  module must be installed on every node (rlrun itself, for the bench), and run directories must go to a
  `log_root` that every node can reach.

Ray is not hermetic: `ray.init` starts processes and threads in this process that `ray.shutdown` does not all
stop (see the tests in `tests/executors/test_ray_executor.py` for what is left).
"""

from __future__ import annotations

import importlib
import math
import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.executors.base import (
    Executor,
    Finished,
    OnProgress,
    Resources,
    ResourcesFor,
    Where,
    describe_exception,
    placed,
)

WAIT_S = 0.5
"""How long one `ray.wait` blocks, so that Ctrl-C is seen between waits whatever Ray does with signals."""


def _call(function: Callable[[Any], Any], item: Any, home: str | None) -> tuple[bool, Any]:
    """The Ray task: `(True, function(item))`, or `(False, one line)` when `function` raised. `where()` tells
    `function` this node's id and host, and whether it is away from `home`, the driver's node (None: the driver
    is on no node of the cluster, so every node is away)."""
    node = _node_id(importlib.import_module("ray"))
    place = Where(node_id=node, host=socket.gethostname(), away=home is None or node != home)
    try:
        with placed(place):
            return True, function(item)
    except Exception as error:
        return False, describe_exception(error)


def _node_id(ray: Any) -> str | None:
    """The id of the Ray node this process runs on (None where Ray cannot say: a Ray Client driver)."""
    try:
        node = ray.get_runtime_context().get_node_id()
    except Exception:
        return None
    return node if isinstance(node, str) else None


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError as error:
        raise MissingDependency(
            f"The ray executor needs Ray, which is not installed ({error}): pip install 'rlrun[ray]'"
        ) from None


class RayExecutor(Executor):
    """Runs each item as a Ray task.

    - `address`: a cluster to connect to (`ray.init(address=...)`); None starts a local instance.
    - `resources`: what every item needs, or a function of the item that returns its `Resources`.
    - `num_cpus`, `num_gpus`: the local instance's size (default: what Ray detects); ignored with an address.
    - `workers`: shorthand for `num_cpus`: the local instance gets enough CPUs for `workers` items at once.
    - `runtime_env`: the job's Ray runtime environment (default: this process's `sys.path` for a local
      instance, nothing for a cluster).
    - `log_to_driver`: print the workers' output here (off by default: the bench shows its own progress).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        resources: ResourcesFor = Resources(),  # noqa: B008 (a frozen dataclass)
        *,
        num_cpus: int | None = None,
        num_gpus: int | None = None,
        workers: int | None = None,
        runtime_env: dict[str, Any] | None = None,
        log_to_driver: bool = False,
    ) -> None:
        self._ray = _import_ray()
        if not (isinstance(resources, Resources) or callable(resources)):
            raise InvalidArgument(f"resources must be Resources or a function of the item, got {resources!r}.")
        for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus), ("workers", workers)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidArgument(f"{name} must be an integer >= 0, got {value!r}.")
        if workers is not None and num_cpus is None:
            per_item = resources.num_cpus if isinstance(resources, Resources) else 1.0
            num_cpus = max(1, math.ceil(workers * per_item))
        self.address = address
        self.resources = resources
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.runtime_env = runtime_env
        self.log_to_driver = log_to_driver
        self._remote: Any = None
        self._home: str | None = None
        """The driver's node id (None: a driver on no node, a Ray Client)."""
        self._owned = False
        """Whether this executor called `ray.init` (and so calls `ray.shutdown`)."""
        self._in_flight: dict[Any, tuple[int, Resources]] = {}
        self._running = False
        self._closed = False

    # --- public -------------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._cancel_in_flight()
        finally:
            if self._owned:
                self._owned = False
                self._ray.shutdown(wait_for_processes=True)

    # --- internals ----------------------------------------------------------------------------------------------

    def _connect(self) -> None:
        ray = self._ray
        if self._remote is not None:
            return
        if not ray.is_initialized():
            runtime_env = self.runtime_env
            if runtime_env is None and self.address is None:
                paths = [path for path in sys.path if path and os.path.exists(path)]
                runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": self.log_to_driver,
                "runtime_env": runtime_env,
            }
            if self.address is None:
                options.update(num_cpus=self.num_cpus, num_gpus=self.num_gpus)
            self._owned = True
            ray.init(self.address or "local", **options)  # "local": a new instance, never someone else's
        self._remote = ray.remote(max_retries=0)(_call)
        self._home = _node_id(ray)

    def _needs(self, item: Any) -> Resources:
        if isinstance(self.resources, Resources):
            return self.resources
        needs = self.resources(item)
        if not isinstance(needs, Resources):
            raise InvalidArgument(f"the resources function returned {needs!r}, not Resources.")
        return needs

    def _run(
        self,
        function: Callable[[Any], Any],
        items: Sequence[Any],
        on_start: Callable[[int], None] | None,
        on_progress: OnProgress | None,
    ) -> Iterator[Finished]:
        # A Ray task's `report`s are dropped (it has no sink): its item shows as running until it finishes.
        ray = self._ray
        try:
            if not items:
                return
            self._connect()
            total = ray.cluster_resources()
            capacity = Resources(num_cpus=float(total.get("CPU", 0.0)), num_gpus=float(total.get("GPU", 0.0)))
            next_index = 0
            while next_index < len(items) or self._in_flight:
                while next_index < len(items):
                    index = next_index
                    try:
                        needs = self._needs(items[index])
                    except Exception as error:
                        next_index += 1
                        yield Finished(index, error=describe_exception(error))
                        continue
                    if not self._fits(needs, capacity):
                        if self._in_flight:
                            break  # wait for room
                        if self.address is None:  # a local instance never grows
                            next_index += 1
                            yield Finished(index, error=self._too_big(needs, capacity))
                            continue
                    next_index += 1
                    try:
                        ref = self._remote.options(num_cpus=needs.num_cpus, num_gpus=needs.num_gpus).remote(
                            function, items[index], self._home
                        )
                    except Exception as error:  # the function or item does not serialise
                        yield Finished(index, error=f"the item could not be sent to Ray: {describe_exception(error)}")
                        continue
                    self._in_flight[ref] = (index, needs)
                    if on_start is not None:
                        on_start(index)
                if not self._in_flight:
                    continue
                ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    index, _ = self._in_flight.pop(ref)
                    yield self._outcome(index, ref)
        finally:
            self._running = False
            if not self._closed:
                self._cancel_in_flight()

    def _fits(self, needs: Resources, capacity: Resources) -> bool:
        used_cpus = sum(held.num_cpus for _, held in self._in_flight.values())
        used_gpus = sum(held.num_gpus for _, held in self._in_flight.values())
        slack = 1e-9
        return (
            used_cpus + needs.num_cpus <= capacity.num_cpus + slack
            and used_gpus + needs.num_gpus <= capacity.num_gpus + slack
        )

    @staticmethod
    def _too_big(needs: Resources, capacity: Resources) -> str:
        return (
            f"needs {needs.num_cpus:g} CPUs and {needs.num_gpus:g} GPUs; the local Ray instance has "
            f"{capacity.num_cpus:g} CPUs and {capacity.num_gpus:g} GPUs"
        )

    def _outcome(self, index: int, ref: Any) -> Finished:
        exceptions = self._ray.exceptions
        deaths = tuple(
            getattr(exceptions, name)
            for name in ("WorkerCrashedError", "OutOfMemoryError", "NodeDiedError", "LocalRayletDiedError")
            if hasattr(exceptions, name)
        )
        try:
            ok, payload = self._ray.get(ref)
        except deaths as error:
            return Finished(index, error=f"worker died: {describe_exception(error)}")
        except exceptions.TaskCancelledError:
            return Finished(index, error="cancelled")
        except exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            return Finished(index, error=describe_exception(cause) if cause is not None else _first_line(error))
        except Exception as error:  # out of memory, node died, the result does not deserialise, ...
            return Finished(index, error=describe_exception(error))
        if ok:
            return Finished(index, value=payload)
        return Finished(index, error=payload)

    def _cancel_in_flight(self) -> None:
        refs, self._in_flight = list(self._in_flight), {}
        for ref in refs:
            try:
                self._ray.cancel(ref, force=True)
            except Exception:  # already finished, or Ray is going away: nothing left to stop
                continue


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


__all__ = ["RayExecutor"]
