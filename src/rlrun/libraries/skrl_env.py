"""rlrun's torch vector env as SKRL sees it: SKRL's torch and JAX `Wrapper`s subclassed for it.

The wrapper classes are built on first use (they import SKRL, and the JAX one jax), so importing this module
imports no RL library. For JAX, wrapping also makes the run's device SKRL's default (`skrl.config.jax`,
guarded by the adapter).
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

from rlrun.errors import InvalidArgument

if TYPE_CHECKING:
    from rlrun.envs import TorchVectorEnv


class VectorEnvWrapperMixin:
    """What SKRL's torch and JAX wrappers of rlrun's vector env share: the single env's spaces, no state,
    no rendering (rlrun records videos itself) and no closing (the env is rlrun's to close)."""

    _env: TorchVectorEnv

    @property
    def observation_space(self) -> Any:
        return self._env.single_observation_space

    @property
    def action_space(self) -> Any:
        return self._env.single_action_space

    def state(self) -> None:
        return None

    def render(self, *args: Any, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        return None


@functools.cache
def _torch_wrapper_class() -> type:
    """SKRL's torch `Wrapper` subclassed for rlrun's torch vector env (built on first use: it imports SKRL)."""
    from skrl.envs.wrappers.torch import Wrapper as TorchWrapper

    class TorchVectorEnvWrapper(VectorEnvWrapperMixin, TorchWrapper):
        """rlrun's torch vector env as SKRL's torch wrapper: tensors pass through, shaped `[num_envs, -1]`.

        The first `reset` resets the env with the run's seed; later ones (SKRL's trainer asks after an
        ended episode when there is one env) return the observation of the episode the env already
        started. The env is rlrun's to close.
        """

        def __init__(self, env: TorchVectorEnv, seed: int | None) -> None:
            super().__init__(env)
            self._seed = seed
            self._observations: Any = None

        def reset(self) -> tuple[Any, dict[str, Any]]:
            if self._observations is None:
                observations, _ = self._env.reset(seed=self._seed)
                self._observations = observations.reshape(self.num_envs, -1)
            return self._observations, {}

        def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
            observations, rewards, terminated, truncated, info = self._env.step(actions)
            self._observations = observations.reshape(self.num_envs, -1)
            final = info["final_obs"].reshape(self.num_envs, -1)
            shape = (self.num_envs, 1)
            return (
                self._observations,
                rewards.reshape(shape),
                terminated.reshape(shape),
                truncated.reshape(shape),
                {"final_observations": final},
            )

    return TorchVectorEnvWrapper


@functools.cache
def _jax_wrapper_class() -> type:
    """SKRL's JAX `Wrapper` subclassed for rlrun's torch vector env (built on first use: it imports jax)."""
    import jax
    import numpy as np
    import torch
    from skrl.envs.wrappers.jax import Wrapper as JaxWrapper

    class JaxVectorEnvWrapper(VectorEnvWrapperMixin, JaxWrapper):
        """rlrun's torch vector env as SKRL's JAX wrapper: observations, rewards and flags become JAX
        arrays on the JAX device, actions become torch tensors on the env's device."""

        def __init__(self, env: TorchVectorEnv, seed: int | None, device: Any) -> None:
            super().__init__(env)
            self._device = device
            self._seed = seed
            self._observations: Any = None

        def to_jax(self, tensor: Any, dtype: Any = np.float32) -> Any:
            array = tensor.detach().cpu().numpy().reshape(self.num_envs, -1)
            return jax.device_put(array.astype(dtype, copy=False), self._device)

        def to_torch(self, array: Any) -> Any:
            return torch.tensor(np.asarray(array), device=self._env.device)

        def reset(self) -> tuple[Any, dict[str, Any]]:
            if self._observations is None:
                observations, _ = self._env.reset(seed=self._seed)
                self._observations = self.to_jax(observations)
            return self._observations, {}

        def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
            observations, rewards, terminated, truncated, info = self._env.step(self.to_torch(actions))
            self._observations = self.to_jax(observations)
            return (
                self._observations,
                self.to_jax(rewards),
                self.to_jax(terminated, np.int8),
                self.to_jax(truncated, np.int8),
                {"final_observations": self.to_jax(info["final_obs"])},
            )

    return JaxVectorEnvWrapper


def jax_device(device: str) -> Any:
    """The JAX device for rlrun's device string (`cpu`, `cuda`, `cuda:N`)."""
    import jax

    kind, _, index = device.partition(":")
    try:
        return jax.devices("gpu" if kind == "cuda" else kind)[int(index or 0)]
    except (RuntimeError, IndexError):
        available = ", ".join(str(found) for found in jax.devices())
        raise InvalidArgument(
            f"--device {device!r} is not a device JAX can use here (it has: {available}); pass --device cpu."
        ) from None


def wrap_env(env: TorchVectorEnv, framework: str, device: str, seed: int | None) -> Any:
    """rlrun's vector env as SKRL's wrapper for `framework`; for JAX, also make its device SKRL's default."""
    if framework == "jax":
        target = jax_device(device)
        sys.modules["skrl"].config.jax.device = target  # guarded: skrl.config.jax
        return _jax_wrapper_class()(env, seed, target)
    return _torch_wrapper_class()(env, seed)
