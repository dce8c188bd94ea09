"""Bounded reading of the YAML and JSON files rlrun is handed: specs, agent configurations, a run's
`params/*.yaml`, run.json, results.jsonl.

Such a file may come from someone else, so reading one costs a bounded amount of time and memory and yields
plain data (mappings, lists, strings, numbers, booleans, null), whatever the file holds:

- a file is read only if it is a regular file of at most `MAX_YAML_BYTES` (YAML) or `MAX_JSON_BYTES` (JSON),
  and must be UTF-8;
- YAML is read with PyYAML's safe loader, and every explicit tag but the core ones (`!!str`, `!!int`, ...) is
  refused, so no tag names a Python object or builds bytes, sets or dates; a date written plainly stays a string;
- the values a YAML document expands to, counting each alias as the whole node it names, are at most
  `MAX_NODES` (a 700-byte file of nested aliases, "billion laughs", expands to billions), an alias inside
  the node it names is refused, and the result holds no shared parts (each alias is a copy);
- nesting, aliases expanded, is at most `MAX_DEPTH` levels in YAML and in JSON, checked before the parser
  recurses that deep.

Each refusal is one `UnreadableFile` line naming the file, what is wrong and the fix. Imports only
`rlrun.errors`, the standard library and PyYAML.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, TypeGuard

from rlrun.errors import InvalidArgument
from rlrun.trust import paths

MAX_YAML_BYTES = 1 << 20
"""The largest YAML file rlrun reads (1 MiB): a spec or an agent configuration is a few kilobytes."""

MAX_JSON_BYTES = 16 << 20
"""The largest JSON file rlrun reads whole (16 MiB): run.json grows by about 200 bytes per checkpoint."""

MAX_NODES = 100_000
"""The most values (mappings, lists and scalars, aliases expanded) one YAML document may hold."""

MAX_DEPTH = 64
"""The deepest nesting a YAML or JSON document may have; rlrun's own files nest fewer than ten levels."""

PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map"))
"""The explicit YAML tags allowed: those that name a plain value."""


class UnreadableFile(InvalidArgument):
    """A file refused as too large, not UTF-8, malformed, or past a limit. `problem` says why as the end of a
    sentence about the file (`is nested deeper than 64 levels`), for callers that word the error themselves."""

    def __init__(self, label: str, problem: str, fix: str) -> None:
        super().__init__(f"{label} {problem}; {fix}.")
        self.problem = problem


def read_yaml(path: str | os.PathLike[str], what: str) -> Any:
    """The YAML document in the file at `path`, as plain data (None for an empty file); `what` names the file
    in errors (`bench spec`). Raises `UnreadableFile` (see the module docstring)."""
    label = f"{what} {os.fspath(path)!r}"
    return parse_yaml(read_text(path, what, max_bytes=MAX_YAML_BYTES), label)


def parse_yaml(text: str, what: str) -> Any:
    """The YAML document `text`, as plain data; `what` names where it came from in errors."""
    import yaml

    if len(text) > MAX_YAML_BYTES:
        raise UnreadableFile(what, f"is larger than {_size(MAX_YAML_BYTES)}", "pass a smaller file")
    loader = _loader_class()(text.removeprefix("\ufeff"))
    loader.label = what
    try:
        return _tree(loader.get_single_data())
    except UnreadableFile:
        raise
    except yaml.MarkedYAMLError as error:
        problem = " ".join(str(error.problem or error.context or "malformed").split()) + _at(error.problem_mark)
        raise UnreadableFile(what, f"is not valid YAML ({problem})", "fix the syntax") from None
    except (yaml.YAMLError, ValueError, RecursionError) as error:  # ValueError: an integer of 5,000 digits
        reason = " ".join(str(error).split()) or type(error).__name__
        raise UnreadableFile(what, f"is not valid YAML ({reason})", "fix the syntax") from None
    finally:
        loader.dispose()


