"""rl_games' `params` for one run, from an rlrun agent configuration, checked before a run starts.

`algo.name` and `model.name` `auto` (rlrun's configurations) become the discrete or continuous agent and
model for the task's action space, and only the matching `network.space` entry is kept; the env and device
are filled in. One `--max_iterations` unit is one rl_games epoch, `horizon_length` steps of every env, and
`env_steps_per_iteration` also checks that minibatches (and a recurrent network's sequences) tile it, which
rl_games would only find once it had built the agent.

rl_games looks every name of its configuration up in its own registries (`ObjectFactory`: agents, models,
networks, activations, initialisers; the global ones are guarded by the adapter): nothing in it imports or
evaluates text. `CODE_NAMES` lists the names rlrun allows all the same, so that a name rl_games would refuse
only once the run directory exists (or a registry entry that something else added) is refused while planning.
"""

from __future__ import annotations

import math
from typing import Any

from rlrun.errors import InvalidArgument
from rlrun.libraries.rl_games_env import RlGamesVecEnv
from rlrun.trust.names import Rule

AGENTS = {"Discrete": ("a2c_discrete", "discrete_a2c"), "Box": ("a2c_continuous", "continuous_a2c_logstd")}
"""Action space class -> the rl_games agent (`algo.name`) and model (`model.name`) that `auto` stands for."""
SPACE_KEYS = {"Discrete": "discrete", "Box": "continuous"}
"""Action space class -> the `network.space` entry rl_games builds its policy head from."""
ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "selu", "swish", "gelu", "softplus", "None")
"""rl_games' `activations_factory` names (`None`: no activation)."""
INITIALIZERS = (
    "default",
    "const_initializer",
    "orthogonal_initializer",
    "glorot_normal_initializer",
    "glorot_uniform_initializer",
    "variance_scaling_initializer",
    "random_uniform_initializer",
    "kaiming_normal",
    "orthogonal",
)
"""rl_games' `init_factory` names."""
CODE_NAMES: dict[str, Rule] = {
    "params.algo.name": ("auto", *(agent for agent, _ in AGENTS.values())),
    "params.model.name": ("auto", *(model for _, model in AGENTS.values())),
    "**.network.name": ("actor_critic",),
    "**.rnn.name": ("lstm", "gru"),
    "**.activation": ACTIVATIONS,
    "**.mu_activation": ACTIVATIONS,
    "**.sigma_activation": ACTIVATIONS,
    "**.value_activation": ACTIVATIONS,
    "**.initializer.name": INITIALIZERS,
    "**.mu_init.name": INITIALIZERS,
    "**.sigma_init.name": INITIALIZERS,
    "params.config.lr_schedule": ("adaptive", "linear", "None"),
}
"""rlrun's table of the names in rl_games' `params` that select a class or function (the adapter's `CODE_NAMES`;
`rlrun.trust.names`): the PPO agents and models `AGENTS` maps, the actor-critic network, its RNNs,
activations, initialisers and learning-rate schedules."""


def env_steps_per_iteration(config: dict[str, Any], num_envs: int) -> int:
    """One epoch of rl_games (`max_epochs` counts them) is `horizon_length` steps of every env.

    rlrun calls this before a run starts, so it also checks that the minibatches split that batch
    evenly, which rl_games would only find once it had built the agent.
    """
    settings = config["params"]["config"]
    batch = int(settings["horizon_length"]) * num_envs
    if "minibatch_size" in settings or "minibatch_size_per_env" in settings:
        minibatch = int(settings.get("minibatch_size", num_envs * int(settings.get("minibatch_size_per_env", 0))))
        if minibatch <= 0 or batch % minibatch:
            fitting = max(size for size in range(1, min(max(minibatch, 1), batch) + 1) if batch % size == 0)
            raise InvalidArgument(
                f"agent.params.config.minibatch_size {minibatch} does not split one epoch's batch of "
                f"{batch} steps (horizon_length x num_envs); pass agent.params.config.minibatch_size={fitting} "
                "or more --num_envs."
            )
        if config["params"].get("network", {}).get("rnn"):
            _check_sequences(settings, minibatch)
    return batch


def _check_sequences(settings: dict[str, Any], minibatch: int) -> None:
    """A recurrent network learns from sequences of `seq_length` steps (rl_games' default 4): they must tile
    the rollout and the minibatches, which rl_games checks only once it has built the agent."""
    length = settings.get("seq_length", 4)
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise InvalidArgument(f"agent.params.config.seq_length {length!r} must be a positive integer, e.g. 4.")
    for key, value in (("horizon_length", int(settings["horizon_length"])), ("minibatch_size", minibatch)):
        if value % length:
            raise InvalidArgument(
                f"agent.params.config.{key} {value} is not a multiple of the recurrent network's seq_length "
                f"{length}; pass agent.params.config.seq_length={math.gcd(value, length)} or change {key}."
            )


def runner_params(config: dict[str, Any], vec_env: RlGamesVecEnv, num_envs: int, device: str) -> dict[str, Any]:
    """rl_games' `params` for this env: `auto` agent and model resolved, the env and device filled in."""
    params = config["params"]
    space = type(vec_env.env.single_action_space).__name__
    agent, model = AGENTS[space]
    if params["algo"]["name"] == "auto":
        params["algo"]["name"] = agent
    if params["model"]["name"] == "auto":
        params["model"]["name"] = model
    if params["algo"]["name"] != agent:
        raise InvalidArgument(
            f"agent.params.algo.name {params['algo']['name']!r} is not rl_games' PPO agent for {space} actions "
            f"({agent}); pass agent.params.algo.name=auto or {agent}."
        )
    heads = params["network"].get("space", {})
    params["network"]["space"] = {key: value for key, value in heads.items() if key == SPACE_KEYS[space]}
    params["config"].update(
        env_name="rlrun",
        env_info=vec_env.get_env_info(),
        vec_env=vec_env,
        num_actors=num_envs,
        device=device,
        device_name=device,
    )
    return params
