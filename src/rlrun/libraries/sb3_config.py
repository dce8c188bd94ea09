"""Stable-Baselines3's algorithm constructors from an rlrun agent configuration, checked before a run starts.

The configuration is the algorithm's constructor keywords, plus the adapter's own keys `policy` (`MlpPolicy`),
`save_interval` (iterations between checkpoints), `clip_reward` (the agent learns from each reward's sign, as SB3's
`AtariWrapper` clips them; returns stay the env's own) and, for SAC and TD3, `noise_type` (`normal`,
`ornstein-uhlenbeck` or null) and `noise_std`, as in RL Zoo. `policy_kwargs.activation_fn` names a `torch.nn`
module (`Tanh`, `ReLU`, ...); `learning_rate`, `clip_range` and `clip_range_vf` may be RL Zoo's linear
schedules (`lin_1e-3`). `check_config` refuses names it cannot turn into objects while the run is planned;
`constructor_kwargs` turns them into objects when it starts. SB3 and torch are imported inside the functions.
"""

from __future__ import annotations

import functools
from typing import Any

from rlrun.configs import RUN_KEYS
from rlrun.errors import InvalidArgument, did_you_mean
from rlrun.trust.names import Rule

CLASS_NAMES = {"ppo": "PPO", "a2c": "A2C", "sac": "SAC", "td3": "TD3"}
ADAPTER_KEYS = ("policy", "save_interval", "noise_type", "noise_std", "clip_reward")
"""Configuration keys the adapter consumes; every other key is a keyword of the algorithm's constructor."""
SCHEDULED_KEYS = ("learning_rate", "clip_range", "clip_range_vf")
"""Constructor keywords that may be RL Zoo's linear schedules (`lin_1e-3`) as well as numbers."""
ACTIVATIONS = (
    "Tanh",
    "ReLU",
    "ELU",
    "SELU",
    "CELU",
    "GELU",
    "SiLU",
    "Mish",
    "LeakyReLU",
    "Sigmoid",
    "Softplus",
    "Hardtanh",
    "Hardswish",
)
"""The `torch.nn` activation modules `policy_kwargs.activation_fn` may name (RL Zoo's among them)."""
CODE_NAMES: dict[str, Rule] = {
    "policy": ("MlpPolicy", "CnnPolicy", "MultiInputPolicy"),
    "policy_kwargs.activation_fn": ACTIVATIONS,
    "noise_type": ("normal", "ornstein-uhlenbeck", "none"),
}
"""rlrun's table of the names in an SB3 configuration (the adapter's `CODE_NAMES`; `rlrun.trust.names`): SB3's
policy aliases (RL Zoo's entries name all three), the activation class, the exploration noise. Every other class
SB3 takes (a features extractor, an optimiser, a replay buffer) cannot be named in a configuration: a string
there is no class, and one that reads as an import path is refused."""


def env_steps_per_iteration(config: dict[str, Any], num_envs: int) -> int:
    """On-policy configurations (`n_steps`): one rollout; off-policy ones (`train_freq`): one training cycle.

    rlrun calls this before a run starts, so it also checks the names in the configuration (see
    `check_config`): a configuration the adapter cannot read is refused before anything changes.
    """
    check_config(config)
    if "n_steps" in config:
        return int(config["n_steps"]) * num_envs
    return _train_freq_steps(config.get("train_freq", 1)) * num_envs


def check_config(config: dict[str, Any]) -> None:
    """Raise `InvalidArgument` for a name the adapter cannot turn into an object (activation, schedule, noise),
    or a key that is neither the adapter's nor a keyword of SB3's algorithms (an `--agent_config` may add keys)."""
    known = (*ADAPTER_KEYS, *RUN_KEYS)
    unknown = [key for key in config if key not in known and key not in _constructor_keywords()]
    if unknown:
        close = did_you_mean(unknown[0], [*ADAPTER_KEYS, *_constructor_keywords()], listing=0)
        algorithms = ", ".join(CLASS_NAMES.values())
        raise InvalidArgument(
            f"agent.{unknown[0]} is not a keyword of SB3's {algorithms} nor an rlrun sb3 key.{close} "
            "Remove it from the agent configuration."
        )
    activation = (config.get("policy_kwargs") or {}).get("activation_fn")
    if isinstance(activation, str):
        _activation(activation)
    for key in SCHEDULED_KEYS:
        if isinstance(config.get(key), str):
            _schedule_start(key, config[key])
    _noise_class(config.get("noise_type"))


