"""Configurations that fit the request: a minibatch sized for the number of environments asked for.

A shipped configuration is tuned at its own `num_envs` (rl_games' at 4,096 for some tasks, SB3's PPO with a
batch of 64 over 16 envs). With another `--num_envs`, its minibatch may no longer split the rollout: rl_games
and TorchRL refuse it, SB3 warns (and fails under `warnings.simplefilter("error")`). So, unless the user set the
minibatch (an `agent.` override, an `--agent_config` file or a run's own configuration), rlrun keeps the number
of minibatches the configuration had at its own `num_envs` and sizes each to split the new rollout: the largest
divisor of the rollout at or below `rollout // minibatches`. What it changed is returned, for run.json and
the run's params header.

The adapter names its minibatch key per algorithm in `MINIBATCH_KEYS` (`rlrun.libraries.base.minibatch_keys`),
which planning hands over with the adapter's rollout size; a library that counts minibatches instead of sizing
them (RSL-RL, SKRL) needs nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from rlrun.configs.loading import library_config
from rlrun.trust.limits import whole_number

FITTED_SOURCES = ("rlrun", "rl_zoo3")
"""Configurations rlrun may fit: its own and RL Zoo's. A file or a run's configuration is the user's word."""


def fit_minibatch(
    agent: dict[str, Any],
    *,
    key: str | None,
    num_envs: int,
    source: str | None,
    overrides: tuple[str, ...],
    steps: Callable[[dict[str, Any], int], int],
    minimum: int = 1,
) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """`agent` with the minibatch at `key` (dotted, in the library's configuration) sized for `num_envs`, and
    `{key: {"from": old, "to": new}}` when it changed. `steps(library_config, num_envs)` is the rollout's env
    steps (the adapter's `env_steps_per_iteration`, called here without its checks raising: a configuration it
    refuses is left for planning to refuse). `minimum`: the smallest minibatch the library takes."""
    if key is None or source not in FITTED_SOURCES or any(word.startswith(f"agent.{key}=") for word in overrides):
        return agent, {}
    library = library_config(agent)
    old = _get(library, key)
    own_envs = agent.get("num_envs")
    if (
        not whole_number(old, 1)
        or not whole_number(own_envs, 1)
        or (own_envs == num_envs and _fits(library, steps, num_envs, old))
    ):
        return agent, {}
    try:
        # With a minibatch of 1, which splits anything, the adapter measures the rollout without refusing it.
        own_rollout, rollout = (steps(_set(library, key, 1), envs) for envs in (own_envs, num_envs))
    except Exception:  # a configuration the adapter cannot read: planning says why, in one line
        return agent, {}
    minibatches = max(1, own_rollout // old)
    target = max(minimum, rollout // minibatches)
    new = max((size for size in range(minimum, min(target, rollout) + 1) if rollout % size == 0), default=rollout)
    if new == old:
        return agent, {}
    return _set(agent, key, new), {key: {"from": old, "to": new}}


def _fits(library: dict[str, Any], steps: Callable[[dict[str, Any], int], int], num_envs: int, size: int) -> bool:
    try:
        rollout = steps(library, num_envs)
    except Exception:
        return False
    return size <= rollout and rollout % size == 0


def _get(config: dict[str, Any], key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _set(config: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of `config` with the dotted `key` set to `value`."""
    result = copy.deepcopy(config)
    node = result
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return result
