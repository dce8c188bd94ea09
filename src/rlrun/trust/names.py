"""Names and expressions in a configuration that select code, held against tables rlrun owns per library.

A library reads some strings of its configuration as code: RSL-RL imports whatever a `class_name` names
(`package.module:attr` included), SKRL `eval`s its scheduler, preprocessor and noise strings and `exec`s model
source built from a model's `output`, its networks' `input` and `name`, its layers and activations. Each adapter
declares those keys as data (`rlrun.libraries.base.code_tables`): `CODE_NAMES` maps dotted key patterns to
what a value there may be, and `CODE_SOURCE` names the sections the library writes into source code.
`check_config` holds a configuration against them before anything runs:

- at a key of `CODE_NAMES`, a string must be one of the names listed there (compared as written), parse as the
  key's `Expression`, or be an `Identifier`; numbers, booleans and null are no names and pass;
- inside a `CODE_SOURCE` section, every mapping key is a plain name and every string stands at a key of
  `CODE_NAMES`; all the rest is numbers, booleans and null;
- anywhere, a string that reads as an import path (`package.module:attr`, `package.module.Class`) and stands
  at no key of `CODE_NAMES` is refused: a configuration never names a module or a class outside the tables.

Patterns are dotted keys: `*` stands for any one mapping key or list index, `**` for any number of them, and the
first pattern that matches a key is its rule. A refusal is one `UnsafeConfig` line naming the key, the value and
what is allowed there.

An expression is read with Python's `ast` in eval mode, walked against a whitelist (the expression's tokens, its
functions, numbers, `+ - * /` and unary minus) into rlrun's own small tree, and `render` writes that tree back as
text. `canonical` is a configuration with every expression replaced by rlrun's rendering of its tree: what an
adapter hands a library that takes text only, so the bytes the library reads are rlrun's, never the file's.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from rlrun.errors import UnsafeConfig, did_you_mean


@dataclass(frozen=True)
class Expression:
    """A small expression language: its operand names and functions, numbers, `+ - * /` and unary minus."""

    what: str
    """What it is, for messages (`an SKRL model output`)."""
    example: str
    """Valid expressions, for messages."""
    tokens: tuple[str, ...]
    """The names an operand may be."""
    functions: Mapping[str, str] = field(default_factory=dict)
    """Function name -> its arguments: `value` (one expression), `values` (one list of expressions) or
    `axes` (an expression and a tuple of non-negative integers)."""
    sibling_key: str | None = None
    """In a list of mappings, the key whose values (in every mapping of that list) are operands too, as SKRL's
    networks name each other."""
    single_token: bool = False
    """At most one distinct token per expression (SKRL finds an output's token by substring)."""
    max_length: int = 400


@dataclass(frozen=True)
class Identifier:
    """A lower-case name (letters, digits, `_`) that is no Python keyword and none of `reserved`."""

    reserved: tuple[str, ...] = ()


Rule: TypeAlias = tuple[str, ...] | Expression | Identifier
"""What a value at a key of `CODE_NAMES` may be: one of the names, an expression, or a plain name."""


@dataclass(frozen=True)
class Node:
    """One node of a parsed expression: `name`, `number`, `call`, `list`, `axes`, `binary` or `negative`."""

    kind: str
    value: str | int | float = ""
    children: tuple[Node, ...] = ()


IMPORT_PATH = re.compile(
    r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*|[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", re.ASCII
)
"""`package.module:attr` or `package.module.attr`: how RSL-RL (and Hydra-style loaders) name code to import."""
PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
LOWER_NAME = re.compile(r"[a-z_][a-z0-9_]*", re.ASCII)
OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


class _Refused(Exception):
    """Why an expression or value is refused (the message's tail); `UnsafeConfig` gets the key and value."""


# --- checking a configuration -------------------------------------------------------------------------------


def check_config(
    config: Any,
    names: Mapping[str, Rule],
    source: Sequence[str] = (),
    *,
    library: str = "the library",
    scope: str = "agent",
    origin: str = "override",
) -> None:
    """Raise `UnsafeConfig` (one line) for the first value of `config` that selects code outside `names`, writes
    text into a `source` section outside them, or reads as an import path (see the module docstring). `origin`
    names where the configuration came from: `"override"`, or the file it was read from."""
    _Visit(names, tuple(source), library, scope, origin).value(config, (), None)


def canonical(
    config: Any,
    names: Mapping[str, Rule],
    source: Sequence[str] = (),
    *,
    library: str = "the library",
    scope: str = "agent",
    origin: str = "the configuration handed to the library",
    import_paths: bool = True,
) -> Any:
    """`config` checked as `check_config` checks it, copied with every expression replaced by `render` of its
    parsed tree: what a library that reads expressions as text is handed. Without `import_paths`, text outside
    the tables is not looked at (an adapter's hand-over, after planning checked the file's text and rlrun added
    its own: a run directory, a run name that may hold dots)."""
    return _Visit(names, tuple(source), library, scope, origin, import_paths).value(config, (), None)


def rule_for(path: Sequence[str], names: Mapping[str, Rule]) -> Rule | None:
    """The rule of the first pattern of `names` that matches the dotted key `path` (a tuple of its parts)."""
    for pattern, rule in names.items():
        if _matches(tuple(pattern.split(".")), tuple(path)):
            return rule
    return None


def _matches(pattern: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_matches(rest, path[start:]) for start in range(len(path) + 1))
    return bool(path) and head in ("*", path[0]) and _matches(rest, path[1:])


def _in_source(path: tuple[str, ...], source: tuple[str, ...]) -> bool:
    return any(_matches((*pattern.split("."), "**"), path) for pattern in source)


class _Visit:
    """One walk over a configuration: checks each value and returns its canonical copy."""

    def __init__(
        self,
        names: Mapping[str, Rule],
        source: tuple[str, ...],
        library: str,
        scope: str,
        origin: str,
        import_paths: bool = True,
    ) -> None:
        self.names, self.source, self.library, self.scope, self.origin = names, source, library, scope, origin
        self.import_paths = import_paths

    def value(self, value: Any, path: tuple[str, ...], siblings: Sequence[Any] | None) -> Any:
        if isinstance(value, Mapping):
            copied = {}
            for key, item in value.items():
                if _in_source(path, self.source) and not (isinstance(key, str) and PLAIN_KEY.fullmatch(key)):
                    raise self.refuse(
                        path,
                        key,
                        f"{self.library} writes this section into source code, so its keys are plain "
                        "names (letters, digits, _)",
                    )
                copied[key] = self.value(item, (*path, str(key)), siblings)
            return copied
        if isinstance(value, list | tuple):
            inner = value if value and all(isinstance(item, Mapping) for item in value) else siblings
            return [self.value(item, (*path, str(index)), inner) for index, item in enumerate(value)]
        rule = rule_for(path, self.names)
        if isinstance(rule, Expression):
            return self.expression(value, path, rule, siblings)
        if not isinstance(value, str):
            return value
        if isinstance(rule, Identifier):
            if not LOWER_NAME.fullmatch(value) or keyword.iskeyword(value) or value in rule.reserved:
                reserved = f", none of {', '.join(rule.reserved)}" if rule.reserved else ""
                raise self.refuse(path, value, f"this is a plain lower-case name (letters, digits, _{reserved})")
            return value
        if rule is not None:
            if value not in rule:
                allowed = f"use one of {', '.join(rule)}" if rule else "rlrun allows none here: remove it or use null"
                close = did_you_mean(value, rule, listing=0)
                raise self.refuse(path, value, f"this key selects code; {allowed}", close)
            return value
        if _in_source(path, self.source):
            raise self.refuse(
                path,
                value,
                f"{self.library} writes this section into source code, where rlrun takes text only at "
                "the keys it checks; write a number, true/false or null",
            )
        if self.import_paths and IMPORT_PATH.fullmatch(value):
            raise self.refuse(
                path,
                value,
                "this reads as an import path, and a configuration never names a module or class "
                "(use a name rlrun lists for the key)",
            )
        return value

    def expression(self, value: Any, path: tuple[str, ...], rule: Expression, siblings: Sequence[Any] | None) -> Any:
        extra: tuple[str, ...] = ()
        if rule.sibling_key is not None and siblings:
            extra = tuple(
                item[rule.sibling_key]
                for item in siblings
                if isinstance(item, Mapping) and isinstance(item.get(rule.sibling_key), str)
            )
        try:
            if not isinstance(value, str):
                raise _Refused("it is not text")
            return render(parse_expression(value, rule, extra))
        except _Refused as refused:
            raise self.refuse(
                path, value, f"not {rule.what} rlrun reads ({refused}); write e.g. {rule.example}"
            ) from None

    def refuse(self, path: tuple[str, ...], value: Any, why: str, hint: str = "") -> UnsafeConfig:
        key = ".".join((self.scope, *path))
        shown = _shown(value)
        where = f"override '{key}={shown}'" if self.origin == "override" else f"{self.origin}: '{key}: {shown}'"
        return UnsafeConfig(f"{where}: {why}.{hint}")


def _shown(value: Any, limit: int = 80) -> str:
    """The value as a message quotes it: control characters escaped, long text cut."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


# --- expressions --------------------------------------------------------------------------------------------


def parse_expression(text: str, rule: Expression, extra_names: Sequence[str] = ()) -> Node:
    """Parse `text` into a `Node` tree, refusing (`_Refused`, via `check_config` an `UnsafeConfig`) anything
    but `rule`'s tokens and functions, `extra_names`, numbers, `+ - * /` and unary minus."""
    if len(text) > rule.max_length:
        raise _Refused(f"longer than {rule.max_length} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise _Refused("it does not parse") from None
    operands = (*rule.tokens, *(name for name in extra_names if LOWER_NAME.fullmatch(name)))
    try:
        node = _node(tree.body, rule, operands, 0)
    except RecursionError:
        raise _Refused("it is nested too deep") from None
    used = _names(node)
    if not used:
        raise _Refused(f"it names none of {', '.join(operands)}")
    tokens = sorted(used & set(rule.tokens))
    if rule.single_token and len(tokens) > 1:
        raise _Refused(f"it uses {' and '.join(tokens)}, and one expression takes one of them")
    return node


def _node(node: ast.AST, rule: Expression, operands: tuple[str, ...], depth: int) -> Node:
    if depth > 32:
        raise _Refused("it is nested too deep")
    if isinstance(node, ast.Name):
        if node.id not in operands:
            raise _Refused(f"unknown name {node.id!r}; the names are {', '.join(operands)}")
        return Node("name", node.id)
    if isinstance(node, ast.Constant):
        return Node("number", _number(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = (_node(side, rule, operands, depth + 1) for side in (node.left, node.right))
        return Node("binary", OPERATORS[type(node.op)], (left, right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return Node("negative", "-", (_node(node.operand, rule, operands, depth + 1),))
    if isinstance(node, ast.Call):
        return _call(node, rule, operands, depth)
    raise _Refused(f"{type(node).__name__.lower()} is not part of it: names, numbers, + - * / and calls only")


def _call(node: ast.Call, rule: Expression, operands: tuple[str, ...], depth: int) -> Node:
    name = node.func.id if isinstance(node.func, ast.Name) else None
    if name is None or name not in rule.functions:
        functions = ", ".join(rule.functions) or "none"
        raise _Refused(f"it calls {_shown(ast.unparse(node.func), 40)!r}; the functions are {functions}")
    signature, arguments = rule.functions[name], node.args
    if node.keywords:
        raise _Refused(f"{name} takes no keyword arguments")
    if signature == "value" and len(arguments) == 1:
        return Node("call", name, (_node(arguments[0], rule, operands, depth + 1),))
    if signature == "values" and len(arguments) == 1 and isinstance(arguments[0], ast.List) and arguments[0].elts:
        items = tuple(_node(item, rule, operands, depth + 1) for item in arguments[0].elts)
        return Node("call", name, (Node("list", "", items),))
    if signature == "axes" and len(arguments) == 2 and isinstance(arguments[1], ast.Tuple) and arguments[1].elts:
        axes = tuple(Node("number", _axis(item)) for item in arguments[1].elts)
        return Node("call", name, (_node(arguments[0], rule, operands, depth + 1), Node("axes", "", axes)))
    shapes = {"value": "one expression", "values": "one list of expressions", "axes": "an expression and a tuple"}
    raise _Refused(f"{name} takes {shapes.get(signature, signature)}")


def _number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Refused(f"{value!r} is not a finite number")
    return value


def _axis(node: ast.expr) -> int:
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Refused("the axes are non-negative integers, such as (0, 3, 1, 2)")
    return value


def _names(node: Node) -> set[str]:
    found = {str(node.value)} if node.kind == "name" else set()
    for child in node.children:
        found |= _names(child)
    return found


def render(node: Node) -> str:
    """rlrun's text of a parsed expression: the same tree for every spelling (spaces, redundant parentheses)."""
    if node.kind in ("name", "number"):
        return str(node.value) if node.kind == "name" else repr(node.value)
    if node.kind == "call":
        return f"{node.value}({', '.join(render(child) for child in node.children)})"
    if node.kind == "list":
        return f"[{', '.join(render(child) for child in node.children)}]"
    if node.kind == "axes":
        return f"({', '.join(render(child) for child in node.children)}{',' if len(node.children) == 1 else ''})"
    if node.kind == "negative":
        return f"-{_operand(node.children[0])}"
    left, right = node.children
    return f"{_operand(left)} {node.value} {_operand(right)}"


def _operand(node: Node) -> str:
    """An operand of an operator: compound ones in parentheses, so that the text keeps the tree's grouping."""
    text = render(node)
    return f"({text})" if node.kind in ("binary", "negative") else text


__all__ = [
    "IMPORT_PATH",
    "Expression",
    "Identifier",
    "Node",
    "Rule",
    "canonical",
    "check_config",
    "parse_expression",
    "render",
    "rule_for",
]