def read_json(path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The JSON document in the file at `path`; `what` names the file in errors (`run.json`). Raises
    `UnreadableFile` (see the module docstring)."""
    return parse_json(read_text(path, what, max_bytes=max_bytes), f"{what} {os.fspath(path)!r}")


def parse_json(text: str, what: str) -> Any:
    """The JSON document `text`, its nesting checked before it is parsed; `what` names it in errors."""
    if not _depth_within(text, MAX_DEPTH):
        raise UnreadableFile(what, f"is nested deeper than {MAX_DEPTH} levels", "repair or replace it")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:  # RecursionError: a caller's very low recursion limit
        reason = " ".join(str(error).split()) or type(error).__name__
        raise UnreadableFile(what, f"does not parse as JSON ({reason})", "repair or replace it") from None


def read_text(path: str | os.PathLike[str], what: str, *, max_bytes: int) -> str:
    """The UTF-8 text of the regular file at `path`, at most `max_bytes` long; a leading byte-order mark is
    dropped. A FIFO, a device or a folder is refused without blocking on it; so is a larger file, unread."""
    label = f"{what} {os.fspath(path)!r}"
    try:
        data = paths.read_file(path, what, max_bytes)
    except paths.NotRead as refusal:
        problem, fix = {
            "open": (f"cannot be read ({refusal.reason})", "pass a readable file"),
            "type": ("is not a regular file", "pass a file"),
            "size": (f"is larger than {_size(max_bytes)}", "pass a smaller file"),
            "read": (f"cannot be read ({refusal.reason})", "pass a readable file"),
        }[refusal.kind]
        raise UnreadableFile(label, problem, fix) from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise UnreadableFile(
            label, f"is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})", "save it as UTF-8"
        ) from None


def file_size_within(path: str | os.PathLike[str], what: str, max_bytes: int) -> Path:
    """`path` as a `Path`, once it is known to be a regular file of at most `max_bytes`; for files read a line
    at a time (results.jsonl)."""
    label = f"{what} {os.fspath(path)!r}"
    try:
        info = os.stat(path)
    except OSError as error:
        raise UnreadableFile(label, f"cannot be read ({_reason(error)})", "pass a readable file") from None
    if not stat.S_ISREG(info.st_mode):
        raise UnreadableFile(label, "is not a regular file", "pass a file")
    if info.st_size > max_bytes:
        raise UnreadableFile(label, f"is larger than {_size(max_bytes)}", "pass a smaller file")
    return Path(path)


# --- YAML ---------------------------------------------------------------------------------------------------

_LOADER: type[Any] | None = None


def _loader_class() -> type[Any]:
    """PyYAML's safe loader with the limits above, made once (PyYAML is imported on first use)."""
    global _LOADER
    if _LOADER is None:
        _LOADER = _make_loader()
    return _LOADER


def _make_loader() -> type[Any]:
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
    from yaml.nodes import MappingNode, Node, SequenceNode
    from yaml.resolver import Resolver

    # libyaml's parser (an iterative state machine in C) when PyYAML has it: about five times as fast as the
    # Python one; the nodes are composed in Python either way, so that each is measured as it is made.
    front: tuple[type[Any], ...]
    try:
        from yaml._yaml import CParser

        front = (CParser,)
    except ImportError:  # PyYAML built without libyaml
        front = (yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser)
    timestamp = "tag:yaml.org,2002:timestamp"

    class BoundedLoader(Composer, *front, SafeConstructor, Resolver):  # type: ignore[misc]
        """A safe loader that measures each node as it is composed: the values the document expands to so far
        and each node's depth (an alias counts as the node it names), and refuses tags that name no plain value."""

        yaml_implicit_resolvers = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag != timestamp]
            for first, resolvers in Resolver.yaml_implicit_resolvers.items()
        }

        def __init__(self, stream: str) -> None:
            if len(front) == 1:
                front[0].__init__(self, stream)
            else:
                yaml.reader.Reader.__init__(self, stream)
                yaml.scanner.Scanner.__init__(self)
                yaml.parser.Parser.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
            self.label = "YAML"
            self.open = 0
            self.total = 0
            self.measured: dict[int, tuple[int, int]] = {}

        def compose_node(self, parent: Node | None, index: Any) -> Node | None:
            event = self.peek_event()
            if isinstance(event, AliasEvent):
                node = super().compose_node(parent, index)
                if id(node) not in self.measured:
                    raise UnreadableFile(
                        self.label,
                        f"has the alias *{event.anchor} inside the node it names{_at(event.start_mark)}",
                        "write the values out",
                    )
                self.count(self.measured[id(node)][0], event.start_mark)
                return node
            tag = event.tag if isinstance(event, ScalarEvent | CollectionStartEvent) else None
            if tag not in (None, "!") and tag not in PLAIN_TAGS:
                raise UnreadableFile(
                    self.label,
                    f"uses the YAML tag {tag!r}{_at(event.start_mark)}",
                    "remove it: rlrun reads plain YAML (mappings, lists, strings, numbers, booleans, null), no tags",
                )
            self.count(1, event.start_mark)
            self.open += 1
            if self.open > MAX_DEPTH:
                raise UnreadableFile(
                    self.label, f"is nested deeper than {MAX_DEPTH} levels{_at(event.start_mark)}", "flatten it"
                )
            try:
                node = super().compose_node(parent, index)
            finally:
                self.open -= 1
            if node is None:
                return node
            if isinstance(node, SequenceNode):
                children = [self.measured[id(child)] for child in node.value]
            elif isinstance(node, MappingNode):
                children = [self.measured[id(part)] for pair in node.value for part in pair]
            else:
                children = []
            depth = 1 + max((deep for _, deep in children), default=0)
            if depth > MAX_DEPTH:
                raise UnreadableFile(
                    self.label,
                    f"is nested deeper than {MAX_DEPTH} levels through its aliases{_at(event.start_mark)}",
                    "flatten it",
                )
            self.measured[id(node)] = (1 + sum(size for size, _ in children), depth)
            return node

        def count(self, values: int, mark: Any) -> None:
            """Add `values` to the document's count, refused past `MAX_NODES`."""
            self.total += values
            if self.total > MAX_NODES:
                raise UnreadableFile(
                    self.label,
                    f"expands to more than {MAX_NODES:,} values{_at(mark)} (an alias counts as all the values it "
                    "repeats)",
                    "write fewer values or aliases",
                )

    return BoundedLoader


