"""Named task suites (`rlrun bench --suite NAME`): the tasks and per-task env-step budgets of rlrun's reference
table (`rlrun.reports.references`), checked against what is installed before a bench plans anything.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from rlrun.errors import InvalidArgument
from rlrun.reports.references import Suite, SuiteTask, suite


@dataclass(frozen=True)
class SuitePlan:
    """A suite resolved here: its tasks with their env-step budgets, and the optional tasks left out."""

    suite: Suite
    tasks: tuple[SuiteTask, ...]
    left_out: tuple[SuiteTask, ...]

    @property
    def budgets(self) -> dict[str, int]:
        return {task.task: task.env_steps for task in self.tasks}

    def notes(self) -> list[str]:
        """One line per optional task left out, naming what would bring it."""
        return [
            f"suite {self.suite.name} leaves out {task.task}: it needs {task.module} (pip install '{task.install}')."
            for task in self.left_out
        ]


def installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def plan_suite(name: object) -> SuitePlan:
    """The suite `name` with its installable tasks; `InvalidArgument` (one line) for an unknown name, or for a
    suite whose required tasks need a module that is not installed (naming it and the install that brings it)."""
    found = suite(name)
    missing = [task for task in found.tasks if task.module is not None and not installed(task.module)]
    required = [task for task in missing if not task.optional]
    if required:
        first = required[0]
        tasks = ", ".join(task.task for task in required)
        raise InvalidArgument(
            f"suite {found.name!r} needs {first.module}, which is not installed, for {tasks}: "
            f"pip install '{first.install}', or choose another suite."
        )
    kept = tuple(task for task in found.tasks if task not in missing)
    return SuitePlan(found, kept, tuple(missing))


__all__ = ["SuitePlan", "installed", "plan_suite"]
