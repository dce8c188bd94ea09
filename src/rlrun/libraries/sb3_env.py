"""rlrun's torch vector env as Stable-Baselines3 sees it: `Sb3VecEnv`, a NumPy `VecEnv` over it.

Observations, rewards and dones cross to NumPy once per step and actions back to torch once, and the
`infos` of the envs whose episode ended get `terminal_observation` (from `info["final_obs"]`),
`TimeLimit.truncated` (truncated and not terminated: SB3 bootstraps those from the final observation)
and `episode` (return and length, as SB3's `VecMonitor` reports them); the other envs get empty dicts. With
`clip_reward`, SB3 learns from the rewards' signs, as SB3's `AtariWrapper` gives them, while `episode` keeps the
env's own returns (as RL Zoo's `Monitor`, inside the `AtariWrapper`, does).
The class is built on first use (it imports SB3), so importing this module imports no RL library.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlrun.envs import TorchVectorEnv


class TorchVecEnvMixin:
    """SB3's `VecEnv` over rlrun's torch vector env; `Sb3VecEnv` mixes in SB3's base class on first use.

    On the CPU, observations are NumPy views of the env's tensors (rlrun's envs return new tensors at
    every step); rewards are copied, since SB3 adds bootstrapped values to them in place. Attribute
    access and method calls (`get_attr`, `set_attr`, `env_method`) go to the one vector env that holds
    every sub-env; the result is repeated for each index asked for.
    """

    if TYPE_CHECKING:  # what SB3's `VecEnv`, mixed in by `vec_env_class`, gives the class
        num_envs: int
        _seeds: list[int | None]
        _options: list[dict[str, Any]]

        def _reset_seeds(self) -> None: ...
        def _reset_options(self) -> None: ...
        def _get_indices(self, indices: Any) -> Iterable[int]: ...

    def __init__(self, env: TorchVectorEnv, *, clip_reward: bool = False) -> None:
        import numpy as np

        self.env = env
        self.clip_reward = clip_reward
        spaces = env.single_observation_space, env.single_action_space
        super().__init__(env.num_envs, *spaces)  # type: ignore[call-arg]  # calls VecEnv's __init__
        self._actions: Any = None
        self._returns = np.zeros(env.num_envs, dtype=np.float64)
        self._lengths = np.zeros(env.num_envs, dtype=np.int64)
        self._started = time.perf_counter()

    def reset(self) -> Any:
        """Reset every env with the seed and options SB3 set for this reset (`seed()`, `set_options()`)."""
        seed, options = self._seeds[0], self._options[0]
        observations, _ = self.env.reset(seed=seed, options=options or None)
        self._reset_seeds()
        self._reset_options()
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return observations.detach().cpu().numpy()

    def step_async(self, actions: Any) -> None:
        import torch

        self._actions = torch.as_tensor(actions, device=self.env.device)

    def step_wait(self) -> tuple[Any, Any, Any, list[dict[str, Any]]]:
        """Step every env; build `infos` entries only for the envs whose episode ended."""
        import numpy as np

        observations, step_rewards, terminated, truncated, info = self.env.step(self._actions)
        dones = (terminated | truncated).cpu().numpy()
        rewards = step_rewards.detach().cpu().numpy().astype(np.float32)  # a copy, which SB3 may change in place
        self._returns += rewards
        self._lengths += 1
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            self._fill_ended(infos, np.flatnonzero(dones), terminated, info["final_obs"])
        if self.clip_reward:  # after the episode statistics, which keep the env's own returns
            rewards = np.sign(rewards)
        return observations.detach().cpu().numpy(), rewards, dones, infos

    def _fill_ended(self, infos: list[dict[str, Any]], ended: Any, terminated: Any, final: Any) -> None:
        final_observations = final.detach().cpu().numpy()[ended]
        time_outs = ~terminated.cpu().numpy()[ended]
        returns, lengths = self._returns[ended], self._lengths[ended]
        elapsed = round(time.perf_counter() - self._started, 6)
        for row, index in enumerate(ended.tolist()):
            infos[index] = {
                "terminal_observation": final_observations[row],
                "TimeLimit.truncated": bool(time_outs[row]),
                "episode": {"r": float(returns[row]), "l": int(lengths[row]), "t": elapsed},
            }
        self._returns[ended] = 0.0
        self._lengths[ended] = 0

    def close(self) -> None:
        self.env.close()

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return [getattr(self.env, attr_name)] * len(list(self._get_indices(indices)))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result] * len(list(self._get_indices(indices)))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """False: rlrun's vector envs are not wrapped in single-env Gymnasium wrappers such as SB3's `Monitor`."""
        return [False] * len(list(self._get_indices(indices)))


@functools.cache
def vec_env_class() -> type:
    """`Sb3VecEnv`: `TorchVecEnvMixin` with SB3's `VecEnv` (built on first use: it imports SB3)."""
    from stable_baselines3.common.vec_env import VecEnv

    return type("Sb3VecEnv", (TorchVecEnvMixin, VecEnv), {"__module__": __name__, "__doc__": TorchVecEnvMixin.__doc__})


def __getattr__(name: str) -> Any:
    if name == "Sb3VecEnv":  # imports SB3, so only on first use
        return vec_env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
