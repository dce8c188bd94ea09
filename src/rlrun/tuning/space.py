"""A tuner's search space: `agent.`/`env.` keys with distributions, written as a spec writes them.

    agent.learning_rate: loguniform(1e-5, 1e-2)
    agent.gamma: uniform(0.9, 0.999)
    agent.n_epochs: int(1, 20)
    agent.policy_kwargs.net_arch: choice([[16, 16], [64, 64]])

Each entry becomes a `Param`: its key (the Optuna parameter name, so the dashboard shows the override it sets),
its distribution as Optuna builds it, and the override word a value turns into. Optuna's categorical
distribution holds scalars only, so a choice among lists or mappings is stored as each value's JSON text and
decoded when the override is written. `check_space` plans a training at both ends of every distribution (and
with every choice), so that a key or value the library's configuration refuses is a user error before a study
starts: a choice that selects code outside the library's tables (`rlrun.trust.names`) among them. Parsing
imports nothing heavy; Optuna is imported when a distribution is built.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlrun.errors import InvalidArgument, UserError, did_you_mean
from rlrun.trust.names import check_config

if TYPE_CHECKING:
    from rlrun.api.requests import TrainRequest
    from rlrun.hermetic import Call

KINDS = ("loguniform", "uniform", "int", "choice")
"""The distributions a search space may name, as `kind(arguments)`."""
FORM = re.compile(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*", re.DOTALL)
SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class Param:
    """One searched key: `kind` with its `low`/`high` or `choices`, and how a value becomes an override."""

    key: str
    """`agent.<dotted key>` or `env.<key>`: the override it sets, and the parameter's name in the study."""
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    choices: tuple[Any, ...] = ()
    """The choice's values as written (lists and mappings included)."""

    @property
    def encoded(self) -> bool:
        """Whether the choices are stored in the study as JSON text (some value is not a scalar)."""
        return self.kind == "choice" and not all(isinstance(value, SCALARS) for value in self.choices)

    @property
    def bounds(self) -> tuple[float | int, float | int]:
        """`(low, high)` of a `uniform`, `loguniform` or `int` key (a TypeError for a choice)."""
        if self.low is None or self.high is None:
            raise TypeError(f"a {self.kind} parameter has no low and high")
        return self.low, self.high

    def distribution(self) -> Any:
        """The Optuna distribution of this key."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.kind in ("loguniform", "uniform", "int"):
            low, high = self.bounds
            if self.kind == "int":
                return IntDistribution(int(low), int(high))
            return FloatDistribution(float(low), float(high), log=self.kind == "loguniform")
        return CategoricalDistribution([self.store(value) for value in self.choices])

    def store(self, value: Any) -> Any:
        """A value as the study holds it (JSON text for a choice among lists or mappings)."""
        return json.dumps(value) if self.encoded else value

    def load(self, stored: Any) -> Any:
        """A value as the study holds it, back to the configuration's value."""
        return json.loads(stored) if self.encoded and isinstance(stored, str) else stored

    def override(self, stored: Any) -> str:
        """The `key=value` override word for a value the study holds (the value in YAML, as overrides parse)."""
        return f"{self.key}={json.dumps(self.load(stored))}"

    def samples(self) -> tuple[Any, ...]:
        """The values planning checks against the library's configuration: both ends, or every choice."""
        if self.kind == "choice":
            return tuple(self.store(value) for value in self.choices)
        if self.kind == "int":
            return (self.low, self.high)
        low, high = self.bounds
        return (float(low), float(high))  # as sampled: `1.0`, never `1`

    def contains(self, value: Any) -> bool:
        """Whether `value` (as written in a spec) lies in this distribution."""
        if self.kind == "choice":
            return any(value == choice and type(value) is type(choice) for choice in self.choices)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        low, high = self.bounds
        return low <= value <= high

    def text(self) -> str:
        """The distribution as a spec writes it."""
        if self.kind == "choice":
            return f"choice({json.dumps(list(self.choices))})"
        return f"{self.kind}({self.low!r}, {self.high!r})"


def parse_space(space: Any) -> tuple[Param, ...]:
    """A search space (a mapping of `agent.`/`env.` keys to `kind(arguments)` texts) as `Param`s, checked:
    known kind, numbers in order, a positive range for `loguniform`, integers for `int`, a non-empty choice."""
    if not isinstance(space, Mapping) or not space:
        raise InvalidArgument(
            "the search space is empty: add search_space: {agent.learning_rate: 'loguniform(1e-5, 1e-2)'} "
            "(a mapping of agent./env. keys to distributions)."
        )
    return tuple(parse_param(key, text) for key, text in space.items())


