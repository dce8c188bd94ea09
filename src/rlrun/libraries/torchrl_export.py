"""A TorchRL agent's deterministic actor as a plain `torch.nn.Module`, for rlrun's export.

The module computes what the actor computes under `ExplorationType.DETERMINISTIC`: the MLP, then the
Gaussian's mean (PPO), the tanh-Gaussian's mean scaled to the bounds (SAC) or the most likely category
(Discrete). The class is built on each call (it subclasses `torch.nn.Module`), so importing this module
imports no torch.
"""

from __future__ import annotations

from rlrun.libraries.torchrl_agent import Agent


def export_class() -> type:
    import torch

    class TorchRLDeterministicPolicy(torch.nn.Module):
        """Observations in, actions out, as the actor under `ExplorationType.DETERMINISTIC` computes them."""

        low: torch.Tensor  # registered buffers (for Box actions): tensors, not submodules
        high: torch.Tensor

        def __init__(self, agent: Agent) -> None:
            super().__init__()
            self.mlp = agent.network()
            self.discrete = agent.discrete
            self.squashed = agent.algorithm == "sac"
            self.actions = agent.actions
            if not self.discrete:
                self.register_buffer("low", agent.low.detach().cpu().clone())
                self.register_buffer("high", agent.high.detach().cpu().clone())

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            output = self.mlp(observations)
            if self.discrete:
                return output.argmax(dim=-1)
            if not self.squashed:
                return output
            loc = output[..., : self.actions]
            return self.low + (torch.tanh(loc) + 1.0) * 0.5 * (self.high - self.low)

    return TorchRLDeterministicPolicy
