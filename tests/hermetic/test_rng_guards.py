"""`rlrun.hermetic.rng_guards`: NumPy's legacy global generator is put back however little a call drew, and
left alone when it did not move."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlrun.hermetic import hermetic_call, rng_guards


@pytest.fixture
def numpy_generator():
    """Leave NumPy's global generator to the test, and put the suite's back after it."""
    state = np.random.get_state()
    yield
    np.random.set_state(state)


@pytest.fixture(params=["read from memory", "get_state"])
def state_reading(request, monkeypatch):
    """The guard reading the generator's state from memory (this NumPy's case), or through `get_state()` (the
    fallback where the cached Gaussian's place in a `RandomState` was not found)."""
    if request.param == "get_state":
        monkeypatch.setattr(rng_guards, "_GAUSSIAN_OFFSET", [None])
    return request.param


@pytest.mark.usefixtures("numpy_generator", "state_reading")
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


def test_this_numpy_lets_the_guard_read_the_cached_gaussian_from_memory():
    """Else every call pays for `get_state()`'s copy of the whole key at capture (correct, only slower)."""
    assert rng_guards._gaussian_offset() is not None


@pytest.mark.usefixtures("numpy_generator")
@given(
    seed=st.integers(0, 2**32 - 1),
    draws=st.lists(st.sampled_from(["normal", "uniform", "set_state with a cached gaussian"]), max_size=8),
)
def test_the_state_read_from_memory_is_what_get_state_gives(seed, draws):
    """Whatever the caller drew or set (a state whose cached Gaussian it made up included), the captured state
    equals `get_state()`'s, field by field."""
    np.random.seed(seed)
    for draw in draws:
        if draw == "normal":
            np.random.standard_normal()
        elif draw == "uniform":
            np.random.random(3)
        else:
            name, key, position, _, _ = np.random.get_state()
            np.random.set_state((name, key, position, 1, seed / 7.0))
    state, _ = rng_guards._capture_numpy_rng()
    expected = np.random.get_state()
    assert state[0] == expected[0] and np.array_equal(state[1], expected[1]) and tuple(state[2:]) == expected[2:]


@pytest.mark.usefixtures("numpy_generator")
def test_an_unmoved_generator_with_a_cached_gaussian_is_not_set_again_and_a_taken_one_is_put_back(monkeypatch):
    np.random.seed(5)
    np.random.standard_normal()  # caches the second of a pair
    expected = np.random.get_state()
    set_state = np.random.set_state
    calls = []
    monkeypatch.setattr(np.random, "set_state", lambda state: calls.append(state) or set_state(state))
    with hermetic_call(check_leaks=True) as call, call.guarded():
        pass
    assert calls == []
    with hermetic_call(check_leaks=True) as call, call.guarded():
        np.random.standard_normal()  # takes the cached one: the key does not move
    assert len(calls) == 1 and np.random.get_state()[3:] == expected[3:]


CHANGES = {
    "draw uniform": lambda: np.random.random(3),  # the key moves
    "draw a pair of gaussians": lambda: np.random.standard_normal(),  # the key moves and one is cached
    "take the cached gaussian": lambda: np.random.standard_normal(),  # with one cached: the key does not move
    "make up a cached gaussian": lambda: np.random.set_state((*np.random.get_state()[:3], 1, 0.25)),
    "drop the cached gaussian": lambda: np.random.set_state((*np.random.get_state()[:3], 0, 0.0)),
    "seed": lambda: np.random.seed(123),
}


@pytest.mark.usefixtures("numpy_generator")
@pytest.mark.parametrize("cached_gaussian", [False, True], ids=["no cached gaussian", "cached gaussian"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_whatever_a_call_does_to_the_numpy_generator_get_state_gives_the_callers_state_after(
    state_reading, change, cached_gaussian
):
    """Checked by `get_state()` alone, with the leak detector off (it reads the state with the guard's own code):
    the key, the position and the cached Gaussian are the caller's again after the call."""
    np.random.seed(5)
    if cached_gaussian:
        np.random.standard_normal()
    expected = np.random.get_state()
    with hermetic_call(check_leaks=False) as call, call.guarded():
        CHANGES[change]()
        changed = np.random.get_state()
    if change != "drop the cached gaussian" or cached_gaussian:  # else that change changes nothing
        assert not (np.array_equal(changed[1], expected[1]) and changed[2:] == expected[2:])
    state = np.random.get_state()
    assert state[0] == expected[0] and np.array_equal(state[1], expected[1]) and state[2:] == expected[2:]
    after = np.random.random()  # and the stream goes on as the caller's would have
    np.random.set_state(expected)
    assert after == np.random.random()
