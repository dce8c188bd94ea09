"""SKRL's runner configuration for one run: what rlrun fills in before SKRL's `Runner` reads it.

The agent configuration is SKRL's runner configuration (`models`, `memory`, `agent`, `trainer`, as in
Isaac Lab's `skrl_*_cfg.yaml`); the algorithm is `agent.class`. rlrun fills in what belongs to the run:
- `seed` (the call's seed, passed to SKRL's `set_seed`);
- `trainer.timesteps`: `--max_iterations` times the timesteps of one iteration, which is `agent.rollouts`
  for on-policy agents (PPO; Isaac Lab's mapping) and one timestep (one step of every env, then
  `agent.gradient_steps` updates) for off-policy agents without rollouts (SAC);
- `trainer.close_environment_at_exit: false` (SKRL would register one `atexit` hook per call holding
  the env) and `agent.experiment.directory` / `experiment_name`, so that SKRL's experiment directory
  is the run directory (never `./runs` in the cwd); checkpoints are always one file each
  (`store_separately: false`).
A Gaussian policy in a configuration (the generic `default.yaml`) becomes a categorical one with the
same network on a Discrete action space.

SKRL reads strings of its configuration as code: its `Runner` `eval`s the scheduler, preprocessor and noise
names (`RESOURCES`, at any depth) and its model instantiators `exec` source written from each model's `class`,
`output`, `reduction` and networks (`name`, `input`, `layers`, `activations`). `CODE_NAMES` and `CODE_SOURCE`
are rlrun's tables for all of them (`rlrun.trust.names`): planning refuses anything else, and `hand_over` gives
SKRL's `Runner` the classes the resource names stand for (no text left for it to `eval`) and the model
expressions as rlrun renders them from its own parse. The `Runner` builds models from text only, so the
expressions stay text: rlrun's rendering of a tree its parser accepted, never the file's bytes.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from rlrun.trust.names import Expression, Identifier, Rule, canonical

ACTIVATIONS = ("elu", "leaky_relu", "relu", "selu", "sigmoid", "softmax", "softplus", "softsign", "tanh")
"""The activations SKRL's model instantiators know (`_get_activation_function`), as they spell them."""
UNITS = ("ONE", "NUM_OBSERVATIONS", "NUM_STATES", "NUM_ACTIONS", "OBSERVATIONS", "STATES", "ACTIONS")
"""The tokens a linear layer's size may be (SKRL's `get_num_units`)."""
MODEL_OUTPUT = Expression(
    "an SKRL model output",
    "ACTIONS, ONE, tanh(ACTIONS) or 2 * tanh(ACTIONS)",
    tokens=("ACTIONS", "ONE"),
    functions={"concatenate": "values", **dict.fromkeys(ACTIVATIONS, "value")},
    single_token=True,
)
"""A model's `output`: its token (the output layer), activations and arithmetic on it."""
NETWORK_INPUT = Expression(
    "an SKRL network input",
    "OBSERVATIONS, concatenate([OBSERVATIONS, ACTIONS]) or another network's name",
    tokens=("OBSERVATIONS", "STATES", "ACTIONS"),
    functions={"concatenate": "values", "permute": "axes"},
    sibling_key="name",
)
"""A network's `input`: the observations, states and taken actions, the model's networks, joined or permuted."""
NETWORK_NAME = Identifier(
    reserved=("self", "inputs", "role", "observations", "states", "taken_actions", "output", "torch", "nn", "jnp")
)
"""A network's `name`, a variable of the generated source: none of the names that source already uses."""
RESOURCES = {
    "learning_rate_scheduler": ("schedulers", ("KLAdaptiveLR",)),
    "observation_preprocessor": ("preprocessors", ("RunningStandardScaler",)),
    "state_preprocessor": ("preprocessors", ("RunningStandardScaler",)),
    "value_preprocessor": ("preprocessors", ("RunningStandardScaler",)),
    "amp_observation_preprocessor": ("preprocessors", ("RunningStandardScaler",)),
    "exploration_noise": ("noises", ("GaussianNoise", "OrnsteinUhlenbeckNoise")),
    "smooth_regularization_noise": ("noises", ("GaussianNoise", "OrnsteinUhlenbeckNoise")),
}
"""The keys whose strings SKRL's `Runner` `eval`s, wherever they stand: the `skrl.resources` package of the
class each names, and the names rlrun allows."""
CODE_NAMES: dict[str, Rule] = {
    "models.*.class": ("GaussianMixin", "CategoricalMixin", "DeterministicMixin"),
    "models.*.reduction": ("mean", "sum", "prod", "none"),
    "models.*.output": MODEL_OUTPUT,
    "models.*.network.*.name": NETWORK_NAME,
    "models.*.network.*.input": NETWORK_INPUT,
    "models.*.network.*.activations": ACTIVATIONS,
    "models.*.network.*.activations.*": ACTIVATIONS,
    "models.*.network.*.layers.*": ("flatten",),
    "models.*.network.*.layers.*.linear.*": UNITS,
    "models.*.network.*.layers.*.conv2d.padding": ("same", "valid"),
    "agent.class": ("PPO", "SAC"),
    "memory.class": ("RandomMemory",),
    "trainer.class": ("SequentialTrainer",),
    **{f"**.{key}": names for key, (_, names) in RESOURCES.items()},
    "**.exploration_scheduler": (),
    "**.class": (),
}
"""rlrun's table of SKRL's code-selecting keys (the adapter's `CODE_NAMES`): the first matching pattern rules."""
CODE_SOURCE = ("models",)
"""The section SKRL's model instantiators write into the source they `exec`."""


