"""What a registered Gymnasium id needs installed before it can be made, read from its registration alone
(nothing is imported): `rlrun list tasks --gymnasium` lists the ids this installation can make and names
what the others lack."""

from __future__ import annotations

import importlib.util
from typing import Any

NEEDS = {
    "gymnasium.envs.mujoco.": ("mujoco", "pip install 'rlrun[mujoco]'"),
    "gymnasium.envs.box2d.": ("Box2D", "pip install 'gymnasium[box2d]'"),
    "gymnasium.envs.phys2d.": ("jax", "pip install 'gymnasium[jax]'"),
    "gymnasium.envs.tabular.": ("jax", "pip install 'gymnasium[jax]'"),
}
"""Entry-point module prefix -> (the module its envs import, how to install it)."""
RETIRED = {"_raise_mujoco_py_error": "mujoco-py (MuJoCo's retired bindings)", "_raise_shimmy_error": "shimmy"}
"""Gymnasium's placeholders for ids whose package Gymnasium no longer supports -> what they would need."""


GUARDED = ("mujoco",)
"""The simulators among `NEEDS` whose process state rlrun guards (`rlrun.hermetic.package_guards`)."""


def guarded_imports(spec: Any) -> list[str]:
    """The installed simulators of `GUARDED` that `spec`'s env imports as it is made: a call imports them before
    its capture, so that their guards are in place when the env is made (and their import is an import effect)."""
    entry = spec.entry_point
    if not isinstance(entry, str):
        return []
    return [
        module
        for prefix, (module, _) in NEEDS.items()
        if module in GUARDED and entry.startswith(prefix) and importlib.util.find_spec(module) is not None
    ]


def missing_requirement(spec: Any) -> str | None:
    """What `spec` (a Gymnasium `EnvSpec`) needs and this installation lacks, in words; None if nothing."""
    entry = spec.entry_point
    if callable(entry):
        return RETIRED.get(getattr(entry, "__name__", ""))
    if not isinstance(entry, str):
        return None
    for prefix, (module, hint) in NEEDS.items():
        if entry.startswith(prefix) and importlib.util.find_spec(module) is None:
            return f"{module} ({hint})"
    return None
