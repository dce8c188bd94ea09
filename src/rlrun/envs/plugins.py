"""Tasks from installed packages: the `rlrun.tasks` entry-point group.

A package adds native batched tasks by naming, in its metadata, a `NativeTask` record or a sequence
of them (a tuple or list), e.g. in its `pyproject.toml`:

    [project.entry-points."rlrun.tasks"]
    point_mass = "my_package.tasks:POINT_MASS"        # a NativeTask, or a tuple of NativeTasks

The records are data, like rlrun's own `BUILTIN_TASKS`: the module that holds them should import no
torch (the env class is named by the record's "module:Class" string and imported when an env is built).

The group is read once per process, on first need (a task resolved or listed), never at `import rlrun`;
a call imports this module in its import phase (`rlrun.api.planning.CORE_IMPORTS`), so the tasks' Gymnasium
registrations are import effects, there before the guards capture. A plugin that fails to load (its module
does not import, its value is not a record, its id is taken) is left out and named in `BROKEN`, with the
reason, for `rlrun list` and the unknown-task message; the other plugins load.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterable
from typing import Any

from rlrun.envs.tasks import NATIVE_TASKS, NativeTask, forget, register

GROUP = "rlrun.tasks"

PROVIDERS: dict[str, str] = {}
"""Task id -> the distribution (package) whose entry point registered it."""

BROKEN: dict[str, str] = {}
"""'<entry point> (<distribution>)' -> why it was left out, one line."""

_loaded = False


def load_task_plugins(*, reload: bool = False) -> None:
    """Register the tasks of every `rlrun.tasks` entry point (once per process; `reload` forgets the tasks
    registered before and reads the group again, for packages installed since)."""
    global _loaded
    if _loaded and not reload:
        return
    if reload:
        for task_id in PROVIDERS:
            forget(task_id)
        PROVIDERS.clear()
        BROKEN.clear()
        importlib.invalidate_caches()  # includes importlib.metadata's cached path listings
    _loaded = True
    for entry_point in importlib.metadata.entry_points(group=GROUP):
        distribution = entry_point.dist.name if entry_point.dist is not None else "unknown"
        try:
            tasks = _records(entry_point.load(), entry_point.value)
            for task in tasks:
                if task.id in NATIVE_TASKS and PROVIDERS.get(task.id) != distribution:
                    raise ValueError(f"its task {task.id!r} is already registered")
            for task in tasks:
                register(task)
                PROVIDERS[task.id] = distribution
        except Exception as error:  # a broken plugin must not take the others (or rlrun) down
            BROKEN[f"{entry_point.name} ({distribution})"] = " ".join(f"{type(error).__name__}: {error}".split())


def _records(value: Any, where: str) -> list[NativeTask]:
    """The NativeTask records an entry point names: one record, or a tuple or list of them."""
    records = [value] if isinstance(value, NativeTask) else value
    if isinstance(records, Iterable) and not isinstance(records, str | bytes | dict):
        records = list(records)
        if records and all(isinstance(record, NativeTask) for record in records):
            return records
    raise TypeError(f"{where} is {type(value).__name__}, not a rlrun.envs.NativeTask or a tuple of them")


def provider(task: NativeTask) -> str:
    """The package a native task comes from: `rlrun`, the plugin's distribution, or else the top-level module
    of its env class (a task registered by code with `rlrun.envs.register`)."""
    if task.id in PROVIDERS:
        return PROVIDERS[task.id]
    return task.vector_entry_point.partition(":")[0].partition(".")[0]


load_task_plugins()