def timesteps_per_iteration(config: dict[str, Any]) -> int:
    """Vector-env steps in one `--max_iterations` unit: `agent.rollouts`, or 1 for agents without rollouts."""
    return int(config.get("agent", {}).get("rollouts", 1))


def runner_config(
    config: dict[str, Any], *, seed: int, timesteps: int, run_dir: Path, action_space: Any
) -> dict[str, Any]:
    """Fill in what belongs to the run (see the module docstring); `config` is consumed."""
    config["seed"] = seed
    config.setdefault("trainer", {}).update(timesteps=timesteps, close_environment_at_exit=False)
    experiment = config.setdefault("agent", {}).setdefault("experiment", {}) or {}
    experiment.update(directory=str(run_dir.parent), experiment_name=run_dir.name, store_separately=False)
    config["agent"]["experiment"] = experiment
    _categorical_policy_for_discrete_actions(config, action_space)
    return config


GAUSSIAN_ONLY = (
    "clip_actions",
    "clip_mean_actions",
    "clip_log_std",
    "min_log_std",
    "max_log_std",
    "reduction",
    "initial_log_std",
    "fixed_log_std",
)
"""Parameters of SKRL's `gaussian_model` that its `categorical_model` does not take."""


def _categorical_policy_for_discrete_actions(config: dict[str, Any], action_space: Any) -> None:
    policy = config.get("models", {}).get("policy")
    discrete = type(action_space).__name__ == "Discrete"
    if discrete and isinstance(policy, dict) and str(policy.get("class", "")).lower() == "gaussianmixin":
        kept = {key: value for key, value in policy.items() if key not in GAUSSIAN_ONLY}
        config["models"]["policy"] = {**kept, "class": "CategoricalMixin", "unnormalized_log_prob": True}


def hand_over(config: dict[str, Any], framework: str) -> dict[str, Any]:
    """The configuration SKRL's `Runner` gets: checked against `CODE_NAMES` and with every model expression in
    rlrun's rendering (`rlrun.trust.names.canonical`), and each name of `RESOURCES` replaced by the class it
    names in SKRL's `skrl.resources.<package>.<framework>`, so that the `Runner` evaluates no text."""
    handed: dict[str, Any] = canonical(config, CODE_NAMES, CODE_SOURCE, library="SKRL", import_paths=False)

    def classes(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in RESOURCES and isinstance(value, str):
                    package = importlib.import_module(f"skrl.resources.{RESOURCES[key][0]}.{framework}")
                    node[key] = getattr(package, value)
                else:
                    classes(value)
        elif isinstance(node, list):
            for item in node:
                classes(item)

    classes(handed)
    return handed
