"""The generic guards of the global random number generators: Python's `random` and NumPy's legacy one.

(Torch's generators are `torch_state`'s.) Registered after `process_guards`, in this order.
"""

from __future__ import annotations

import ctypes
import random
import struct
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

    One copy of the struct, where `get_state()` and `set_state()` copy the key word by word. None
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


_GAUSSIAN_OFFSET: list[int | None] = []
"""[offset] once found where NumPy's `RandomState` keeps its cached Gaussian in its object (`has_gauss`, a C int,
and `gauss`, a double 8 bytes on), [None] where it was not found or did not match `get_state()`."""
_GAUSSIAN_CHECKED: list[bool] = []
"""[True] once the global generator's state read from memory has matched `get_state()` in this process."""


def _gaussian_offset() -> int | None:
    if not _GAUSSIAN_OFFSET:
        _GAUSSIAN_OFFSET.append(_find_gaussian_offset())
    return _GAUSSIAN_OFFSET[0]


def _find_gaussian_offset() -> int | None:
    """Find `has_gauss` and `gauss` in a private `RandomState`'s memory: after one Gaussian of a pair it caches
    the other (`has_gauss` 1, `gauss` the value `get_state()` gives), after the next it has none (0 and 0.0);
    the one slot that held both is theirs. Only `get_state()` reads them otherwise, a slow call, for it
    copies the 624-word key too. None on any doubt: another interpreter than CPython, another layout."""
    random = _numpy_random()
    if sys.implementation.name != "cpython" or not isinstance(getattr(random, "RandomState", None), type):
        return None
    try:
        probe = random.RandomState(0)
        size = type(probe).__basicsize__
        snapshots = []
        for _ in range(2):
            probe.standard_normal()
            snapshots.append((tuple(probe.get_state()[3:]), ctypes.string_at(id(probe), size)))
    except Exception:  # a NumPy without these methods: get_state() it is
        return None
    (cached, with_cached), (none, without) = snapshots
    if cached[0] != 1 or none != (0, 0.0):
        return None
    found = [
        offset
        for offset in range(0, size - 15, 8)
        if _unpack_gaussian(with_cached[offset : offset + 16]) == cached
        and _unpack_gaussian(without[offset : offset + 16]) == none
    ]
    return found[0] if len(found) == 1 else None


def _unpack_gaussian(memory: bytes) -> tuple[int, float]:
    return struct.unpack_from("=i", memory)[0], struct.unpack_from("=d", memory, 8)[0]


def _global_gaussian() -> tuple[int, float] | None:
    """`has_gauss` and `gauss` of NumPy's global `RandomState`, read from its memory (see `_find_gaussian_offset`);
    None where they cannot be."""
    random = _numpy_random()
    generator = getattr(getattr(random, "mtrand", None), "_rand", None)
    offset = _gaussian_offset()
    if offset is None or type(generator) is not random.RandomState:
        return None
    return _unpack_gaussian(ctypes.string_at(id(generator) + offset, 16))


def _capture_numpy_rng() -> tuple[tuple[Any, ...], bytes | None]:
    """The legacy `get_state()` tuple and the raw MT19937 state. Where both the raw state and the cached Gaussian
    can be read from memory (checked against `get_state()` at the first capture), the tuple is built from them,
    which is much faster than `get_state()`."""
    raw = _raw_numpy_rng_state()
    gaussian = _global_gaussian() if raw is not None else None
    if raw is None or gaussian is None:
        return _numpy_random().get_state(), raw
    key = sys.modules["numpy"].frombuffer(raw, dtype="uint32", count=624)
    state = ("MT19937", key, int.from_bytes(raw[-4:], sys.byteorder, signed=True), *gaussian)
    if not _GAUSSIAN_CHECKED:
        legacy = _numpy_random().get_state()
        if legacy[1].tobytes() != raw[:-4] or tuple(legacy[2:]) != state[2:]:
            _GAUSSIAN_OFFSET[:] = [None]
            return legacy, raw
        _GAUSSIAN_CHECKED.append(True)
    return state, raw


def _restore_numpy_rng(saved: tuple[tuple[Any, ...], bytes | None]) -> None:
    state, raw = saved
    # Unmoved: the same key, position and cached Gaussian. Where the cached Gaussian cannot be read, the state is
    # set back whatever it is (a call can take, drop or make up a cached Gaussian without moving the key).
    if raw is not None and _raw_numpy_rng_state() == raw:
        gaussian = _global_gaussian()
        if gaussian is not None and gaussian == tuple(state[3:]):
            return
    _numpy_random().set_state(state)


def _numpy_rng_fingerprint(saved: tuple[tuple[Any, ...], bytes | None]) -> Any:
    name, keys, position, has_gauss, cached = saved[0]
    return name, hash(keys.tobytes()), position, has_gauss, cached


register(
    Guard(
        "numpy.random",
        "The state of NumPy's legacy global generator (`np.random.seed` and friends); set back unless its "
        "MT19937 state and cached Gaussian did not move.",
        _capture_numpy_rng,
        _restore_numpy_rng,
        fingerprint=_numpy_rng_fingerprint,
        category="rng",
        available=module_loaded("numpy"),
    )
)
