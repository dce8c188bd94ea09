"""The guard registry: the one list of process-global state that a call must leave as it found it.

How to add a guard
------------------
1. Pick the module. A global any call may change: `hermetic/guards.py` (Python runtime, warnings,
   logging), `process_guards.py` (signals, exit hooks, multiprocessing, SDL, gc), `rng_guards.py`
   (Python's and NumPy's global RNGs), `package_guards.py` (NumPy's options, Gymnasium's registry) or
   `hermetic/torch_state.py` (torch). A global only one RL library changes: that
   library's adapter, `rlrun/libraries/<library>.py`, with `owner="<library>"`. State that cannot be
   put back by assignment (threads, file descriptors, one-way switches): `hermetic/watched.py`, as
   `watch(Guard(name, doc, read))`, without a restorer; the leak detector reports it, and whoever
   opened it must close it (skip step 3).
2. Build it with the first helper below that fits, and `register(...)` it at import time:
   `identity_guard` (an object replaced by assignment: `sys.stdout`), `list_guard` (a list whose
   object and contents both matter: `sys.argv`), `object_guard` (a value with a getter and a setter;
   `torch_value_guard` for a torch setting), `attributes_guard` (every attribute of a configuration
   object), or `Guard(...)` for anything else. When it reads a module that may not be imported yet,
   pass `available=module_loaded("module")`.
3. Add one realistic mutation under the guard's name to `MUTATIONS` in `tests/support.py` (in
   `FATAL_MUTATIONS` too if a training still running would break on it). Run
   `pytest tests/hermetic/test_guards.py`: `test_every_restorable_guard_has_a_mutation` fails until
   the entry exists, and `test_guard_restores_value_and_identity` checks that the guard puts back
   both the value and the object. The meddling task of `tests/api/test_contract.py` makes the
   change in the middle of a training, for every library.
4. Regenerate the docs: `python scripts/guard_docs.py > docs/guards.md`
   (`tests/hermetic/test_registry.py` fails while the page is out of date).

Each entry is a named pair, `capture() -> saved` and `restore(saved)`, in the style of CPython's
regression-test `saved_test_environment`. Entries without a restorer are watched by the leak
detector only. The hermetic scope, the leak detector, the tests and the docs all iterate over
`GUARDS`.

Rules every guard follows:
- `capture` never imports a module and never initialises CUDA; a guard whose module is not imported
  yet is skipped (`available` returns False) and reports nothing.
- `restore` only calls a setter where the value differs (some torch setters import `torch._dynamo`
  on first use), puts back the original object where the global is an object (`sys.argv` is the
  same list afterwards, not an equal one), deletes what did not exist, and may raise: the scope
  isolates every restorer.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<missing>"})()
"""Marks an attribute or key that did not exist when it was captured; restoring it deletes it."""


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Guard:
    """One guarded global: how to capture it, put it back and compare it."""

    name: str
    """Dotted name shown in reports and docs, e.g. `sys.argv` or `torch.backends.cudnn flags`."""
    doc: str
    """One line saying what is covered and how it is restored."""
    capture: Callable[[], Any]
    """Return the saved state; for mutable objects, the object itself and a copy of its contents."""
    restore: Callable[[Any], None] | None = None
    """Put the saved state back, touching only what differs; None for watch-only entries."""
    fingerprint: Callable[[Any], Any] = field(default=lambda saved: saved)
    """Map a saved state to a value that compares equal when nothing changed (for the leak detector)."""
    observe: Callable[[], Any] | None = None
    """Read the state for the leak detector without side effects; None: `capture` has none."""
    category: str = "python"
    """`python`, `logging`, `process`, `rng`, `torch`, `numpy`, `gymnasium` or a library name."""
    available: Callable[[], bool] = _always
    """False while the module this guard reads is not imported: the guard is then skipped."""
    owner: str = "rlrun"
    """`rlrun` for generic guards, else the library adapter that registered it."""

    def snapshot(self) -> Any:
        """Return the fingerprint of the current state, for the leak detector."""
        return self.fingerprint((self.observe or self.capture)())

    @property
    def restored(self) -> bool:
        """True when the scope puts this global back; False when it is only watched."""
        return self.restore is not None


GUARDS: list[Guard] = []
"""Every guard, in capture order; the scope restores in reverse order."""


def register(guard: Guard) -> Guard:
    """Add `guard` to the registry (replacing an entry with the same name) and return it."""
    for index, existing in enumerate(GUARDS):
        if existing.name == guard.name:
            GUARDS[index] = guard
            return guard
    GUARDS.append(guard)
    return guard


def unregister(name: str) -> None:
    """Remove the guard called `name`, if present."""
    GUARDS[:] = [guard for guard in GUARDS if guard.name != name]


@contextmanager
def registered(guard: Guard) -> Iterator[Guard]:
    """Register `guard` for the duration of a block (for tests and experiments)."""
    register(guard)
    try:
        yield guard
    finally:
        unregister(guard.name)


def module_loaded(*names: str) -> Callable[[], bool]:
    """Return an `available` predicate that is True once every module in `names` is imported."""
    if len(names) == 1:
        (name,) = names
        return lambda: name in sys.modules
    return lambda: all(name in sys.modules for name in names)


def identity_guard(
    name: str,
    owner_object: Any,
    attribute: str,
    *,
    doc: str,
    category: str = "python",
) -> Guard:
    """Guard an object that is replaced by assignment (`sys.stdout`, `sys.excepthook`): the same object is put back."""

    def capture() -> Any:
        return getattr(owner_object, attribute)

    def restore(saved: Any) -> None:
        if getattr(owner_object, attribute) is not saved:
            setattr(owner_object, attribute, saved)

    return Guard(name, doc, capture, restore, fingerprint=id, category=category)


def object_guard(
    name: str,
    get: Callable[[], Any],
    set: Callable[[Any], None],
    *,
    doc: str,
    category: str = "python",
    available: Callable[[], bool] = _always,
    owner: str = "rlrun",
) -> Guard:
    """Guard a value read by `get` and written by `set`, restored only where it differs."""

    def restore(saved: Any) -> None:
        if get() != saved:
            set(saved)

    return Guard(name, doc, get, restore, category=category, available=available, owner=owner)


def list_guard(
    name: str,
    owner_object: Any,
    attribute: str,
    *,
    doc: str,
    after_restore: Callable[[], None] | None = None,
) -> Guard:
    """Guard a list global (`sys.argv`, `sys.path`): the same list object and the same contents."""

    def capture() -> tuple[Any, list[Any]]:
        current = getattr(owner_object, attribute)
        return current, list(current)

    def restore(saved: tuple[Any, list[Any]]) -> None:
        original, contents = saved
        if getattr(owner_object, attribute) is not original:
            setattr(owner_object, attribute, original)
        if original != contents:
            original[:] = contents
            if after_restore is not None:
                after_restore()

    return Guard(
        name,
        doc,
        capture,
        restore,
        fingerprint=lambda saved: (id(saved[0]), tuple(map(repr, saved[1]))),
    )


def attributes_guard(
    name: str,
    get_object: Callable[[], Any],
    *,
    doc: str,
    category: str,
    available: Callable[[], bool] = _always,
    owner: str = "rlrun",
) -> Guard:
    """Guard every instance attribute of an object (read with `vars()`, never through properties).

    Attributes added during the call are deleted, changed ones get their original object back.
    """

    def capture() -> dict[str, Any]:
        return dict(vars(get_object()))

    def restore(saved: dict[str, Any]) -> None:
        target = get_object()
        current = vars(target)
        for key in [key for key in current if key not in saved]:
            delattr(target, key)
        for key, value in saved.items():
            if current.get(key, MISSING) is not value:
                setattr(target, key, value)

    return Guard(
        name,
        doc,
        capture,
        restore,
        fingerprint=lambda saved: {key: (id(value), repr(value)) for key, value in saved.items()},
        category=category,
        available=available,
        owner=owner,
    )
