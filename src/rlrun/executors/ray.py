"""The `ray` executor: each item a Ray task with the CPUs and GPUs it asks for.

Without an `address`, the first run starts a local Ray instance (`ray.init(num_cpus=..., include_dashboard=False)`)
and `close()` shuts it down; with one, it connects to that cluster and `close()` only disconnects. A Ray
session already open in this process (someone else's `ray.init`) is used as it is and left open.

- Tasks run `function(item)` through a small trampoline, so an exception from `function` comes back as the
  same one line as on the other executors; a task whose worker dies (SIGKILL, segfault, out of memory) fails
  its item with `worker died: ...` and is not retried (`max_retries=0`: a cell that kills its worker would
  only kill it again).
- Every item is submitted at once, as a task with the CPUs and GPUs it asks for, and Ray queues them and places
  each on a node with room (`workers`, when given, bounds how many are submitted and not yet finished).
  `on_start(index)` is called when a task starts on its node, not when it is queued, and `report(message)`
  inside `function` reaches `on_progress` (through a small actor the run's tasks report into, drained between
  waits; each task's messages arrive before its `Finished`).
- An item that needs more CPUs or GPUs than a local instance has fails at once; on a cluster it waits.
- Leaving the context, dropping a run half-way or Ctrl-C cancels the tasks still queued or running
  (`ray.cancel(force=True)`).
- `where()` inside `function` gives the task's node id and host, and whether that node is the driver's: a
  bench cell on another node sends its run folder back with its row (`rlrun.benching.cell`).
- Ray's own messages (`(raylet) ...`) go to stderr, never stdout, and the workers' output is not printed here
  (`log_to_driver=False`): stdout is rlrun's (`--json`).
- A local instance's workers get this process's `sys.path` (as `PYTHONPATH` in the environment the instance
  starts with, which its workers inherit), so that a function importable here is importable there, as in the
  process pool. (A job runtime environment would do the same, but Ray then starts the job's workers afresh
  instead of using the ones it started with the instance.) On a cluster, the function's module must be installed
  on every node (rlrun itself, for the bench).

Ray is not hermetic: `ray.init` starts processes and threads in this process that `ray.shutdown` does not all
stop (see the tests in `tests/executors/test_ray_executor.py` for what is left).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.executors.base import Executor, Finished, OnProgress, Resources, ResourcesFor, describe_exception
from rlrun.executors.ray_task import Inbox, call, node_id

WAIT_S = 0.5
"""How long one `ray.wait` blocks, so that Ctrl-C is seen between waits whatever Ray does with signals."""


def _messages_to_stderr() -> Callable[[], None] | None:
    """Send the messages Ray's driver prints on its own (`(raylet) A worker died ...`, which Ray writes to stdout
    whatever `log_to_driver` says) to stderr, so that stdout holds only what rlrun prints (`--json`); returns
    what puts Ray's printer back. None where Ray's private printer is not where Ray 2.x keeps it."""
    try:
        module = importlib.import_module("ray._private.worker")
    except ImportError:
        return None
    original = getattr(module, "print_to_stdstream", None)
    if not callable(original):
        return None

    def to_stderr(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        return original({**data, "is_err": True}, *args, **kwargs)

    setattr(module, "print_to_stdstream", to_stderr)  # noqa: B010 (Ray's private printer: no stub for it)

    def restore() -> None:
        if getattr(module, "print_to_stdstream", None) is to_stderr:
            setattr(module, "print_to_stdstream", original)  # noqa: B010

    return restore


@contextlib.contextmanager
def _search_path_inherited() -> Iterator[None]:
    """While a local instance starts: `PYTHONPATH` set to this process's `sys.path`, which Ray's processes and the
    workers they start inherit; the caller's `PYTHONPATH` (or its absence) is put back after."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path and os.path.exists(path))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


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
    - `workers`: at most this many items submitted and not finished (default: every item at once, Ray queues
      them); a local instance also gets enough CPUs for `workers` items at once unless `num_cpus` is given.
    - `runtime_env`: the job's Ray runtime environment (default: none; a local instance's workers get this
      process's `sys.path`).
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
        self.workers = workers
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
        self._quiet: Callable[[], None] | None = None
        """Puts back where Ray prints its own messages (see `_messages_to_stderr`)."""
        self._handlers: dict[int, Any] = {}
        """SIGINT's and SIGTERM's handlers before `ray.init`, which installs its own SIGTERM handler in the driver
        and leaves it after `ray.shutdown`: put back on close."""
        self._inbox: Any = None
        self._capacity: Resources | None = None
        """A local instance's CPUs and GPUs (read once: it never grows); None on a cluster."""
        self._in_flight: dict[Any, int] = {}
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
            try:
                if self._owned:
                    self._owned = False
                    self._ray.shutdown(wait_for_processes=True)  # joins the thread that prints Ray's messages
            finally:
                quiet, self._quiet = self._quiet, None
                if quiet is not None:
                    quiet()
                handlers, self._handlers = self._handlers, {}
                for number, handler in handlers.items():
                    signal.signal(number, handler)

    def nodes(self) -> int:
        """How many nodes of the cluster are alive now (connecting first, starting a local instance if need be)."""
        self._connect()
        return sum(1 for node in self._ray.nodes() if node.get("Alive"))

    # --- internals ----------------------------------------------------------------------------------------------

    def _connect(self) -> None:
        ray = self._ray
        if self._remote is not None:
            return
        if not ray.is_initialized():
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": self.log_to_driver,
                "runtime_env": self.runtime_env,
            }
            if self.address is None:
                options.update(num_cpus=self.num_cpus, num_gpus=self.num_gpus)
            self._owned = True
            if threading.current_thread() is threading.main_thread():
                self._handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
            self._quiet = _messages_to_stderr()
            local = self.address is None and self.runtime_env is None
            with _search_path_inherited() if local else contextlib.nullcontext():
                ray.init(self.address or "local", **options)  # "local": a new instance, never someone else's
        self._remote = ray.remote(max_retries=0)(call)
        self._inbox = ray.remote(num_cpus=0, max_restarts=0)(Inbox)
        self._home = node_id(ray)
        if self.address is None:
            total = ray.cluster_resources()
            self._capacity = Resources(num_cpus=float(total.get("CPU", 0.0)), num_gpus=float(total.get("GPU", 0.0)))

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
        ray = self._ray
        inbox = None
        started: set[int] = set()
        try:
            if not items:
                return
            self._connect()
            if on_start is not None or on_progress is not None:
                inbox = self._inbox.remote()
            pending = deque(range(len(items)))
            while pending or self._in_flight:
                while pending and (self.workers is None or len(self._in_flight) < self.workers):
                    index = pending.popleft()
                    failure = self._submit(function, items[index], index, inbox)
                    if failure is not None:
                        yield failure
                if not self._in_flight:
                    continue
                ready, _ = ray.wait(list(self._in_flight), num_returns=1, timeout=WAIT_S)
                if inbox is not None:
                    self._deliver(inbox, started, on_start, on_progress)
                for ref in ready:
                    index = self._in_flight.pop(ref)
                    if on_start is not None and index not in started:  # it died before it could say it started
                        started.add(index)
                        on_start(index)
                    yield self._outcome(index, ref)
        finally:
            self._running = False
            if not self._closed:
                self._cancel_in_flight()
            if inbox is not None:
                with contextlib.suppress(Exception):
                    ray.kill(inbox)

    def _submit(self, function: Callable[[Any], Any], item: Any, index: int, inbox: Any) -> Finished | None:
        """Queue the item's task; a `Finished` with the reason when it cannot be queued."""
        try:
            needs = self._needs(item)
        except Exception as error:
            return Finished(index, error=describe_exception(error))
        capacity = self._capacity
        if capacity is not None and not (
            needs.num_cpus <= capacity.num_cpus + 1e-9 and needs.num_gpus <= capacity.num_gpus + 1e-9
        ):
            return Finished(index, error=self._too_big(needs, capacity))
        try:
            ref = self._remote.options(num_cpus=needs.num_cpus, num_gpus=needs.num_gpus).remote(
                function, item, self._home, index, inbox
            )
        except Exception as error:  # the function or item does not serialise
            return Finished(index, error=f"the item could not be sent to Ray: {describe_exception(error)}")
        self._in_flight[ref] = index
        return None

    def _deliver(
        self,
        inbox: Any,
        started: set[int],
        on_start: Callable[[int], None] | None,
        on_progress: OnProgress | None,
    ) -> None:
        """Hand what the tasks reported since the last look to `on_start` and `on_progress`, in order."""
        try:
            messages = self._ray.get(inbox.drain.remote())
        except Exception:  # the inbox died: the items still run, unseen until they finish
            return
        for index, start, message in messages:
            if index not in started:
                started.add(index)
                if on_start is not None:
                    on_start(index)
            if not start and on_progress is not None:
                on_progress(index, message)

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
