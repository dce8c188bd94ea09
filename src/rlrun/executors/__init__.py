"""Where cells and trials run: `inline` (hermetic calls in this process), a `process` pool, or `ray`.

    with make_executor("process", workers=4) as executor:
        for finished in executor.run(run_cell, cells, on_start):
            ...  # finished.index, finished.value or finished.error

This package imports only the standard library and `rlrun.errors`; Ray is imported when a Ray executor is
made (`rlrun[ray]`).
"""

from __future__ import annotations

from rlrun.errors import InvalidArgument, did_you_mean
from rlrun.executors.base import (
    Executor,
    Finished,
    OnProgress,
    Resources,
    ResourcesFor,
    Where,
    death_reason,
    describe_exception,
    report,
    where,
)
from rlrun.executors.inline import InlineExecutor
from rlrun.executors.process import ProcessExecutor
from rlrun.executors.ray import RayExecutor

EXECUTORS: dict[str, type[Executor]] = {
    "inline": InlineExecutor,
    "process": ProcessExecutor,
    "ray": RayExecutor,
}
"""Every executor by the name that `--executor` takes."""


def make_executor(
    name: str,
    workers: int | None = None,
    address: str | None = None,
    resources: ResourcesFor | None = None,
) -> Executor:
    """The executor called `name`, ready to use as a context manager.

    - `workers`: how many items run at once: the pool's size (default: the CPU count); on Ray, at most this
      many items queued or running (default: every item is submitted and Ray queues them), and a local
      instance's CPUs are `workers` x the items' `num_cpus` (default: Ray's own count). Inline runs one at a
      time and ignores it.
    - `address`: a Ray cluster to connect to (`ray` only).
    - `resources`: what each item needs (`ray` only; the pool runs one item per worker).
    """
    if name not in EXECUTORS:
        raise InvalidArgument(f"Unknown executor {name!r}.{did_you_mean(name, EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidArgument(f"workers must be an integer >= 1, got {workers!r}.")
    if address is not None and name != "ray":
        raise InvalidArgument(f"An address is for the ray executor only, not {name!r}: drop it or use ray.")
    if name == "inline":
        return InlineExecutor()
    if name == "process":
        return ProcessExecutor(workers=workers)
    return RayExecutor(address=address, resources=resources or Resources(), workers=workers)


__all__ = [
    "EXECUTORS",
    "Executor",
    "Finished",
    "InlineExecutor",
    "OnProgress",
    "ProcessExecutor",
    "RayExecutor",
    "Resources",
    "ResourcesFor",
    "Where",
    "death_reason",
    "describe_exception",
    "make_executor",
    "report",
    "where",
]
