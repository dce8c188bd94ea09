"""The `--agent_config` file: a YAML agent configuration that replaces the shipped one, checked like overrides.

A value that cannot stand where the shipped one stood is refused in one line naming the file and the key;
a file that cannot be read, is not YAML, is past a limit of `rlrun.trust.limits` or is not a mapping is refused
with what to pass instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rlrun.configs.checks import check_value
from rlrun.configs.loading import RUN_KEYS
from rlrun.errors import InvalidArgument
from rlrun.trust.limits import read_yaml

AGENT_CONFIG_FLAG = "--agent_config"


def check_agent_config_path(path: str) -> Path:
    """`path` as an absolute path to an existing file; else `InvalidArgument` saying what to pass."""
    hint = "pass the path of a YAML agent configuration, such as a run's params/agent.yaml"
    if not isinstance(path, str | os.PathLike) or not os.fspath(path) or "\x00" in os.fspath(path):
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {path!r} is not a file path; {hint}.")
    file = Path(path).absolute()
    try:
        exists, is_file = file.exists(), file.is_file()
    except OSError as error:  # a name too long, a loop of links
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {str(path)[:80]!r}: {error.strerror}; {hint}.") from None
    if not exists:
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {str(path)!r} does not exist; {hint}.")
    if not is_file:
        raise InvalidArgument(f"{AGENT_CONFIG_FLAG} {str(path)!r} is not a file; {hint}.")
    return file


def read_agent_config(path: Path, shipped: Mapping[str, Any]) -> dict[str, Any]:
    """The agent configuration in the YAML file at `path`, checked against `shipped` (the configuration it
    replaces) the way overrides are: a value that cannot stand where the shipped one stood is refused, in
    one line naming the file and the key. Keys the file adds are kept; rlrun's run keys (`num_envs`,
    `max_iterations`, `seed`) it lacks are the shipped ones."""
    config = read_yaml(path, AGENT_CONFIG_FLAG)
    if not isinstance(config, dict) or not all(isinstance(key, str) for key in config):
        raise InvalidArgument(
            f"{AGENT_CONFIG_FLAG} {str(path)!r} holds {_kind(config)}, not a mapping of configuration keys; "
            "pass a file like a run's params/agent.yaml."
        )
    for key, value in _leaves(config):
        check_value(shipped, value, key, "agent", origin=f"{AGENT_CONFIG_FLAG} {str(path)!r}")
    return {**{key: shipped[key] for key in RUN_KEYS if key in shipped and key not in config}, **config}


def _kind(value: Any) -> str:
    """What a YAML document holds, in words: `nothing`, `a list`, `a str`, `a mapping with non-string keys`."""
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping with non-string keys"
    return f"a {type(value).__name__}"


def _leaves(config: Mapping[Any, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """Every `(dotted.key, value)` of a nested mapping, mappings themselves included (before their keys)."""
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        yield dotted, value
        if isinstance(value, Mapping):
            yield from _leaves(value, f"{dotted}.")
