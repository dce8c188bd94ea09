"""Stable-Baselines3's checkpoints: SB3's own model zip, checked without unpickling, saved every few iterations.

A checkpoint is SB3's `.zip` (`model_<iterations>.zip`), written through rlrun's atomic writer. SB3's `load`
reads its tensors with `torch.load(weights_only=True)` but unpickles (cloudpickle) the hyperparameters, spaces
and schedules kept in the zip's `data` entry; `check_checkpoint` and `saved_algorithm` read the zip's entries
and tensors without unpickling or building anything. The callback that saves checkpoints during `learn` counts
iterations (rollouts). SB3 and torch are imported inside the functions.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from rlrun.errors import CorruptCheckpoint, InvalidArgument
from rlrun.libraries.base import unreadable
from rlrun.libraries.sb3_config import CLASS_NAMES

CHECKPOINT_ENTRIES = ("data", "policy.pth", "_stable_baselines3_version")
POLICY_MODULES = {
    "stable_baselines3.common.policies": "ppo",  # or A2C: the saved hyperparameters tell them apart
    "stable_baselines3.sac.policies": "sac",
    "stable_baselines3.td3.policies": "td3",
}
"""The module of a saved model's policy class -> the algorithm that uses it."""


def check_checkpoint(path: Path) -> None:
    """Check that the file is an SB3 model zip of a known algorithm, reading it without unpickling anything."""
    saved_algorithm(path)


def saved_algorithm(path: Path) -> str:
    """The algorithm (`ppo`, `a2c`, `sac`, `td3`) that saved the SB3 model at `path`; `CorruptCheckpoint` if none."""
    try:
        data, state = _read_model_zip(path)
    except CorruptCheckpoint:
        raise
    except Exception as error:
        raise unreadable(path, "a Stable-Baselines3 model", error) from error
    policy_class = data.get("policy_class") if isinstance(data, dict) else None
    module = policy_class.get("__module__") if isinstance(policy_class, dict) else None
    if module not in POLICY_MODULES or not isinstance(state, dict):
        raise CorruptCheckpoint(
            f"checkpoint {str(path)!r} is not a Stable-Baselines3 model of {', '.join(CLASS_NAMES.values())} "
            f"(policy class from {module!r})."
        )
    if POLICY_MODULES[module] == "ppo" and "clip_range" not in data:
        return "a2c"
    return POLICY_MODULES[module]


def _read_model_zip(path: Path) -> tuple[Any, Any]:
    """The zip's `data` entry as JSON (its cloudpickled values stay unread) and the policy's weights."""
    import io
    import json
    import zipfile

    import torch

    with zipfile.ZipFile(path) as archive:
        missing = [name for name in CHECKPOINT_ENTRIES if name not in archive.namelist()]
        if missing:
            raise CorruptCheckpoint(
                f"checkpoint {str(path)!r} is not a Stable-Baselines3 model (missing {', '.join(missing)})."
            )
        data = json.loads(archive.read("data"))
        state = torch.load(io.BytesIO(archive.read("policy.pth")), map_location="cpu", weights_only=True)
    return data, state


def check_saved_algorithm(path: Path, algorithm: str) -> None:
    """Raise `InvalidArgument` when the model at `path` was saved by another algorithm than `algorithm`."""
    saved = saved_algorithm(path)
    if saved != algorithm:
        raise InvalidArgument(
            f"checkpoint {str(path)!r} holds an SB3 {CLASS_NAMES[saved]} model, not {CLASS_NAMES[algorithm]}; "
            f"pass --algorithm {saved}."
        )


def writer(model: Any) -> Any:
    """A writer for `job.save_checkpoint`: SB3's `save` into the open temporary file (no suffix is appended)."""

    def write(temporary: str) -> None:
        with open(temporary, "wb") as file:
            model.save(file)

    return write


class CheckpointCallbackMixin:
    """Counts iterations (one per rollout, on from `first`: a resumed run's parent's count) and saves every
    `save_interval` of them once their update is done."""

    def __init__(self, save: Any, save_interval: int, first: int = 0) -> None:
        super().__init__()  # type: ignore[call-arg]
        self.save = save
        self.save_interval = save_interval
        self.iterations = self.first = first

    def _on_rollout_start(self) -> None:
        # The previous iteration's update has run: that is the model a checkpoint of it must hold.
        if self.iterations > self.first and self.iterations % self.save_interval == 0:
            self.save(self.iterations)

    def _on_rollout_end(self) -> None:
        self.iterations += 1

    def _on_step(self) -> bool:
        return True


@functools.cache
def callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    return type("Sb3Checkpoints", (CheckpointCallbackMixin, BaseCallback), {"__module__": __name__})
