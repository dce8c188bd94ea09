"""An rl_games player's deterministic policy as a plain `torch.nn.Module`, for rlrun's export.

The module runs what the player's `get_action(is_deterministic=True)` runs: input normalisation, the network,
then the mean action clipped to [-1, 1] and rescaled to the action space (rl_games' `clip_actions`), or the most
likely discrete action. The class is built on first use (it subclasses `torch.nn.Module`), so importing this
module imports no torch.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def export_class() -> type:
    import torch

    class RlGamesDeterministicPolicy(torch.nn.Module):
        """rl_games' `get_action(is_deterministic=True)` as a plain module."""

        low: torch.Tensor  # registered buffers (for clipped Box actions): tensors, not submodules
        high: torch.Tensor

        def __init__(self, player: Any) -> None:
            super().__init__()
            self.model = player.model
            self.discrete = not hasattr(player, "actions_low")
            self.clip = not self.discrete and bool(player.clip_actions)
            if self.clip:
                self.register_buffer("low", player.actions_low.detach().float().clone())
                self.register_buffer("high", player.actions_high.detach().float().clone())

        def forward(self, observations: Any) -> Any:
            inputs = {"obs": self.model.norm_obs(observations), "rnn_states": None, "is_train": False}
            head = self.model.a2c_network(inputs)[0]
            if self.discrete:
                return head.argmax(dim=-1)
            if not self.clip:
                return head
            return torch.clamp(head, -1.0, 1.0) * (self.high - self.low) / 2.0 + (self.high + self.low) / 2.0

    return RlGamesDeterministicPolicy
