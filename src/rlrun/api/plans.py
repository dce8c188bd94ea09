"""The plans: a request validated into everything a call needs, frozen, one type per call kind.

`rlrun.api.planning` builds them; the call bodies (`training`, `playing`, `exporting`, `agents`) and the
guarded session (`call`) read them. A plan holds no placeholder: every field is settled when it is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.libraries import Library
from rlrun.libraries.base import Adapter


@dataclass(frozen=True, kw_only=True)
class TaskPlan:
    """What every call that runs a task has settled."""

    task: str
    """The resolved Gymnasium id."""
    device: str
    log_root: Path
    experiment: str
    env_config: dict[str, Any]
    """The task's keyword arguments, overrides applied."""
    num_envs: int
    seed: int
    vectorization: str
    video: bool
    video_length: int
    threads: int
    """torch intra-op threads inside the call (`pick_threads`)."""


@dataclass(frozen=True, kw_only=True)
class AgentPlan(TaskPlan):
    """A zero or random agent's run: no library, no checkpoint."""

    kind: str
    """`zero` or `random`."""
    num_episodes: int | None
    max_steps: int


@dataclass(frozen=True, kw_only=True)
class LibraryPlan(TaskPlan):
    """What every call that drives an RL library has settled besides the task."""

    library: Library
    adapter: Adapter
    algorithm: str
    ml_framework: str
    agent_config: dict[str, Any]
    """The whole agent configuration, rlrun's run keys included (written to `params/agent.yaml`)."""
    library_config: dict[str, Any]
    """The library's own part of `agent_config` (`configs.library_config`), what the adapter receives."""
    checkpoint_run: runs.Run | None
    """The run the checkpoint belongs to, if it is in one."""
    verbose: bool


@dataclass(frozen=True, kw_only=True)
class TrainPlan(LibraryPlan):
    """A training run."""

    max_iterations: int
    env_steps_per_iteration: int
    agent_config_source: dict[str, Any]
    """Where `agent_config` came from (`configs.starting_config`), recorded in run.json."""
    resume_from: Path | None
    resume_iteration: int
    """The iteration the parent run recorded for `resume_from` (0 for none or a file outside a run)."""
    run_name: str | None
    deterministic: bool
    video_interval: int
    argv: tuple[str, ...] | None

    def repeat_command(self, config: str) -> str:
        """The command that trains this plan again from its agent configuration saved at `config`."""
        from rlrun.configs.provenance import repeat_command

        return repeat_command(
            library=self.library.name,
            algorithm=self.algorithm,
            task=self.task,
            framework=self.ml_framework if len(self.library.frameworks) > 1 else None,
            config=config,
            overrides=list(self.agent_config_source.get("overrides", ())),
        )


@dataclass(frozen=True, kw_only=True)
class PlayPlan(LibraryPlan):
    """An evaluation of a checkpoint."""

    checkpoint: Path
    num_episodes: int
    max_steps: int
    deterministic: bool


@dataclass(frozen=True, kw_only=True)
class ExportPlan(LibraryPlan):
    """An export of a checkpoint's deterministic policy."""

    checkpoint: Path
    formats: tuple[str, ...]
    validation_steps: int
