"""YAML spec files (`rlrun bench SPEC.yaml`, `rlrun tune SPEC.yaml`): read, checked against the request's
fields, and merged with the flags given beside them, each mistake one line naming the file and the key."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.errors import InvalidArgument, did_you_mean


def read_spec(
    path: str | Path, what: str, keys: Sequence[str], overrides: dict[str, Any], *, not_a_file: str, example: str
) -> dict[str, Any]:
    """The spec at `path` as a mapping whose keys are all in `keys`, with every `overrides` value that is not
    None in place of its own. `what` names the file in errors (`bench spec`); `not_a_file` is the fix when the
    path is not a file, `example` lists keys a spec has."""
    import yaml

    source = runs.check_path(path, what)
    if not source.is_file():
        raise InvalidArgument(f"{what} {str(source)!r} is not a file; {not_a_file}")
    try:
        spec = yaml.safe_load(source.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise InvalidArgument(f"{what} {str(source)!r} is not valid YAML: {' '.join(str(error).split())}") from None
    if not isinstance(spec, dict):
        raise InvalidArgument(f"{what} {str(source)!r} must be a mapping of keys such as {example}.")
    for key in spec:
        if key not in keys:
            raise InvalidArgument(
                f"{what} key {key!r} is unknown.{did_you_mean(str(key), keys, listing=0)} "
                f"Valid keys: {', '.join(keys)}."
            )
    spec.update({key: value for key, value in overrides.items() if value is not None})
    return spec
