"""The guard registry: its entries, and the building blocks guards are made of."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from rlrun.hermetic import GUARDS, Guard, attributes_guard, register, registered, unregister
from rlrun.hermetic.registry import list_guard, object_guard

DOCS = Path(__file__).parents[2] / "docs" / "guards.md"


def test_every_guard_says_what_it_covers_and_has_a_unique_name():
    names = [guard.name for guard in GUARDS]
    assert len(names) == len(set(names))
    assert all(guard.doc and guard.category for guard in GUARDS)


def test_the_guard_table_in_the_docs_is_generated_from_the_registry():
    from rlrun.hermetic.docs import guard_table

    assert guard_table() in DOCS.read_text(encoding="utf-8"), "run: python -m rlrun.hermetic.docs > docs/guards.md"


def test_register_replaces_an_entry_of_the_same_name_and_unregister_removes_it():
    first = Guard("test: entry", "first", lambda: 1)
    second = Guard("test: entry", "second", lambda: 2)
    register(first)
    register(second)
    assert [guard.doc for guard in GUARDS if guard.name == "test: entry"] == ["second"]
    unregister("test: entry")
    assert all(guard.name != "test: entry" for guard in GUARDS)


def test_list_guard_puts_back_the_object_and_its_contents():
    holder = types.SimpleNamespace(items=[1, 2])
    original = holder.items
    guard = list_guard("test: list", holder, "items", doc="A list.")
    saved = guard.capture()
    holder.items.append(3)
    holder.items = [9]
    guard.restore(saved)
    assert holder.items is original and original == [1, 2]


def test_object_guard_calls_the_setter_only_when_the_value_differs():
    calls = []
    state = {"value": 1}
    guard = object_guard("test: value", lambda: state["value"], lambda value: calls.append(value), doc="A value.")
    guard.restore(guard.capture())
    assert calls == []
    saved = guard.capture()
    state["value"] = 2
    guard.restore(saved)
    assert calls == [1]


def test_attributes_guard_reads_vars_not_properties():
    class Config:
        @property
        def expensive(self):
            raise AssertionError("a property was read")

    config = Config()
    config._private = 1
    guard = attributes_guard("test: config", lambda: config, doc="A config.", category="test")
    saved = guard.capture()
    config._private, config._added = 2, 3
    guard.restore(saved)
    assert vars(config) == {"_private": 1}


def test_registered_removes_the_guard_even_when_the_block_raises():
    guard = Guard("test: temporary", "temporary", lambda: None)
    try:
        with registered(guard):
            raise RuntimeError
    except RuntimeError:
        pass
    assert all(entry.name != "test: temporary" for entry in GUARDS)
    assert sys.modules["rlrun.hermetic"].GUARDS is GUARDS
