"""Every restorable guard in the registry, rlrun's and every library's, puts back what a call changed, value
and identity; and the guards of `rlrun.hermetic.guards` (runtime, warnings, logging) in their corner cases.
The others' corner cases: test_process_guards.py, test_rng_guards.py, test_torch_state.py, test_scope.py.

`tests/support.py`'s `MUTATIONS` holds one realistic change per guard (the same table the meddling task
applies mid-training); a test fails if a restorable guard has none, so a guard cannot be added without
showing that it restores.
"""

from __future__ import annotations

import logging

import pytest

from rlrun.hermetic import GUARDS, census, hermetic_call
from rlrun.libraries import LIBRARIES
from support import FATAL_MUTATIONS, MUTATIONS, import_adapters, import_library


def test_every_restorable_guard_has_a_mutation():
    """Every guard, rlrun's and every library adapter's, has its entry in the one table; no entry is stale."""
    import_adapters()  # registers the library guards (the libraries themselves are not imported)
    restorable = {guard.name for guard in GUARDS if guard.restored}
    assert restorable - set(MUTATIONS) == set(), "add a mutation to MUTATIONS in tests/support.py"
    assert set(MUTATIONS) - restorable == set(), "a mutation for a guard that no longer exists"
    assert set(MUTATIONS) >= FATAL_MUTATIONS


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_guard_restores_value_and_identity(name, monkeypatch):
    import_adapters()
    (guard,) = [guard for guard in GUARDS if guard.name == name]
    if guard.owner != "rlrun":
        pytest.importorskip(LIBRARIES[guard.owner].import_name)
        import_library(guard.owner)
        if not guard.available():
            pytest.skip(f"{name} reads a module that is not installed")
    if name == "mujoco warning callback":
        pytest.importorskip("mujoco")
    if name == "SDL subsystems (pygame)":  # a render outside rlrun (another test's) may have left SDL running
        import pygame

        from rlrun.hermetic.process_guards import _capture_sdl, _sdl

        if _capture_sdl():
            pygame.quit()
            _sdl().SDL_Quit()
    monkeypatch.setenv("RLRUN_TEST_SENTINEL", "caller")  # so that the mutation changes and deletes variables too
    monkeypatch.setenv("RLRUN_TEST_DELETED", "caller")
    before = census.snapshot()
    with hermetic_call(check_leaks=True) as call, call.guarded():
        MUTATIONS[name]()
        assert guard.snapshot() != before[name], "the mutation did not change what the guard covers"
    assert census.compare(before, census.snapshot()) == []


def test_a_logger_that_replaces_a_placeholder_during_the_call_gets_a_new_loggers_state():
    logging.getLogger("rlrun_test.placeholder.child")  # makes `rlrun_test.placeholder` a placeholder
    before = census.snapshot()
    with hermetic_call(check_leaks=True) as call, call.guarded():
        replaced = logging.getLogger("rlrun_test.placeholder")
        replaced.setLevel(logging.DEBUG)
        replaced.addHandler(logging.NullHandler())
    assert (replaced.level, replaced.handlers) == (logging.NOTSET, [])
    assert census.compare(before, census.snapshot()) == []


def test_a_handler_list_changed_in_place_is_put_back():
    logger = logging.getLogger("rlrun_test.in_place")
    handler = logging.NullHandler()
    logger.addHandler(handler)
    try:
        with hermetic_call(check_leaks=True) as call, call.guarded():
            logger.handlers[0] = logging.NullHandler()
            logger.level = logging.ERROR  # behind setLevel's back
        assert logger.handlers == [handler] and logger.level == logging.NOTSET
    finally:
        logger.removeHandler(handler)
