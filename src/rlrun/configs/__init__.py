"""Per-library, per-task agent configurations (YAML) and `agent.*=` / `env.*=` override merging.

Agent configurations live in `configs/<library>/<algorithm>/<namespace>/<Task-vN>.yaml` for tuned
tasks and `configs/<library>/<algorithm>/default.yaml` for any other task. Besides the library's own keys, each holds
rlrun's run defaults at the top level (`num_envs`, `max_iterations`, `seed`), which the library
adapter removes before the library sees the configuration. Overrides are OmegaConf dotlists in
struct mode: a key the configuration lacks is an error that names the nearest valid key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from rlrun.errors import InvalidArgument, UnknownConfigKey

OVERRIDE_SCOPES = ("agent", "env")
RUN_KEYS = ("num_envs", "max_iterations", "seed")
"""Top-level keys of an agent configuration that belong to rlrun, not to the library."""


def library_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The library's own part of an agent configuration: a deep copy without rlrun's `RUN_KEYS`."""
    import copy

    return {key: copy.deepcopy(value) for key, value in config.items() if key not in RUN_KEYS}


def config_name(library: str, algorithm: str, task: str) -> str:
    """The packaged file holding the tuned configuration of `library`'s `algorithm` for `task`."""
    return f"{library}/{algorithm}/{task}.yaml"


def has_tuned_config(library: str, algorithm: str, task: str) -> bool:
    """True when rlrun ships a configuration tuned for this library, algorithm and task."""
    return resources.files(__name__).joinpath(config_name(library, algorithm, task)).is_file()


def load_agent_config(library: str, algorithm: str, task: str) -> dict[str, Any]:
    """Return the tuned configuration for the task, or the algorithm's generic `default.yaml`."""
    import yaml

    root = resources.files(__name__)
    path = root.joinpath(config_name(library, algorithm, task))
    if not path.is_file():
        path = root.joinpath(f"{library}/{algorithm}/default.yaml")
    with path.open("r", encoding="utf-8") as stream:
        return yaml.safe_load(stream)


def split_overrides(overrides: Iterable[str]) -> dict[str, list[str]]:
    """Sort `scope.key=value` words by scope; anything else is rejected with the expected form."""
    scoped: dict[str, list[str]] = {scope: [] for scope in OVERRIDE_SCOPES}
    for word in overrides:
        scope, _, rest = word.partition(".")
        if scope not in scoped or "=" not in rest or not rest.split("=", 1)[0]:
            raise InvalidArgument(
                f"override {word!r} is not of the form agent.<key>=<value> or env.<key>=<value> "
                "(for example agent.algorithm.learning_rate=3e-4 or env.max_episode_steps=200)."
            )
        scoped[scope].append(rest)
    return scoped


def apply_overrides(config: Mapping[str, Any], dotlist: list[str], *, scope: str) -> dict[str, Any]:
    """Return `config` with OmegaConf dotlist overrides applied; unknown keys raise `UnknownConfigKey`."""
    if not dotlist:
        return _plain(config)
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    base = OmegaConf.create(dict(config))
    OmegaConf.set_struct(base, True)
    for item in dotlist:
        key = item.split("=", 1)[0]
        try:
            base = OmegaConf.merge(base, OmegaConf.from_dotlist([item]))
        except ConfigKeyError:
            valid = _dotted_keys(config)
            close = (
                difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
                or [candidate for candidate in valid if candidate.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]][:1]
            )
            hint = f" Did you mean '{scope}.{close[0]}'?" if close else ""
            raise UnknownConfigKey(f"unknown {scope} configuration key '{scope}.{key}'.{hint}") from None
        except OmegaConfBaseException as error:
            message = str(error).splitlines()[0]
            raise InvalidArgument(f"cannot apply override '{scope}.{item}': {message}") from None
        except yaml.YAMLError as error:  # OmegaConf parses each value as YAML: `[16,` is not a list
            reason = " ".join(str(getattr(error, "problem", None) or error).split())
            raise InvalidArgument(
                f"override '{scope}.{item}' is not a YAML value ({reason}); quote or complete it, e.g. [64, 64]."
            ) from None
        _check_type(config, OmegaConf.select(base, key), key, scope)
    return OmegaConf.to_container(base, resolve=True)  # type: ignore[return-value]


RATE_KEY = re.compile(r"(^|_)(learning_rate|lr)$")
"""Keys of learning rates: a rate must be a positive number (every library's optimiser refuses others)."""
COUNT_KEY = re.compile(r"(^|_)(num|n)(_|$)|steps|epochs|rollouts|horizon|batches|batch_size|minibatch")
"""Keys of counts (rollout lengths, epochs, minibatches): where the default is at least 1, so is the value
(the libraries divide by them or build empty batches: a ZeroDivisionError deep in an update otherwise)."""


def _check_type(config: Mapping[str, Any], new: Any, key: str, scope: str) -> None:
    """Refuse an override whose value cannot stand where the default stood: a number or a boolean where
    one stood, a list where a list stood (of integers where integers stood), a mapping where a mapping
    stood, and a learning rate that is not positive. What the library would reject only later, in the
    middle of a call, is caught here, before the run directory exists."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    old: Any = config
    for part in key.split("."):
        if not isinstance(old, Mapping) or part not in old:
            return
        old = old[part]
    if isinstance(new, ListConfig | DictConfig):
        new = OmegaConf.to_container(new, resolve=True)
    shown = f"'{scope}.{key}={new}'"
    last = key.rsplit(".", 1)[-1]
    numbers = (int, float)
    rate = RATE_KEY.search(last) and isinstance(old, numbers) and not isinstance(old, bool)
    if rate and isinstance(new, numbers) and not isinstance(new, bool) and not new > 0:
        raise InvalidArgument(f"override {shown}: a learning rate must be positive (the default is {old!r}).")
    count = COUNT_KEY.search(last) and isinstance(old, int) and not isinstance(old, bool) and old >= 1
    if count and isinstance(new, int) and not isinstance(new, bool) and new < 1:
        raise InvalidArgument(f"override {shown}: this count must be at least 1 (the default is {old!r}).")
    if isinstance(old, list):
        if not isinstance(new, list):
            raise InvalidArgument(f"override {shown} expects a list, like the default {old!r}.")

        def integers(values: list[Any]) -> bool:
            return all(isinstance(item, int) and not isinstance(item, bool) for item in values)

        if old and integers(old) and not integers(new):
            raise InvalidArgument(f"override {shown} expects a list of integers, like the default {old!r}.")
        return
    if isinstance(old, Mapping):
        if not isinstance(new, Mapping):
            raise InvalidArgument(f"override {shown} expects a mapping of keys, like the default {old!r}.")
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
        raise InvalidArgument(f"override '{scope}.{key}={new}' expects {expected} (the default is {old!r}).")


def to_yaml(config: Mapping[str, Any]) -> str:
    """Render a configuration as YAML, keys in their original order."""
    import yaml

    return yaml.safe_dump(_plain(config), sort_keys=False)


def _dotted_keys(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        keys.append(dotted)
        if isinstance(value, Mapping):
            keys += _dotted_keys(value, f"{dotted}.")
    return keys


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
