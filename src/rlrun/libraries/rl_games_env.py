"""rlrun's torch vector env as rl_games sees it: `RlGamesVecEnv`, an `IVecEnv` over it, tensors in and out.

rl_games takes it through `config.vec_env` and `config.env_info`, never through its global env registries.
It needs no rl_games class to subclass, so importing this module imports no RL library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rlrun.envs import TorchVectorEnv


class RlGamesVecEnv:
    """rl_games' `IVecEnv` over rlrun's torch vector env (SAME_STEP autoreset), tensors in and out.

    `dones` are uint8 as rl_games keeps them; `infos["time_outs"]` marks truncations that were not
    terminations, so rl_games bootstraps their value. The first reset seeds the env.
    """

    def __init__(self, env: TorchVectorEnv, seed: int | None) -> None:
        self.env = env
        self._seed = seed

    def get_env_info(self) -> dict[str, Any]:
        return {
            "action_space": self.env.single_action_space,
            "observation_space": self.env.single_observation_space,
            "agents": 1,
            "value_size": 1,
        }

    def reset(self) -> Any:
        observations, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return observations

    def step(self, actions: Any) -> tuple[Any, Any, Any, dict[str, Any]]:
        import torch

        observations, rewards, terminated, truncated, _ = self.env.step(actions)
        dones = (terminated | truncated).to(torch.uint8)
        return observations, rewards, dones, {"time_outs": truncated & ~terminated}

    def set_train_info(self, env_frames: int, *args: Any, **kwargs: Any) -> None:
        """rl_games reports training progress here (for curricula); rlrun's envs have none."""

    def get_env_state(self) -> None:
        return None

    def set_env_state(self, env_state: Any) -> None:
        """rlrun's envs keep no state across checkpoints."""
