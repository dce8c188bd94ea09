"""Every restorable guard in the registry, rlrun's and every library's, puts back what a call changed, value
and identity.

`tests/support.py`'s `MUTATIONS` holds one realistic change per guard (the same table the meddling task
applies mid-training); a test fails if a restorable guard has none, so a guard cannot be added without
showing that it restores.
"""

from __future__ import annotations

import atexit
import logging

import numpy as np
import pytest
import torch
import torch._dynamo  # the dynamo limits guard reads its config

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


def test_the_tf32_getters_work_after_restoring_a_mixed_legacy_and_new_state():
    with hermetic_call() as call, call.guarded():
        MUTATIONS["torch TF32 and float32 matmul precision"]()  # the mixed legacy/new state of reference C.5
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is True


def test_deterministic_algorithms_setter_is_not_called_when_nothing_changed(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *args, **kwargs: calls.append(args))
    with hermetic_call() as call, call.guarded():
        pass
    assert calls == []


def test_cuda_is_never_initialised_to_observe_its_rng():
    with hermetic_call(check_leaks=True) as call, call.guarded():
        torch.manual_seed(3)
    assert not torch.cuda.is_initialized()


def test_atexit_callbacks_registered_during_a_call_run_at_its_end_and_are_unregistered():
    ran = []
    with hermetic_call(check_leaks=True) as call, call.guarded():
        atexit.register(ran.append, "exit hook")
    assert ran == ["exit hook"]
    assert atexit.unregister(ran.append) is None  # nothing left to unregister: idempotent either way


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


@pytest.fixture
def numpy_generator():
    """Leave NumPy's global generator to the test, and put the suite's back after it."""
    state = np.random.get_state()
    yield
    np.random.set_state(state)


@pytest.mark.usefixtures("numpy_generator")
@pytest.mark.parametrize("cached_gaussian", [False, True], ids=["no cached gaussian", "cached gaussian"])
def test_the_numpy_generator_is_put_back_however_little_the_call_drew(cached_gaussian):
    np.random.seed(5)
    if cached_gaussian:
        np.random.standard_normal()  # draws a pair and caches the second: the next draw does not move MT19937
    expected = np.random.get_state()
    with hermetic_call(check_leaks=True) as call, call.guarded():
        np.random.standard_normal()
    state = np.random.get_state()
    assert state[0] == expected[0] and np.array_equal(state[1], expected[1]) and state[2:] == expected[2:]


@pytest.mark.usefixtures("numpy_generator")
def test_an_unmoved_numpy_generator_is_not_set_again(monkeypatch):
    np.random.seed(5)  # no cached Gaussian: with one, the generator is always set back
    calls = []
    monkeypatch.setattr(np.random, "set_state", lambda state: calls.append(state))
    with hermetic_call(check_leaks=True) as call, call.guarded():
        pass
    assert calls == []
    with hermetic_call(check_leaks=False) as call, call.guarded():  # set_state is stubbed: the draw stays
        np.random.random()
    assert len(calls) == 1
