"""Whether a new configuration value can stand where the default stood: one rule for `agent.`/`env.` overrides
and `--agent_config` files alike.

What a library would reject only later, in the middle of a call, is refused here, before the run directory
exists, in one line that names the key, the value and the default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rlrun.errors import InvalidArgument

RATE_KEY = re.compile(r"(^|_)(learning_rate|lr)$")
"""Keys of learning rates: a rate must be a positive number (every library's optimiser refuses others)."""
COUNT_KEY = re.compile(r"(^|_)(num|n)(_|$)|steps|epochs|rollouts|horizon|batches|batch_size|minibatch")
"""Keys of counts (rollout lengths, epochs, minibatches): where the default is at least 1, so is the value
(the libraries divide by them or build empty batches: a ZeroDivisionError deep in an update otherwise)."""


def check_value(config: Mapping[str, Any], new: Any, key: str, scope: str, origin: str = "override") -> None:
    """Refuse `new` at dotted `key` of `config` when it cannot stand where the default stood: a number or a
    boolean where one stood, a list where a list stood (of integers where integers stood), a mapping where a
    mapping stood, a learning rate that is not positive, a count below 1. `origin` names where the value came
    from: `"override"`, or the file it was read from. Text is no type question here: a string that selects code
    (a class, a scheduler, an activation, a model expression) is held against the library's table while the call
    is planned (`rlrun.trust.names`, from `rlrun.api.resolution.check_code`)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    old: Any = config
    for part in key.split("."):
        if not isinstance(old, Mapping) or part not in old:
            return
        old = old[part]
    if isinstance(new, ListConfig | DictConfig):
        new = OmegaConf.to_container(new, resolve=True)
    shown = f"override '{scope}.{key}={new}'" if origin == "override" else f"{origin}: '{scope}.{key}: {new}'"
    last = key.rsplit(".", 1)[-1]
    numbers = (int, float)
    rate = RATE_KEY.search(last) and isinstance(old, numbers) and not isinstance(old, bool)
    if rate and isinstance(new, numbers) and not isinstance(new, bool) and not new > 0:
        raise InvalidArgument(f"{shown}: a learning rate must be positive (the default is {old!r}).")
    count = COUNT_KEY.search(last) and isinstance(old, int) and not isinstance(old, bool) and old >= 1
    if count and isinstance(new, int) and not isinstance(new, bool) and new < 1:
        raise InvalidArgument(f"{shown}: this count must be at least 1 (the default is {old!r}).")
    if (new is None and origin != "override") or (isinstance(new, str) and new.startswith("lin_")):
        return  # a file may leave an optional value unset; `lin_<start>` is RL Zoo's schedule (the adapter reads it)
    if isinstance(old, list):
        if not isinstance(new, list):
            raise InvalidArgument(f"{shown} expects a list, like the default {old!r}.")

        def integers(values: list[Any]) -> bool:
            return all(isinstance(item, int) and not isinstance(item, bool) for item in values)

        if old and integers(old) and not integers(new):
            raise InvalidArgument(f"{shown} expects a list of integers, like the default {old!r}.")
        return
    if isinstance(old, Mapping):
        if not isinstance(new, Mapping):
            raise InvalidArgument(f"{shown} expects a mapping of keys, like the default {old!r}.")
        return
    if isinstance(old, bool):
        ok, expected = isinstance(new, bool), "true or false"
    elif isinstance(old, int):
        ok, expected = isinstance(new, int) and not isinstance(new, bool), "an integer"
    elif isinstance(old, float):
        ok, expected = isinstance(new, (int, float)) and not isinstance(new, bool), "a number"
    else:
        return
    if not ok:
        raise InvalidArgument(f"{shown} expects {expected} (the default is {old!r}).")