def _tree(value: Any) -> Any:
    """`value` with every mapping and list a new one: aliases become copies, not shared parts."""
    if isinstance(value, dict):
        return {key: _tree(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_tree(item) for item in value]
    return value


def _at(mark: Any) -> str:
    """` at line N` for a parser's mark (PyYAML's or libyaml's), '' without one."""
    return f" at line {mark.line + 1}" if mark is not None else ""


# --- JSON ---------------------------------------------------------------------------------------------------

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def _depth_within(text: str, limit: int) -> bool:
    """Whether the JSON `text` nests at most `limit` arrays and objects deep (strings do not count)."""
    if text.count("[") + text.count("{") <= limit:
        return True
    depth = 0
    for char in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        if depth > limit:
            return False
    return True


# --- wording ------------------------------------------------------------------------------------------------


MAX_WHOLE = (1 << 63) - 1
"""The largest count a file may state (a step, iteration or seed count): an int64, so that every count read is a
float and a tensor index too (a JSON integer may have thousands of digits)."""


def whole_number(value: Any, minimum: int = 0) -> TypeGuard[int]:
    """Whether `value`, read from a file, is an integer (not a bool) from `minimum` to `MAX_WHOLE`."""
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= MAX_WHOLE


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and limit % (1 << 20) == 0 else f"{limit:,} bytes"


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


__all__ = [
    "MAX_DEPTH",
    "MAX_JSON_BYTES",
    "MAX_NODES",
    "MAX_YAML_BYTES",
    "UnreadableFile",
    "file_size_within",
    "parse_json",
    "parse_yaml",
    "read_json",
    "read_text",
    "read_yaml",
    "whole_number",
]
