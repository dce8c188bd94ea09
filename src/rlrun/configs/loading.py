"""The shipped agent configurations: where each library's YAML files are, and reading them.

Tuned configurations live in `<library>/<algorithm>/<namespace>/<Task-vN>.yaml`, and
`<library>/<algorithm>/default.yaml` serves any other task. Each holds rlrun's run keys (`RUN_KEYS`) at the
top level beside the library's own keys; `library_config` leaves them out for the library.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from importlib import resources
from typing import Any

from rlrun.trust.limits import parse_yaml

RUN_KEYS = ("num_envs", "max_iterations", "seed")
"""Top-level keys of an agent configuration that belong to rlrun, not to the library."""

CONFIG_PACKAGES: dict[str, str] = {}
"""Library name -> the package whose files hold its configurations, laid out as here
(`<library>/<algorithm>/default.yaml`, ...), for libraries that packages add (`rlrun.libraries` entry points);
a library not listed has its configurations here."""

SHIPPED_PACKAGE = "rlrun.configs"
"""The package holding rlrun's own configurations."""


def _root(library: str) -> Any:
    return resources.files(CONFIG_PACKAGES.get(library, SHIPPED_PACKAGE))


def library_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The library's own part of an agent configuration: a deep copy without rlrun's `RUN_KEYS`."""
    return {key: copy.deepcopy(value) for key, value in config.items() if key not in RUN_KEYS}


def config_name(library: str, algorithm: str, task: str) -> str:
    """The packaged file holding the tuned configuration of `library`'s `algorithm` for `task`."""
    return f"{library}/{algorithm}/{task}.yaml"


def has_tuned_config(library: str, algorithm: str, task: str) -> bool:
    """True when rlrun ships a configuration tuned for this library, algorithm and task."""
    return _root(library).joinpath(config_name(library, algorithm, task)).is_file()


def shipped_name(library: str, algorithm: str, task: str) -> str:
    """The packaged file `load_agent_config` reads: the tuned one for the task, else the algorithm's default."""
    name = config_name(library, algorithm, task)
    return name if _root(library).joinpath(name).is_file() else f"{library}/{algorithm}/default.yaml"


def load_agent_config(library: str, algorithm: str, task: str) -> dict[str, Any]:
    """Return the tuned configuration for the task, or the algorithm's generic `default.yaml` (a new copy)."""
    root = _root(library)
    path = root.joinpath(config_name(library, algorithm, task))
    if not path.is_file():
        path = root.joinpath(f"{library}/{algorithm}/default.yaml")
    return copy.deepcopy(parsed_yaml(path))


_PARSED: dict[tuple[str, str], Any] = {}
"""YAML documents already parsed, by file and text (see `parsed_yaml`)."""


def parsed_yaml(path: Any) -> Any:
    """The YAML document in the file at `path` (a `Path` or a package resource), parsed once per text.

    Every call's planning reads the same few files (the shipped configuration, RL Zoo's table), and parsing
    costs far more than reading: the parsed document is kept per path and text, so an edited file is parsed
    again. The result is shared: callers copy what they change. Parsed with the limits of `rlrun.trust.limits`
    (plain values, no tags, sizes and aliases bounded), like every file rlrun reads.
    """
    text = path.read_text(encoding="utf-8")
    key = (str(path), text)
    if key not in _PARSED:
        if len(_PARSED) >= 64:  # a bound for a process that reads many edited files; a few in practice
            _PARSED.clear()
        _PARSED[key] = parse_yaml(text, f"YAML file {str(path)!r}")
    return _PARSED[key]
