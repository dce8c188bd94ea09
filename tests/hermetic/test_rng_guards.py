"""`rlrun.hermetic.rng_guards`: NumPy's legacy global generator is put back however little a call drew, and
left alone when it did not move."""

from __future__ import annotations

import numpy as np
import pytest

from rlrun.hermetic import hermetic_call


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
