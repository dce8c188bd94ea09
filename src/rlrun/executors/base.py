"""Where cells run: one interface for running a picklable function over many items.

An executor runs `function(item)` for every item and yields each outcome as it finishes, in
completion order. It knows nothing of RL: the bench and the tuner hand it `rlrun.benching.cell.run_cell`
and the cells (or trials) to run, and the same rows come back whichever executor ran them.

- `inline`: in this process, one after another (each cell a hermetic call);
- `process`: a spawn-started pool of worker processes, each serving many items;
- `ray`: each item a Ray task.

A failure inside `function` is the function's business (it returns a failed row); an executor
reports only what the function could not: a worker that died (SIGKILL, segfault, out of memory).
All the same, an exception that escapes `function` fails its item alone (`error` is its one line,
`describe_exception`) on every executor; only `KeyboardInterrupt` (and `SystemExit`) raised inline
reach the caller, since inline they are the caller's own Ctrl-C.

Every item gets exactly one `Finished`, with `value` or `error`. A run whose iterator is dropped
before its end (the caller stopped reading, or an exception left the loop) stops the items still
running; leaving the context stops everything.
"""

from __future__ import annotations

import signal
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rlrun.errors import InvalidArgument


@dataclass(frozen=True)
class Resources:
    """What one item needs from a worker (Ray schedules by it; the pool runs one item per worker)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise InvalidArgument(f"{name} must be a number >= 0, got {value!r}.")


ResourcesFor = Resources | Callable[[Any], Resources]
"""The same `Resources` for every item, or a function of the item that returns its own."""


@dataclass(frozen=True)
class Finished:
    """One item's outcome: its index in the submitted sequence, and the function's return value or
    the reason it has none (`worker died: killed by signal SIGKILL`, `ValueError: ...`)."""

    index: int
    value: Any = None
    error: str | None = None


class Executor(ABC):
    """Runs a function over items; yields `Finished` as items end. Use as a context manager: leaving it
    (normally, on an exception or on Ctrl-C) stops every worker it started and frees what it holds."""

    name: str
    _closed: bool = False
    _running: bool = False
    exclusive = True
    """Whether one run at a time (a pool's workers or a Ray instance serve one run); inline runs nest."""

    def run(
        self,
        function: Callable[[Any], Any],
        items: Sequence[Any],
        on_start: Callable[[int], None] | None = None,
        on_progress: OnProgress | None = None,
    ) -> Iterator[Finished]:
        """Run `function(item)` for every item (a module-level, picklable function); call `on_start(index)`
        when an item starts and `on_progress(index, message)` for each `report(message)` the item's function
        makes (both in this process, between yields); yield each `Finished` as it comes."""
        if self._closed:
            raise RuntimeError("this executor is closed")
        if self.exclusive and self._running:
            raise RuntimeError("this executor is already running items: one run at a time")
        self._running = self.exclusive
        return self._run(function, items, on_start, on_progress)

    @abstractmethod
    def _run(
        self,
        function: Callable[[Any], Any],
        items: Sequence[Any],
        on_start: Callable[[int], None] | None,
        on_progress: OnProgress | None,
    ) -> Iterator[Finished]:
        """The executor's own loop (a generator); its `finally` sets `_running` back to False."""

    @abstractmethod
    def close(self) -> None:
        """Stop every worker and release every resource (idempotent)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


OnProgress = Callable[[int, Any], None]
"""`on_progress(index, message)`: a `report(message)` made by the function running item `index`."""

_sinks: list[Callable[[Any], None]] = []


def report(message: Any) -> None:
    """Hand `message` (small and picklable: a training's iteration, steps/s, return) from inside an item's
    function to the `on_progress` of the run that runs the item: directly inline, through the worker's pipe
    in a pool, through the run's inbox actor on Ray. Dropped where nothing listens: outside an executor, or in a
    run without `on_start` and `on_progress`."""
    if _sinks:
        _sinks[-1](message)


@contextmanager
def reporting_to(sink: Callable[[Any], None] | None) -> Iterator[None]:
    """Send the `report`s made in the block to `sink` (None: drop them, so they reach no outer run)."""
    _sinks.append(sink if sink is not None else _drop)
    try:
        yield
    finally:
        _sinks.pop()


def _drop(message: Any) -> None:
    return None


@dataclass(frozen=True)
class Where:
    """Where an item's function runs: the Ray node's id (None off Ray), the host's name, and whether that node is
    not the driver's (`away`: the files the function writes stay on that node unless it sends them back)."""

    node_id: str | None
    host: str
    away: bool = False


_places: list[Where] = []


def where() -> Where:
    """Where the calling item's function runs: what the Ray executor set for its task, else this host (inline
    and the process pool run on the driver's machine, so nothing they write is away)."""
    return _places[-1] if _places else Where(node_id=None, host=socket.gethostname())


@contextmanager
def placed(place: Where) -> Iterator[None]:
    """`where()` is `place` in the block (the Ray executor's task, around the item's function)."""
    _places.append(place)
    try:
        yield
    finally:
        _places.pop()


def describe_exception(error: BaseException) -> str:
    """One line for a `Finished.error`: the exception's type and the first line of its message."""
    lines = str(error).strip().splitlines()
    name = type(error).__name__
    return f"{name}: {lines[0].strip()}" if lines else name


def death_reason(exitcode: int | None) -> str:
    """One line for a worker process that ended while it held an item, from its exit code."""
    if exitcode is None:
        return "worker died: still running when it was given up on"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        return f"worker died: killed by signal {name}"
    return f"worker died: exited with code {exitcode}"
