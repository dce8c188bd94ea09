"""The TorchRL modules of one agent, built from its configuration: actor, loss module, optimiser, checkpoint.

PPO's actor is a Gaussian (Box) or categorical (Discrete) `ProbabilisticActor` with a `ClipPPOLoss`, SAC's a
tanh-Gaussian with a `SACLoss`; networks are TorchRL `MLP`s whose activation is named in the configuration.
A checkpoint is a plain dict of tensors and numbers in the format `CHECKPOINT_FORMAT`, read once and loaded
with `torch.load(weights_only=True)` (`rlrun.trust.checkpoints`); what was checked is what the loss module and
optimiser load. TorchRL and torch are imported inside the functions only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlrun.errors import CorruptCheckpoint, InvalidArgument, UnsupportedTask
from rlrun.libraries.base import require_count, require_keys
from rlrun.trust.checkpoints import read_weights

if TYPE_CHECKING:
    from gymnasium.spaces import Box, Discrete

    from rlrun.envs import TorchVectorEnv

CHECKPOINT_KEYS = ("format", "algorithm", "iteration", "loss_module", "optimizer")
CHECKPOINT_FORMAT = "rlrun-torchrl-1"
SAVED_ALGORITHMS = ("ppo", "sac")
"""The algorithms whose agents a checkpoint may hold."""


def activation_class(key: str, name: str) -> type:
    """The `torch.nn` module class called `name`; an unknown name is refused in one line naming `key`."""
    import torch

    activation = getattr(torch.nn, str(name), None)
    if not (isinstance(activation, type) and issubclass(activation, torch.nn.Module)):
        raise InvalidArgument(f"{key} {name!r} is not a torch.nn module; use e.g. Tanh, ReLU or ELU.")
    return activation


def _mlp(inputs: int, outputs: int, settings: dict[str, Any], key: str) -> Any:
    from torchrl.modules import MLP

    return MLP(
        in_features=inputs,
        out_features=outputs,
        num_cells=list(settings.get("hidden", [64, 64])),
        activation_class=activation_class(f"agent.{key}.activation", settings.get("activation", "Tanh")),
    )


class Agent:
    """The TorchRL modules of one agent: the actor (a `ProbabilisticActor`), the loss module (which holds
    the actor, the critic or Q networks and, for SAC, targets and temperature) and its optimiser."""

    def __init__(self, algorithm: str, env: TorchVectorEnv, config: dict[str, Any], device: str) -> None:
        import torch

        self.algorithm = algorithm
        self.config = config
        self.discrete = type(env.single_action_space).__name__ == "Discrete"
        self.observations = int(torch.tensor(env.single_observation_space.shape).prod().item())
        space = env.single_action_space
        if self.discrete:
            self.actions = int(cast("Discrete", space).n)
        else:
            box = cast("Box", space)
            self.actions = int(torch.tensor(box.shape).prod().item())
            self.low = torch.as_tensor(box.low, dtype=torch.float32, device=device)
            self.high = torch.as_tensor(box.high, dtype=torch.float32, device=device)
        self.actor = (self._ppo_actor() if algorithm == "ppo" else self._sac_actor()).to(device)
        self.loss = (self._ppo_loss() if algorithm == "ppo" else self._sac_loss()).to(device)
        self.optimizer = torch.optim.Adam(self._parameter_groups(), lr=float(config.get("learning_rate", 3e-4)))

    def _ppo_actor(self) -> Any:
        import torch
        from tensordict.nn import AddStateIndependentNormalScale, TensorDictModule
        from torchrl.modules import ProbabilisticActor

        settings = self.config.get("actor") or {}
        if self.discrete:
            net = TensorDictModule(
                _mlp(self.observations, self.actions, settings, "actor"), in_keys=["observation"], out_keys=["logits"]
            )
            return ProbabilisticActor(
                net,
                in_keys=["logits"],
                distribution_class=torch.distributions.Categorical,
                return_log_prob=True,
            )
        scale = AddStateIndependentNormalScale(
            self.actions, scale_mapping="exp", init_value=float(settings.get("init_log_std", 0.0))
        )
        net = TensorDictModule(
            torch.nn.Sequential(_mlp(self.observations, self.actions, settings, "actor"), scale),
            in_keys=["observation"],
            out_keys=["loc", "scale"],
        )
        return ProbabilisticActor(
            net,
            in_keys=["loc", "scale"],
            distribution_class=torch.distributions.Normal,
            return_log_prob=True,
        )

    def _sac_actor(self) -> Any:
        import torch
        from tensordict.nn import NormalParamExtractor, TensorDictModule
        from torchrl.modules import ProbabilisticActor, TanhNormal

        settings = self.config.get("actor") or {}
        net = TensorDictModule(
            torch.nn.Sequential(
                _mlp(self.observations, 2 * self.actions, settings, "actor"),
                NormalParamExtractor(scale_mapping="biased_softplus_1.0", scale_lb=1e-4),
            ),
            in_keys=["observation"],
            out_keys=["loc", "scale"],
        )
        return ProbabilisticActor(
            net,
            in_keys=["loc", "scale"],
            distribution_class=TanhNormal,
            distribution_kwargs={"low": self.low, "high": self.high},
            return_log_prob=False,
        )

    def _ppo_loss(self) -> Any:
        from torchrl.modules import ValueOperator
        from torchrl.objectives import ClipPPOLoss

        config = self.config
        critic = ValueOperator(
            _mlp(self.observations, 1, config.get("critic") or {}, "critic"), in_keys=["observation"]
        )
        return ClipPPOLoss(
            actor_network=self.actor,
            critic_network=critic,
            clip_epsilon=float(config.get("clip_epsilon", 0.2)),
            entropy_bonus=float(config.get("entropy_coef", 0.0)) > 0,
            entropy_coeff=float(config.get("entropy_coef", 0.0)),
            critic_coeff=float(config.get("critic_coef", 0.5)),
            loss_critic_type=str(config.get("loss_critic_type", "l2")),
            normalize_advantage=bool(config.get("normalize_advantage", True)),
        )

    def _sac_loss(self) -> Any:
        from torchrl.modules import ValueOperator
        from torchrl.objectives import SACLoss

        config = self.config
        qvalue = ValueOperator(
            _mlp(self.observations + self.actions, 1, config.get("critic") or {}, "critic"),
            in_keys=["observation", "action"],
        )
        target_entropy = config.get("target_entropy", "auto")
        loss = SACLoss(
            actor_network=self.actor,
            qvalue_network=qvalue,
            num_qvalue_nets=2,
            loss_function=str(config.get("loss_function", "l2")),
            alpha_init=float(config.get("alpha_init", 1.0)),
            target_entropy=target_entropy if target_entropy == "auto" else float(target_entropy),
            action_spec=self._action_spec(),
            delay_qvalue=True,
        )
        loss.make_value_estimator(gamma=float(config.get("gamma", 0.99)))
        return loss

    def _action_spec(self) -> Any:
        from torchrl.data import Bounded

        return Bounded(low=self.low.cpu(), high=self.high.cpu(), shape=self.low.shape)

    def network(self) -> Any:
        """The actor's MLP (logits, the Gaussian's mean, or the tanh-Gaussian's mean and scale parameters)."""
        module = self.actor.module[0].module  # the ProbabilisticActor's TensorDictModule, and what it wraps
        return module if self.discrete else module[0]  # Box: the MLP, before the scale module

    def _parameter_groups(self) -> list[dict[str, Any]]:
        """The trained parameters: actor, then critic or Q networks, then SAC's temperature (not the targets)."""
        loss = self.loss
        groups = [{"params": list(loss.actor_network_params.values(True, True))}]
        if self.algorithm == "ppo":
            groups.append({"params": list(loss.critic_network_params.values(True, True))})
        else:
            groups.append({"params": list(loss.qvalue_network_params.values(True, True))})
            groups.append({"params": [loss.log_alpha]})
        return groups

    def state(self, iteration: int, optim_steps: int) -> dict[str, Any]:
        """The checkpoint's contents: tensors, numbers and strings only."""
        return {
            "format": CHECKPOINT_FORMAT,
            "algorithm": self.algorithm,
            "iteration": iteration,
            "optim_steps": optim_steps,
            "loss_module": {key: value.detach().cpu() for key, value in self.loss.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
        }

    def load(self, path: Path, device: str, *, optimizer: bool) -> dict[str, Any]:
        """Load a checkpoint's weights (and optimiser state); return the checkpoint."""
        state = read_checkpoint(path)
        if state["algorithm"] != self.algorithm:
            raise InvalidArgument(
                f"checkpoint {str(path)!r} holds a TorchRL {state['algorithm'].upper()} agent, not "
                f"{self.algorithm.upper()}; pass --algorithm {state['algorithm']}."
            )
        try:
            self.loss.load_state_dict({key: value.to(device) for key, value in state["loss_module"].items()})
            if optimizer:
                self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as error:  # another task's or network's shapes
            reason = " ".join(str(error).split())[:300]
            raise UnsupportedTask(
                f"checkpoint {str(path)!r} does not fit this task or configuration ({reason}); "
                "pass the --task and agent settings it was trained with, or another checkpoint."
            ) from None
        return state


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint at `path`, read once and loaded with `weights_only=True`, its fields checked."""
    import torch

    what = "an rlrun TorchRL checkpoint"
    state = read_weights(path, "a TorchRL checkpoint")
    require_keys(path, state, CHECKPOINT_KEYS, what)
    require_count(path, state, "iteration", what)
    if "optim_steps" in state:
        require_count(path, state, "optim_steps", what)
    modules = state["loss_module"]
    if state["algorithm"] not in SAVED_ALGORITHMS or not (
        isinstance(modules, dict) and all(isinstance(value, torch.Tensor) for value in modules.values())
    ):
        raise CorruptCheckpoint(
            f"checkpoint {str(path)!r} is not {what} (its algorithm is not one of {', '.join(SAVED_ALGORITHMS)}, "
            "or its loss_module is not a mapping of tensors)."
        )
    return state
