"""rlrun's torch vector env behind TorchRL's env API: an `EnvBase` with batch size `[num_envs]`.

rlrun's envs follow Gymnasium's SAME_STEP autoreset: the step in which an episode ends returns the
next episode's first observation and keeps the last one in `info["final_obs"]`. TorchRL's collectors
expect the other order: `step` returns the transition's own next observation under `("next", ...)`
with `terminated`, `truncated` and `done`, and the collector then resets the envs that are done,
passing a `_reset` mask. `TorchRLVecEnv` bridges the two without copying anything to NumPy:
- `_step` returns the final observation (what the transition really reached), so that GAE and SAC
  bootstrap a truncated episode from its last observation, and cut at `terminated` alone;
- it keeps the observations the env restarted with, and a reset with a `_reset` mask (the
  collector's partial reset) hands those out instead of resetting anything: the env restarted them
  already. A reset without a mask (the first one, or a user's) resets every env for real.

Discrete actions are index actions (`Categorical` spec, shape `[num_envs]`); Box actions are
clipped to the space's bounds before the env sees them (a Gaussian policy samples beyond them).
Rewards and done flags are `[num_envs, 1]`, TorchRL's convention. TorchRL is imported on first use
(`env_class()`), so importing this module imports no RL library.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from gymnasium.spaces import Box, Discrete

    from rlrun.envs import TorchVectorEnv

DONE_KEYS = ("done", "terminated", "truncated")


def specs(env: TorchVectorEnv) -> dict[str, Any]:
    """TorchRL specs for rlrun's vector env: `observation`, `action`, `reward` and `done` (all three flags)."""
    import numpy as np
    import torch
    from torchrl.data import Bounded, Categorical, Composite, Unbounded

    n, device = env.num_envs, env.device
    observation_space = cast("Box", env.single_observation_space)  # bounds read as a Box's
    action_space = env.single_action_space
    shape = (n, *observation_space.shape)
    if np.all(np.isfinite(observation_space.low)) and np.all(np.isfinite(observation_space.high)):
        observation = Bounded(
            low=torch.as_tensor(observation_space.low, dtype=torch.float32).expand(shape),
            high=torch.as_tensor(observation_space.high, dtype=torch.float32).expand(shape),
            shape=shape,
            dtype=torch.float32,
            device=device,
        )
    else:
        observation = Unbounded(shape=shape, dtype=torch.float32, device=device)
    if type(action_space).__name__ == "Discrete":
        action = Categorical(int(cast("Discrete", action_space).n), shape=(n,), dtype=torch.int64, device=device)
    else:
        box = cast("Box", action_space)
        action_shape = (n, *box.shape)
        action = Bounded(
            low=torch.as_tensor(box.low, dtype=torch.float32).expand(action_shape),
            high=torch.as_tensor(box.high, dtype=torch.float32).expand(action_shape),
            shape=action_shape,
            dtype=torch.float32,
            device=device,
        )
    return {
        "observation": Composite(observation=observation, shape=(n,), device=device),
        "action": action,
        "reward": Unbounded(shape=(n, 1), dtype=torch.float32, device=device),
        "done": Composite(
            {key: Categorical(2, shape=(n, 1), dtype=torch.bool, device=device) for key in DONE_KEYS},
            shape=(n,),
            device=device,
        ),
    }


class TorchRLVecEnvMixin:
    """The adapter's logic; `env_class()` mixes it with TorchRL's `EnvBase` on first use (see the module doc)."""

    if TYPE_CHECKING:  # what `EnvBase` (untyped) gives the mixed class
        batch_size: Any
        device: Any
        full_done_spec: Any

    def __init__(self, env: TorchVectorEnv, seed: int | None = None) -> None:
        import torch

        batch_size = torch.Size([env.num_envs])
        super().__init__(device=env.device, batch_size=batch_size)  # type: ignore[call-arg]  # calls EnvBase's __init__
        self.env = env
        self._seed = seed
        made = specs(env)
        self.observation_spec = made["observation"]
        self.action_spec = made["action"]
        self.reward_spec = made["reward"]
        self.done_spec = made["done"]
        self._box = type(env.single_action_space).__name__ != "Discrete"
        if self._box:
            self._low = made["action"].space.low
            self._high = made["action"].space.high
        self._restarted: Any = None
        """The observations every env starts its next step from (after SAME_STEP restarts); None before a reset."""

    def _reset(self, tensordict: Any = None, **kwargs: Any) -> Any:
        from tensordict import TensorDict

        if tensordict is None or "_reset" not in tensordict.keys() or self._restarted is None:  # noqa: SIM118
            observations, _ = self.env.reset(seed=self._seed)
            self._seed = None  # seeded once; later full resets continue the env's own generator
        else:
            observations = self._restarted  # the env restarted the ended episodes in the step that ended them
        self._restarted = observations
        flags = self.full_done_spec.zero()
        return TensorDict(
            {"observation": observations, **flags},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: Any) -> Any:
        import torch
        from tensordict import TensorDict

        actions = tensordict.get("action")
        if self._box:
            actions = torch.clamp(actions, self._low, self._high)
        observations, rewards, terminated, truncated, info = self.env.step(actions)
        self._restarted = observations
        terminated = terminated.reshape(-1, 1)
        truncated = truncated.reshape(-1, 1)
        return TensorDict(
            {
                "observation": info["final_obs"],  # the transition's own next observation, before any restart
                "reward": rewards.reshape(-1, 1).to(torch.float32),
                "terminated": terminated,
                "truncated": truncated,
                "done": terminated | truncated,
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        """Seed the next full reset (TorchRL's `set_seed`); rlrun seeds its envs itself before training."""
        self._seed = seed


@functools.cache
def env_class() -> type:
    """`TorchRLVecEnv`: the mixin on TorchRL's `EnvBase` (imports TorchRL)."""
    from torchrl.envs import EnvBase

    return type(
        "TorchRLVecEnv", (TorchRLVecEnvMixin, EnvBase), {"__module__": __name__, "__doc__": TorchRLVecEnvMixin.__doc__}
    )


def __getattr__(name: str) -> Any:
    if name == "TorchRLVecEnv":  # imports TorchRL, so only on first use
        return env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
