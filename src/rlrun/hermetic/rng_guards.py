"""The generic guards of the global random number generators: Python's `random` and NumPy's legacy one.

(Torch's generators are `torch_state`'s.) Registered after `process_guards`, in this order.
"""

from __future__ import annotations

import ctypes
import random
import sys
from typing import Any

from rlrun.hermetic.registry import Guard, module_loaded, register

register(
    Guard(
        "random",
        "The state of Python's global `random` generator (set back unconditionally: cheaper than comparing).",
        random.getstate,
        random.setstate,
        category="rng",
    )
)


def _numpy_random() -> Any:
    return sys.modules["numpy"].random


_MT19937_STATE_BYTES = 624 * 4 + 4
"""NumPy's `mt19937_state` struct: the 624-word key, then the position."""
_raw_mt19937_state_readable: list[bool] = []
"""[True] once reading the state struct has been checked against `get_state()` in this process, [False] if it failed."""


def _raw_numpy_rng_state() -> bytes | None:
    """The MT19937 state of NumPy's global generator, read from memory through the public `BitGenerator.ctypes`.

    A microsecond, against some 30 us for `get_state()` or `set_state()`, which copy the key word by word. None
    where NumPy has no `get_bit_generator`, the global generator is not an MT19937, or the struct's layout did
    not match `get_state()` when first checked.
    """
    random = _numpy_random()
    get_bit_generator = getattr(random, "get_bit_generator", None)
    if get_bit_generator is None or _raw_mt19937_state_readable == [False]:
        return None
    bit_generator = get_bit_generator()
    if type(bit_generator) is not random.MT19937:
        return None
    raw = ctypes.string_at(bit_generator.ctypes.state_address, _MT19937_STATE_BYTES)
    if not _raw_mt19937_state_readable:
        _, key, position, *_ = random.get_state()
        layout = raw[:-4] == key.tobytes() and int.from_bytes(raw[-4:], sys.byteorder, signed=True) == position
        _raw_mt19937_state_readable.append(layout)
        return raw if layout else None
    return raw


def _capture_numpy_rng() -> tuple[tuple[Any, ...], bytes | None]:
    return _numpy_random().get_state(), _raw_numpy_rng_state()


def _restore_numpy_rng(saved: tuple[tuple[Any, ...], bytes | None]) -> None:
    state, raw = saved
    # Unmoved: the same key and position, and no cached Gaussian before. (A call can only cache one by drawing
    # a pair, which moves the generator; short of `set_state` with a crafted state.) Else set it back.
    if raw is not None and not state[3] and _raw_numpy_rng_state() == raw:
        return
    _numpy_random().set_state(state)


def _numpy_rng_fingerprint(saved: tuple[tuple[Any, ...], bytes | None]) -> Any:
    name, keys, position, has_gauss, cached = saved[0]
    return name, hash(keys.tobytes()), position, has_gauss, cached


register(
    Guard(
        "numpy.random",
        "The state of NumPy's legacy global generator (`np.random.seed` and friends); set back unless its "
        "MT19937 state did not move.",
        _capture_numpy_rng,
        _restore_numpy_rng,
        fingerprint=_numpy_rng_fingerprint,
        category="rng",
        available=module_loaded("numpy"),
    )
)
