"""A configuration as YAML text (the params files of a run), and as plain dicts and lists."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def to_yaml(config: Mapping[str, Any]) -> str:
    """Render a configuration as YAML, keys in their original order: `yaml.safe_dump`'s text, written by libyaml's
    faster emitter where PyYAML has it."""
    import yaml

    return yaml.dump(plain(config), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)


def plain(value: Any) -> Any:
    """`value` with every mapping made a dict and every list or tuple a list, all the way down."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value
