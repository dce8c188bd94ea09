"""The guard registry: its entries, and the building blocks guards are made of."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from rlrun.hermetic import GUARDS, Guard, attributes_guard, register, registered, unregister
from rlrun.hermetic.registry import identity_guard, list_guard, module_loaded, object_guard

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs" / "guards.md"
GUARD_DOCS = ROOT / "scripts" / "guard_docs.py"


def test_every_guard_says_what_it_covers_and_has_a_unique_name():
    names = [guard.name for guard in GUARDS]
    assert len(names) == len(set(names))
    assert all(guard.doc and guard.category for guard in GUARDS)


def load_guard_docs():
    """The docs generator, `scripts/guard_docs.py` (a script: it imports the library table, the core may not)."""
    spec = importlib.util.spec_from_file_location("guard_docs", GUARD_DOCS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guard_table_in_the_docs_is_generated_from_the_registry():
    guard_docs = load_guard_docs()

    assert guard_docs.guard_table() in DOCS.read_text(encoding="utf-8"), (
        "run: python scripts/guard_docs.py > docs/guards.md"
    )
    assert guard_docs.page() == DOCS.read_text(encoding="utf-8"), "run: python scripts/guard_docs.py > docs/guards.md"


def test_watch_only_entries_of_rlrun_live_in_one_module():
    from rlrun.hermetic import watched

    watch_only = {guard.name for guard in GUARDS if not guard.restored and guard.owner == "rlrun"}
    assert watch_only == {guard.name for guard in watched.ENTRIES}, "register watch-only entries in watched.py"


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


def test_identity_guard_puts_back_the_same_object():
    holder = types.SimpleNamespace(hook=print)
    guard = identity_guard("test: hook", holder, "hook", doc="A hook.")
    saved = guard.capture()
    holder.hook = lambda *args: None
    assert guard.snapshot() != guard.fingerprint(saved)
    guard.restore(saved)
    assert holder.hook is print


def test_module_loaded_is_true_once_every_named_module_is_imported():
    assert module_loaded("sys")() and module_loaded("sys", "types")()
    assert not module_loaded("sys", "rlrun_test_never_imported")()


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
