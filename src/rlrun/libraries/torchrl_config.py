"""The TorchRL adapter's agent configuration: what one iteration is, and the checks made before a run starts.

One `--max_iterations` unit is one collector batch, `steps_per_env` steps of every env. `check_config` refuses
names the adapter cannot turn into objects (activations, the learning-rate schedule) and a PPO minibatch that
does not split that batch, while the run is planned, so a configuration the adapter cannot run changes nothing.
"""

from __future__ import annotations

from typing import Any

from rlrun.errors import InvalidArgument
from rlrun.libraries.torchrl_agent import activation_class
from rlrun.trust.names import Rule

LR_SCHEDULES = ("constant", "linear")
ACTIVATIONS = ("Tanh", "ReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "LeakyReLU", "Sigmoid", "Softplus")
"""The `torch.nn` activation modules an MLP's `activation` may name."""
LOSSES = ("l1", "l2", "smooth_l1")
"""TorchRL's value-loss names (`ClipPPOLoss.loss_critic_type`, `SACLoss.loss_function`)."""
CODE_NAMES: dict[str, Rule] = {
    "actor.activation": ACTIVATIONS,
    "critic.activation": ACTIVATIONS,
    "lr_schedule": LR_SCHEDULES,
    "loss_critic_type": LOSSES,
    "loss_function": LOSSES,
    "target_entropy": ("auto",),
}
"""rlrun's table of the names in the TorchRL adapter's configuration (its `CODE_NAMES`; `rlrun.trust.names`). The
adapter builds every object itself, so these are the only strings that choose one: an activation class of
`torch.nn`, the schedule, the value losses and SAC's automatic target entropy."""


def env_steps_per_iteration(config: dict[str, Any], num_envs: int) -> int:
    """One collector batch: `steps_per_env` steps of every env. Also checks the configuration (see
    `check_config`), so that one the adapter cannot run is refused before anything changes."""
    batch = int(config["steps_per_env"]) * num_envs
    check_config(config, batch)
    return batch


def check_config(config: dict[str, Any], batch: int) -> None:
    """Raise `InvalidArgument` for names the adapter cannot turn into objects and a minibatch that does not
    split PPO's batch."""
    for network in ("actor", "critic"):
        activation = (config.get(network) or {}).get("activation", "Tanh")
        activation_class(f"agent.{network}.activation", activation)
    schedule = config.get("lr_schedule", "constant")
    if schedule not in LR_SCHEDULES:
        raise InvalidArgument(f"agent.lr_schedule {schedule!r} is not one of {', '.join(LR_SCHEDULES)}.")
    if "minibatch_size" in config and "num_epochs" in config:  # PPO
        minibatch = int(config["minibatch_size"])
        if minibatch <= 0 or batch % minibatch:
            fitting = max(size for size in range(1, min(max(minibatch, 1), batch) + 1) if batch % size == 0)
            raise InvalidArgument(
                f"agent.minibatch_size {minibatch} does not split one iteration's batch of {batch} steps "
                f"(steps_per_env x num_envs); pass agent.minibatch_size={fitting} or more --num_envs."
            )
