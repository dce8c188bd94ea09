"""A Stable-Baselines3 model's deterministic policy as a plain `torch.nn.Module`, for rlrun's export.

The module computes what SB3's `predict(deterministic=True)` does before clipping: PPO and A2C the action
net's mean (argmax for Discrete), SAC and TD3 the squashed actor output scaled to the action space's bounds.
The class is built on first use (it imports torch and SB3), so importing this module imports neither.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def export_class() -> type:
    import torch
    from stable_baselines3.common.policies import BaseModel

    class Sb3DeterministicPolicy(torch.nn.Module):
        """Observations in, actions out: PPO and A2C the action net's mean (argmax for Discrete), SAC and
        TD3 the squashed actor output scaled to the action space's bounds, as SB3's `predict` does."""

        low: torch.Tensor  # registered buffers (for Box actions): tensors, not submodules
        high: torch.Tensor

        def __init__(self, policy: Any, algorithm: str, action_space: Any) -> None:
            super().__init__()
            self.policy = policy
            self.algorithm = algorithm
            self.discrete = type(action_space).__name__ == "Discrete"
            self.squashed = algorithm in ("sac", "td3") or bool(getattr(policy, "squash_output", False))
            if not self.discrete:
                self.register_buffer("low", torch.as_tensor(action_space.low, dtype=torch.float32))
                self.register_buffer("high", torch.as_tensor(action_space.high, dtype=torch.float32))

        def forward(self, observations: Any) -> Any:
            if self.algorithm == "sac":
                actions = torch.tanh(self.policy.actor.get_action_dist_params(observations)[0])
            elif self.algorithm == "td3":
                actions = self.policy.actor(observations)  # its last layer is a tanh
            else:
                policy = self.policy
                features = BaseModel.extract_features(policy, observations, policy.pi_features_extractor)
                actions = policy.action_net(policy.mlp_extractor.forward_actor(features))
                if self.discrete:
                    return actions.argmax(dim=-1)
                if self.squashed:
                    actions = torch.tanh(actions)
            if self.squashed:
                return self.low + 0.5 * (actions + 1.0) * (self.high - self.low)
            return actions

    return Sb3DeterministicPolicy
