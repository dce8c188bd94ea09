"""The reference scores and task suites rlrun ships (`rlrun/reports/references.yaml`), read as data.

    reference("Hopper-v5")      # -> Reference(random=..., reference=2325.547, kind="published", ...)
    suite("mujoco")             # -> Suite(name="mujoco", tasks=(SuiteTask("HalfCheetah-v5", 1000000, ...), ...))

A reference maps a return to a normalised score, (return - random) / (reference - random): 0 is a uniformly random
policy, 1 the reference (human for Atari, the Gymnasium reward threshold or a published return elsewhere). Each
number carries its source's text. Standard library and `rlrun.trust` only: the file is bounded YAML of plain types.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.errors import InvalidArgument, did_you_mean
from rlrun.trust.limits import read_yaml

REFERENCES_FILE = Path(__file__).resolve().parent / "references.yaml"
KINDS = ("human", "threshold", "published")


@dataclass(frozen=True)
class Reference:
    """A task's random and reference returns, what the reference is (`KINDS`) and where both come from."""

    task: str
    random: float
    reference: float
    kind: str
    source: str
    random_source: str
    threshold: float | None = None  # Gymnasium's reward_threshold, where the reference is another number

    def normalise(self, value: float) -> float:
        """`value` on the scale where random play is 0 and the reference is 1."""
        return (value - self.random) / (self.reference - self.random)


@dataclass(frozen=True)
class SuiteTask:
    """A task of a suite, its env-step budget, and the module its env needs (with the install that brings it)."""

    task: str
    env_steps: int
    module: str | None = None
    install: str | None = None
    optional: bool = False


@dataclass(frozen=True)
class Suite:
    name: str
    summary: str
    tasks: tuple[SuiteTask, ...]


@functools.cache
def _table() -> dict[str, Any]:
    data = read_yaml(REFERENCES_FILE, "rlrun's reference table")
    if not isinstance(data, dict):
        raise ValueError(f"{REFERENCES_FILE} holds no mapping")
    return data


def _float(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{REFERENCES_FILE}: {where} is {value!r}, not a number")
    return float(value)


@functools.cache
def references() -> dict[str, Reference]:
    """Every task's reference, by task id (an entry with `same_as` shares the other id's numbers)."""
    data = _table()
    sources = {str(key): " ".join(str(text).split()) for key, text in data.get("sources", {}).items()}
    entries = data.get("tasks", {})
    table: dict[str, Reference] = {}
    for task, entry in entries.items():
        entry = entries.get(entry["same_as"], {}) if "same_as" in entry else entry
        kind = str(entry.get("kind"))
        if kind not in KINDS:
            raise ValueError(f"{REFERENCES_FILE}: {task} has kind {kind!r}, not one of {KINDS}")
        random, best = (
            _float(entry.get("random"), f"{task}.random"),
            _float(entry.get("reference"), f"{task}.reference"),
        )
        if best == random:
            raise ValueError(f"{REFERENCES_FILE}: {task}'s reference equals its random score")
        threshold = entry.get("threshold")
        table[str(task)] = Reference(
            task=str(task),
            random=random,
            reference=best,
            kind=kind,
            source=sources[str(entry["source"])],
            random_source=sources[str(entry["random_source"])],
            threshold=None if threshold is None else _float(threshold, f"{task}.threshold"),
        )
    return table


def reference(task: str) -> Reference | None:
    """The reference of `task`, or None when rlrun ships none for it."""
    return references().get(task)


@functools.cache
def suites() -> dict[str, Suite]:
    """The named suites, in the file's order."""
    found = {}
    for name, entry in _table().get("suites", {}).items():
        tasks = []
        for item in entry["tasks"]:
            needs = item.get("needs") or {}
            tasks.append(
                SuiteTask(
                    task=str(item["task"]),
                    env_steps=int(item["env_steps"]),
                    module=needs.get("module"),
                    install=needs.get("install"),
                    optional=bool(item.get("optional", False)),
                )
            )
        found[str(name)] = Suite(str(name), " ".join(str(entry.get("summary", "")).split()), tuple(tasks))
    return found


def suite(name: object) -> Suite:
    """The suite named `name`; `InvalidArgument` (one line, the nearest name suggested) for any other value."""
    known = suites()
    if not isinstance(name, str) or name.strip().lower() not in known:
        shown = str(name)[:40]
        raise InvalidArgument(
            f"suite {shown!r} is unknown.{did_you_mean(shown, tuple(known), listing=0)} "
            f"Choose from: {', '.join(known)}."
        )
    return known[name.strip().lower()]


__all__ = ["KINDS", "REFERENCES_FILE", "Reference", "Suite", "SuiteTask", "reference", "references", "suite", "suites"]
