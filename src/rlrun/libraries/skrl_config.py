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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
