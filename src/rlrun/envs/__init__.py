"""Tasks as torch vector envs: rlrun's native batched tasks and any Gymnasium id behind one contract
(`TorchVectorEnv`).

Importing this package registers the native tasks with Gymnasium and imports no torch; the env
classes import torch in their own modules, which Gymnasium imports when it builds them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlrun.envs.contract import TorchVectorEnv
from rlrun.envs.signatures import env_config, env_module
from rlrun.envs.tasks import (
    BUILTIN_TASKS,
    NATIVE_TASKS,
    NativeTask,
    make_env,
    register,
    register_task,
    resolve_task,
)

if TYPE_CHECKING:
    from rlrun.envs.batched import BatchedVectorEnv
    from rlrun.envs.statistics import EpisodeStatistics

__all__ = [
    "BUILTIN_TASKS",
    "NATIVE_TASKS",
    "BatchedVectorEnv",
    "EpisodeStatistics",
    "NativeTask",
    "TorchVectorEnv",
    "env_config",
    "env_module",
    "make_env",
    "register",
    "register_task",
    "resolve_task",
]


def __getattr__(name: str) -> Any:
    # These import torch, so only on first use.
    if name == "EpisodeStatistics":
        from rlrun.envs.statistics import EpisodeStatistics

        return EpisodeStatistics
    if name == "BatchedVectorEnv":
        from rlrun.envs.batched import BatchedVectorEnv

        return BatchedVectorEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
