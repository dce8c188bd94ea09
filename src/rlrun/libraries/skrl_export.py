"""A PyTorch SKRL agent's deterministic policy as a plain `torch.nn.Module`, for rlrun's export.

The module runs what SKRL's `act` runs without sampling: the observation preprocessor, the policy network,
then the mean action (clipped where the model clips its mean) or, for Discrete actions, the most likely one.
The class is built on first use (it subclasses `torch.nn.Module`), so importing this module imports no torch.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def export_class() -> type:
    import torch

    class SkrlDeterministicPolicy(torch.nn.Module):
        """SKRL's `act` without sampling: what rlrun's `play` does with the agent by default."""

        low: torch.Tensor  # registered buffers (where the model clips its mean): tensors, not submodules
        high: torch.Tensor

        def __init__(self, agent: Any, discrete: bool) -> None:
            super().__init__()
            preprocessor = agent._observation_preprocessor
            self.preprocessor = preprocessor if isinstance(preprocessor, torch.nn.Module) else None
            self.policy = agent.policy
            self.discrete = discrete
            self.clip = not discrete and bool(getattr(agent.policy, "_g_clip_mean_actions", False))
            if self.clip:
                self.register_buffer("low", torch.as_tensor(agent.policy._g_min_actions).float())
                self.register_buffer("high", torch.as_tensor(agent.policy._g_max_actions).float())

        def forward(self, observations: Any) -> Any:
            observations = observations.reshape(observations.shape[0], -1)
            if self.preprocessor is not None:
                observations = self.preprocessor(observations)
            output, _ = self.policy.compute({"observations": observations, "states": None}, role="policy")
            if self.discrete:
                return output.argmax(dim=-1)
            return torch.clamp(output, self.low, self.high) if self.clip else output

    return SkrlDeterministicPolicy
