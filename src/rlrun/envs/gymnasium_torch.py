"""Any NumPy Gymnasium vector env (SAME_STEP autoreset) as a torch vector env on a device.

Gymnasium's own `NumpyToTorch` vector wrapper cannot be used here: it pushes the object arrays of
SAME_STEP infos (`final_obs`, `final_info`) through DLPack, which fails on the first step in which
an episode ends. This wrapper converts the step results itself, once per step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from rlrun.envs.contract import is_image
from rlrun.errors import UnsupportedTask


class GymnasiumTorchVectorEnv(VectorWrapper):
    """Wrap a NumPy `VectorEnv` in SAME_STEP autoreset mode so that it takes and returns torch tensors.

    Observations become float32 `[num_envs, *obs_shape]` (images, `is_image`, stay uint8), rewards float32
    `[num_envs]`, terminations and truncations bool `[num_envs]`, all on `device`. `info["final_obs"]` holds
    every env's last observation before any reset (equal to `obs` where no episode ended) and
    `info["_final_obs"]` a bool tensor marking the envs that ended; other info keys pass through as
    Gymnasium returns them. Actions may be torch tensors or NumPy arrays: Discrete actions are sent
    as int64, Box actions as float32 clipped to the space's bounds.
    """

    def __init__(self, env: VectorEnv, device: str | torch.device = "cpu"):
        super().__init__(env)
        if env.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"GymnasiumTorchVectorEnv needs a vector env in AutoresetMode.SAME_STEP, "
                f"got {env.metadata.get('autoreset_mode')}."
            )
        obs_space, act_space = env.single_observation_space, env.single_action_space
        for kind, space in (("observation", obs_space), ("action", act_space)):
            if not isinstance(space, (spaces.Box, spaces.Discrete)):
                task = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
                raise UnsupportedTask(
                    f"Task {task!r} has the {kind} space {space}; rlrun supports only Box and Discrete."
                )
        self.device = torch.empty(0, device=device).device  # 'cuda' -> 'cuda:0', as tensors report it
        self._obs_dtype = torch.uint8 if is_image(obs_space) else torch.float32
        if isinstance(obs_space, spaces.Box) and obs_space.dtype != np.float32 and not is_image(obs_space):
            # Observations are delivered as float32, so the space says float32 too.
            self.single_observation_space = spaces.Box(
                obs_space.low.astype(np.float32), obs_space.high.astype(np.float32), dtype=np.float32
            )
            self.observation_space = batch_space(self.single_observation_space, env.num_envs)
        self._action_bounds: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(act_space, spaces.Box):
            self._action_shape = (env.num_envs, *act_space.shape)
            self._action_bounds = (act_space.low, act_space.high)
        else:  # Discrete: one action per env
            self._action_shape = (env.num_envs,)

    def close(self, **kwargs: Any) -> None:
        """Close the env. An async env's observations live in shared memory (a `multiprocessing` heap arena
        with a `/dev/shm` file); they go with the env, so that the arena is free when the call that made the
        env ends, not when the last frame holding the env returns."""
        self.env.close(**kwargs)
        unwrapped = self.env.unwrapped
        if getattr(unwrapped, "shared_memory", False) and "observations" in vars(unwrapped):
            delattr(unwrapped, "observations")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every sub-env; return the observations on `device` and Gymnasium's info."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self._to_torch(obs, self._obs_dtype), info

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every sub-env with `actions`; return torch tensors on `device` (see the class docstring)."""
        obs, reward, terminated, truncated, info = self.env.step(self._to_numpy(actions))
        obs_tensor = self._to_torch(obs, self._obs_dtype)
        if "_final_obs" in info:  # some episode ended: its last observation is in an object array
            ended = np.flatnonzero(info["_final_obs"])
            final_obs = obs.copy()
            final_obs[ended] = np.stack(info["final_obs"][ended])
            final_obs_tensor = self._to_torch(final_obs, self._obs_dtype)
        else:
            final_obs_tensor = obs_tensor.clone()
        info = {
            **info,
            "final_obs": final_obs_tensor,
            "_final_obs": self._to_torch(np.logical_or(terminated, truncated), torch.bool),
        }
        return (
            obs_tensor,
            self._to_torch(reward, torch.float32),
            self._to_torch(terminated, torch.bool),
            self._to_torch(truncated, torch.bool),
            info,
        )

    def _to_numpy(self, actions: torch.Tensor | np.ndarray) -> np.ndarray:
        """Return `actions` as the sub-envs take them: int64 (Discrete) or clipped float32 (Box) NumPy."""
        if isinstance(actions, torch.Tensor):
            actions = actions.detach().cpu().numpy()
        if self._action_bounds is None:
            return np.asarray(actions, dtype=np.int64).reshape(self._action_shape)
        low, high = self._action_bounds
        actions = np.asarray(actions, dtype=np.float32).reshape(self._action_shape)
        return np.clip(actions, low, high).astype(np.float32, copy=False)

    def _to_torch(self, array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        """Return `array` as a tensor of `dtype` on `device`.

        On the CPU the tensor may share memory with `array`; Gymnasium's vector envs return fresh
        arrays from every call (their default `copy=True`), so nothing else holds them.
        """
        return torch.as_tensor(array, dtype=dtype).to(self.device)