@functools.cache
def _constructor_keywords() -> frozenset[str]:
    """The keywords SB3's algorithm constructors take (any of them: the configuration does not name its algorithm)."""
    import inspect

    import stable_baselines3

    names: set[str] = set()
    for name in CLASS_NAMES.values():
        names.update(inspect.signature(getattr(stable_baselines3, name)).parameters)
    return frozenset(names - {"self", "env", "seed", "device", "_init_setup_model"})


def _train_freq_steps(train_freq: Any) -> int:
    """The steps per env of an SB3 `train_freq` (an integer or `[n, "step"]`); episodes cannot be counted ahead."""
    if isinstance(train_freq, (list, tuple)) and len(train_freq) == 2 and train_freq[1] == "step":
        train_freq = train_freq[0]
    if isinstance(train_freq, bool) or not isinstance(train_freq, int) or train_freq < 1:
        raise InvalidArgument(
            f"agent.train_freq {train_freq!r} is not a number of steps: rlrun counts iterations in train_freq "
            "cycles of a fixed length, so pass a positive integer (steps per env), e.g. agent.train_freq=1."
        )
    return train_freq


def algorithm_class(algorithm: str) -> Any:
    """SB3's class for `algorithm` (a key of `CLASS_NAMES`)."""
    import stable_baselines3

    return getattr(stable_baselines3, CLASS_NAMES[algorithm])


def constructor_kwargs(config: dict[str, Any], algorithm: str, action_space: Any) -> dict[str, Any]:
    """The algorithm's constructor keywords: the configuration less the adapter's keys, names made objects."""
    kwargs = {key: value for key, value in config.items() if key not in ADAPTER_KEYS}
    policy_kwargs = dict(kwargs.get("policy_kwargs") or {})
    if isinstance(policy_kwargs.get("activation_fn"), str):
        policy_kwargs["activation_fn"] = _activation(policy_kwargs["activation_fn"])
    if policy_kwargs:
        kwargs["policy_kwargs"] = policy_kwargs
    for key in SCHEDULED_KEYS:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = _scheduled(key, kwargs[key])
    if isinstance(kwargs.get("train_freq"), list):
        kwargs["train_freq"] = tuple(kwargs["train_freq"])
    if algorithm not in ("ppo", "a2c"):
        kwargs["action_noise"] = _action_noise(config.get("noise_type"), config.get("noise_std", 0.1), action_space)
    return kwargs


def _scheduled(key: str, value: str) -> Any:
    """RL Zoo's `lin_<start>` (from `start` down to 0 over the training), or a number written as text (`3e-4`)."""
    from stable_baselines3.common.utils import LinearSchedule

    start = _schedule_start(key, value)
    return LinearSchedule(start, 0.0, 1.0) if value.startswith("lin_") else start


def _schedule_start(key: str, value: str) -> float:
    try:
        return float(value.removeprefix("lin_"))
    except ValueError:
        raise InvalidArgument(
            f"agent.{key} {value!r} is neither a number nor a linear schedule such as 'lin_1e-3'."
        ) from None


def _activation(name: str) -> type:
    import torch

    activation = getattr(torch.nn, name, None)
    if not (isinstance(activation, type) and issubclass(activation, torch.nn.Module)):
        raise InvalidArgument(
            f"agent.policy_kwargs.activation_fn {name!r} is not a torch.nn module; use e.g. Tanh, ReLU or ELU."
        )
    return activation


def _action_noise(kind: str | None, std: float, action_space: Any) -> Any:
    import numpy as np

    noise = _noise_class(kind)
    if noise is None:
        return None
    return noise(mean=np.zeros(action_space.shape), sigma=float(std) * np.ones(action_space.shape))


def _noise_class(kind: str | None) -> Any:
    """SB3's action noise class for RL Zoo's `noise_type` (None for no noise)."""
    if kind is None or kind == "none":
        return None
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    noises = {"normal": NormalActionNoise, "ornstein-uhlenbeck": OrnsteinUhlenbeckActionNoise}
    if kind not in noises:
        raise InvalidArgument(f"agent.noise_type {kind!r} is not one of normal, ornstein-uhlenbeck or none.")
    return noises[kind]