def parse_param(key: Any, text: Any) -> Param:
    """One entry of a search space, checked (see `parse_space`)."""
    if not isinstance(key, str) or not re.fullmatch(r"(agent|env)\.[^=\s]+", key):
        raise InvalidArgument(
            f"search space key {key!r} is not an agent.<key> or env.<key> (for example agent.learning_rate)."
        )
    where = f"search space {key}: {text!r}"
    match = FORM.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidArgument(
            f"{where} is not a distribution; write loguniform(1e-5, 1e-2), uniform(a, b), int(a, b) or choice([x, y])."
        )
    kind, inner = match[1], match[2]
    if kind not in KINDS:
        raise InvalidArgument(f"{where}: unknown distribution {kind!r}.{did_you_mean(kind, KINDS)}")
    try:
        arguments: tuple[Any, ...] = ast.literal_eval(f"({inner},)") if inner.strip() else ()
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise InvalidArgument(f"{where}: the arguments are not Python literals such as 1e-5, 8 or [16, 16].") from None
    if kind == "choice":
        if len(arguments) != 1 or not isinstance(arguments[0], list | tuple) or not arguments[0]:
            raise InvalidArgument(f"{where}: choice takes one non-empty list, such as choice([64, 128]).")
        choices = tuple(_plain(value) for value in arguments[0])
        scope, _, dotted = key.partition(".")  # a choice is a value the configuration will hold: data, no import path
        check_config({dotted: list(choices)}, {}, scope=scope, origin=f"search space {key}")
        if len({json.dumps(value, sort_keys=True) for value in choices}) != len(choices):
            raise InvalidArgument(f"{where}: the choice lists a value twice; list each once.")
        return Param(key, kind, choices=choices)
    if len(arguments) != 2:
        raise InvalidArgument(f"{where}: {kind} takes two numbers, low and high, such as {kind}(1, 10).")
    low, high = arguments
    numbers = all(isinstance(value, int | float) and not isinstance(value, bool) for value in (low, high))
    if not numbers or not all(math.isfinite(value) for value in (low, high)):
        raise InvalidArgument(f"{where}: low and high must be finite numbers, such as {kind}(1, 10).")
    if kind == "int" and not (isinstance(low, int) and isinstance(high, int)):
        raise InvalidArgument(f"{where}: int takes integers, such as int({math.floor(low)}, {math.ceil(high)}).")
    if not low < high:
        raise InvalidArgument(f"{where}: low must be below high, such as {kind}({min(low, high)}, {max(low, high)}).")
    if kind == "loguniform" and low <= 0:
        raise InvalidArgument(f"{where}: loguniform needs a positive low, such as loguniform(1e-5, {high!r}).")
    return Param(key, kind, low=low, high=high)


def _plain(value: Any) -> Any:
    """Tuples as lists (YAML and the configurations know lists only)."""
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def parse_enqueued(entries: Any, params: tuple[Param, ...]) -> tuple[dict[str, Any], ...]:
    """Trials to run first (a known or deliberately poor start), as the values the study stores, checked
    against the search space: every key searched, every value in its distribution."""
    if entries is None:
        return ()
    if isinstance(entries, Mapping):
        entries = [entries]
    if not isinstance(entries, list | tuple):
        raise InvalidArgument(f"enqueue must be a list of mappings of search space keys to values, not {entries!r}.")
    by_key = {param.key: param for param in params}
    checked = []
    for entry in entries:
        if not isinstance(entry, Mapping) or not entry:
            raise InvalidArgument(f"enqueued trial {entry!r} must be a mapping such as {{agent.learning_rate: 1e-6}}.")
        stored = {}
        for key, value in entry.items():
            param = by_key.get(key)
            if param is None:
                raise InvalidArgument(
                    f"enqueued trial key {key!r} is not in the search space.{did_you_mean(str(key), by_key)} "
                    "Enqueue only searched keys (fixed ones go to overrides)."
                )
            value = _plain(value)
            if not param.contains(value):
                raise InvalidArgument(
                    f"enqueued trial {key}={value!r} lies outside its distribution {param.text()}; "
                    "widen the search space or change the value."
                )
            stored[key] = param.store(value)
        checked.append(stored)
    return tuple(checked)


def check_space(
    call: Call, request: TrainRequest, params: tuple[Param, ...], enqueue: tuple[dict[str, Any], ...]
) -> None:
    """Plan a training at both ends of every distribution and with every choice (and with each enqueued
    trial): a key the configuration lacks, or a value of the wrong type, is a user error now."""
    from rlrun.api.planning import plan_train

    rounds = max(2, *(len(param.samples()) for param in params))
    candidates = [
        ("search space", {param.key: param.samples()[index % len(param.samples())] for param in params})
        for index in range(rounds)
    ]
    candidates += [("enqueued trial", entry) for entry in enqueue]
    by_key = {param.key: param for param in params}
    for what, values in candidates:
        words = tuple(by_key[key].override(value) for key, value in values.items())
        try:
            plan_train(call, dataclasses.replace(request, overrides=(*request.overrides, *words)))
        except UserError as error:
            raise type(error)(f"{what}: {error}") from None


__all__ = ["KINDS", "Param", "check_space", "parse_enqueued", "parse_param", "parse_space"]
