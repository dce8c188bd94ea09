"""`agent.<key>=<value>` and `env.<key>=<value>` overrides: sorted by scope, merged into a configuration.

Overrides are OmegaConf dotlists merged in struct mode: a key the configuration lacks is an error that names
the nearest valid key (or, where nothing is close, the keys of the section it reaches), and each value is
checked against the default it replaces (`rlrun.configs.checks`).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rlrun.configs.checks import check_value
from rlrun.configs.yaml_text import plain
from rlrun.errors import InvalidArgument, UnknownConfigKey

if TYPE_CHECKING:
    from omegaconf import DictConfig, ListConfig

OVERRIDE_SCOPES = ("agent", "env")


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
        return plain(config)
    first = dotlist[0].split("=", 1)[0]
    if _absent(config, first):  # a mistyped key answered from the data, before OmegaConf is imported; the
        raise _unknown_key(config, first, scope)  # later overrides are checked in order by OmegaConf, below
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    base: DictConfig | ListConfig = OmegaConf.create(dict(config))
    OmegaConf.set_struct(base, True)
    try:  # every override in one merge (each merge copies the whole configuration)
        merged = OmegaConf.merge(base, OmegaConf.from_dotlist(dotlist))
    except (OmegaConfBaseException, yaml.YAMLError, ValueError, TypeError, LookupError):
        # One by one below, to name the override at fault (`from_dotlist` of `a=[2]` and `a.a=1` together
        # raises a bare ValueError: the second sets a key on the list the first made).
        merged = None
    if merged is not None:
        for item in dotlist:
            key = item.split("=", 1)[0]
            check_value(config, OmegaConf.select(merged, key), key, scope)
        return OmegaConf.to_container(merged, resolve=True)  # type: ignore[return-value]  # a DictConfig's container: a dict
    for item in dotlist:
        key = item.split("=", 1)[0]
        try:
            base = OmegaConf.merge(base, OmegaConf.from_dotlist([item]))
        except ConfigKeyError:
            raise _unknown_key(config, key, scope) from None
        except (OmegaConfBaseException, ValueError, TypeError, LookupError) as error:
            listed = _list_above(config, key)
            if listed is not None:  # `hidden_dims.0=32`: OmegaConf reads the index as a key of a new section
                name, value = listed
                raise InvalidArgument(
                    f"override '{scope}.{item}' reaches into {scope}.{name}, a list; pass the whole list, "
                    f"e.g. {scope}.{name}={json.dumps(value)}."
                ) from None
            message = str(error).splitlines()[0]
            raise InvalidArgument(f"cannot apply override '{scope}.{item}': {message}") from None
        except yaml.YAMLError as error:  # OmegaConf parses each value as YAML: `[16,` is not a list
            reason = " ".join(str(getattr(error, "problem", None) or error).split())
            raise InvalidArgument(
                f"override '{scope}.{item}' is not a YAML value ({reason}); quote or complete it, e.g. [64, 64]."
            ) from None
        check_value(config, OmegaConf.select(base, key), key, scope)
    return OmegaConf.to_container(base, resolve=True)  # type: ignore[return-value]  # a DictConfig's container: a dict


def _absent(config: Mapping[str, Any], key: str) -> bool:
    """Whether dotted `key` names a key missing from a section of `config` that it plainly reaches (every part
    above it a section that holds the next): OmegaConf would refuse it in struct mode. False where it cannot
    tell (a list, a value, OmegaConf's bracket syntax), leaving the key to OmegaConf."""
    parts = key.split(".")
    if "" in parts or any("[" in part or "]" in part for part in parts):
        return False
    section: Any = config
    for part in parts:
        if not isinstance(section, Mapping) or not all(isinstance(name, str) for name in section):
            return False
        if part not in section:
            return True
        section = section[part]
    return False


def _unknown_key(config: Mapping[str, Any], key: str, scope: str) -> UnknownConfigKey:
    """The one line for an override of a key `config` does not have: the nearest key, or the keys beside it."""
    close = _nearest_key(config, key)
    hint = f" Did you mean '{scope}.{close}'?" if close else _keys_beside(config, key, scope)
    return UnknownConfigKey(f"unknown {scope} configuration key '{scope}.{key}'.{hint}")


def _list_above(config: Mapping[str, Any], key: str) -> tuple[str, list[Any]] | None:
    """The list that dotted `key` reaches into (its dotted name and default), if any."""
    value: Any = config
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
        if isinstance(value, list):
            return ".".join(parts[: depth + 1]), value
    return None


def _nearest_key(config: Mapping[str, Any], key: str) -> str | None:
    """The valid dotted key `key` most likely meant: a sibling spelt alike (`algorithm.learning_rat`), else a key
    elsewhere spelt alike (`algoritm.learning_rate`), else one with the same last part (`learning_rate`). A
    shared section alone is no likeness: `algorithm.zzz` is not `algorithm.schedule`."""
    parent, _, last = key.rpartition(".")
    valid = [name for name in _dotted_keys(config) if not key.startswith(f"{name}.")]  # no ancestors
    siblings = {name.rpartition(".")[2]: name for name in valid if name.rpartition(".")[0] == parent}
    others = [name for name in valid if name.rpartition(".")[0] != parent]
    close = [siblings[name] for name in difflib.get_close_matches(last, list(siblings), n=1, cutoff=0.6)]
    close = close or difflib.get_close_matches(key, others, n=1, cutoff=0.5)
    close = close or [name for name in valid if name.rpartition(".")[2] == last][:1]
    return close[0] if close else None


def _keys_beside(config: Mapping[str, Any], key: str, scope: str, listing: int = 12) -> str:
    """The keys of the deepest section of `config` that `key` (dotted) reaches, as a hint: where nothing is
    close to a key, the user needs to see what is there."""
    section, path = config, [scope]
    for part in key.split(".")[:-1]:
        inner = section.get(part)
        if not isinstance(inner, Mapping):
            break
        section, path = inner, [*path, part]
    names = [str(name) for name in section]
    if not names:
        return ""
    shown = ", ".join(names[:listing]) + (f" and {len(names) - listing} more" if len(names) > listing else "")
    return f" Keys of {'.'.join(path)}: {shown}."


def _dotted_keys(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        keys.append(dotted)
        if isinstance(value, Mapping):
            keys += _dotted_keys(value, f"{dotted}.")
    return keys
