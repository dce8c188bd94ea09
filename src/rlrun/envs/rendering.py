"""Images of rlrun's native tasks, drawn by the Gymnasium env whose physics each task reproduces.

A native task keeps thousands of environments in tensors; to show one of them it copies that
environment's state into a single Gymnasium env (`CartPoleEnv`, `PendulumEnv`) created with
`render_mode="rgb_array"` and lets Gymnasium draw it, so no drawing code is written twice. No display
is needed (pygame draws off-screen).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class SubEnvFrames(Sequence):
    """The frames of every sub-env of a vector env, each drawn only when it is read.

    `VectorEnv.render()` returns one frame per sub-env; recording only the first one (as rlrun's videos
    do) then costs one drawing, however many environments run.
    """

    def __init__(self, num_envs: int, draw: Callable[[int], np.ndarray]):
        self._num_envs = num_envs
        self._draw = draw

    def __len__(self) -> int:
        return self._num_envs

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._num_envs))]
        if not -self._num_envs <= index < self._num_envs:
            raise IndexError(f"sub-env {index} of {self._num_envs}")
        return self._draw(index % self._num_envs)


class GymnasiumPainter:
    """Draws a state with a Gymnasium env made on first use by `make(render_mode="rgb_array")`."""

    def __init__(self, make: Callable[..., Any]):
        self._make = make
        self._env: Any = None

    def draw(self, **attributes: Any) -> np.ndarray:
        """Set attributes of the unwrapped env (its `state`, ...) and return its rgb_array frame."""
        if self._env is None:
            self._env = self._make(render_mode="rgb_array")
            self._env.reset(seed=0)
        for name, value in attributes.items():
            setattr(self._env, name, value)
        return self._env.render()

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
