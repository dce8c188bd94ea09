"""`TorchVectorEnv`: the env contract every rlrun call and adapter steps, as a type.

Gymnasium's `VectorEnv` API in `AutoresetMode.SAME_STEP`, with torch tensors `[num_envs, ...]` on `device`
where Gymnasium has NumPy arrays. The native tasks (`BatchedVectorEnv`), Gymnasium ids behind
`GymnasiumTorchVectorEnv` and the `EpisodeStatistics` wrapper around either all fit it. A Protocol, so that
the contract needs no common base class; this module imports torch for type checkers only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from gymnasium import spaces


class TorchVectorEnv(Protocol):
    """`num_envs` environments stepped together in torch on `device`, restarted in the step their episode ends.

    `step` returns `(obs, reward, terminated, truncated, info)`: observations `[num_envs, *obs_shape]` float32, or
    uint8 where the observation space is an image (`is_image`: Atari's stacked frames), of the new episode where
    one ended, reward float32, terminated and truncated bool, each `[num_envs]`, and
    in `info` "final_obs", every env's observation before any restart, and "_final_obs", the bool mask of the
    envs that ended. `metadata["autoreset_mode"]` is `AutoresetMode.SAME_STEP`.
    """

    @property
    def num_envs(self) -> int:
        """Number of environments in the batch."""
        ...

    @property
    def device(self) -> torch.device:
        """The device of every tensor the env takes and returns."""
        ...

    @property
    def single_observation_space(self) -> spaces.Space[Any]:
        """One env's observation space (Box or Discrete)."""
        ...

    @property
    def single_action_space(self) -> spaces.Space[Any]:
        """One env's action space (Box or Discrete)."""
        ...

    @property
    def observation_space(self) -> spaces.Space[Any]:
        """The batched observation space."""
        ...

    @property
    def action_space(self) -> spaces.Space[Any]:
        """The batched action space."""
        ...

    @property
    def metadata(self) -> dict[str, Any]:
        """Gymnasium's metadata: `autoreset_mode`, `render_modes`, `render_fps`."""
        ...

    @property
    def render_mode(self) -> str | None:
        """`"rgb_array"` when the env was built to render, else None."""
        ...

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every env; return the observations and an info dict."""
        ...

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every env with `actions` (`[num_envs, *action_shape]` on `device`); see the class docstring."""
        ...

    def close(self, **kwargs: Any) -> None:
        """Release what the env holds (sub-processes, shared memory, renderers)."""
        ...


def is_image(space: Any) -> bool:
    """Whether an observation space is an image stack that the contract delivers as uint8, not float32: a Box of
    uint8 with three dimensions (`[channels, height, width]`, Atari's `[4, 84, 84]`)."""
    import numpy as np

    shape = getattr(space, "shape", None)
    return getattr(space, "dtype", None) == np.uint8 and shape is not None and len(shape) == 3
