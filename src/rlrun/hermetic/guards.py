"""The generic guards: process-global state that any call may change, whatever the library.

Registered in this order on import; the scope captures in this order and restores in reverse.
Torch's guards are in `torch_state`, the watch-only entries in `watched`; library adapters add their
own guards (for example SKRL's config singleton) with `register`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import logging
import multiprocessing
import operator
import os
import random
import signal
import sys
import threading
import warnings
from typing import Any

from rlrun.hermetic.registry import MISSING, Guard, identity_guard, list_guard, module_loaded, object_guard, register

# --- Python runtime -----------------------------------------------------------------------------------------

register(list_guard("sys.argv", sys, "argv", doc="The `sys.argv` list object and its contents."))
register(
    list_guard(
        "sys.path",
        sys,
        "path",
        doc="The `sys.path` list object and its contents.",
        after_restore=lambda: __import__("importlib").invalidate_caches(),
    )
)
register(list_guard("sys.meta_path", sys, "meta_path", doc="The import finders on `sys.meta_path`."))
register(list_guard("sys.path_hooks", sys, "path_hooks", doc="The path entry hooks on `sys.path_hooks`."))


def _capture_environ() -> tuple[Any, dict[Any, Any]]:
    # The raw (encoded) mapping is ten times cheaper to copy than decoding every item.
    return os.environ, dict(getattr(os.environ, "_data", os.environ))


def _restore_environ(saved: tuple[Any, dict[Any, Any]]) -> None:
    original, raw = saved
    if os.environ is not original:
        os.environ = original  # noqa: B003 - puts the original mapping object back
    if getattr(original, "_data", original) == raw:
        return
    decode = getattr(original, "decodekey", lambda key: key), getattr(original, "decodevalue", lambda v: v)
    contents = {decode[0](key): decode[1](value) for key, value in raw.items()}
    for key in [key for key in original if key not in contents]:
        del original[key]
    for key, value in contents.items():
        if original.get(key) != value:
            original[key] = value


def _environ_fingerprint(saved: tuple[Any, dict[Any, Any]]) -> Any:
    original, raw = saved
    decode = getattr(original, "decodekey", lambda key: key), getattr(original, "decodevalue", lambda v: v)
    return {decode[0](key): decode[1](value) for key, value in raw.items()} | {"<object>": id(original)}


register(
    Guard(
        "os.environ",
        "Environment variables: added ones deleted, changed and deleted ones put back.",
        _capture_environ,
        _restore_environ,
        fingerprint=_environ_fingerprint,
        category="process",
    )
)


def _getcwd() -> str | None:
    try:
        return os.getcwd()
    except FileNotFoundError:  # the working directory was deleted under us
        return None


def _chdir(path: str | None) -> None:
    if path is not None:
        os.chdir(path)


register(object_guard("cwd", _getcwd, _chdir, doc="The working directory.", category="process"))


for _stream in ("stdin", "stdout", "stderr"):
    register(
        identity_guard(
            f"sys.{_stream}",
            sys,
            _stream,
            doc=f"The `sys.{_stream}` object (the CLI's progress display redirects stdout inside the call).",
        )
    )
for _hook in ("excepthook", "displayhook", "unraisablehook"):
    register(identity_guard(f"sys.{_hook}", sys, _hook, doc=f"The `sys.{_hook}` function."))
register(identity_guard("threading.excepthook", threading, "excepthook", doc="The `threading.excepthook` function."))
register(object_guard("sys.recursionlimit", sys.getrecursionlimit, sys.setrecursionlimit, doc="The recursion limit."))
register(
    object_guard("sys.switchinterval", sys.getswitchinterval, sys.setswitchinterval, doc="The thread switch interval.")
)

# --- warnings and logging -----------------------------------------------------------------------------------


def _capture_warnings() -> tuple[Any, list[Any], Any, Any]:
    return warnings.filters, list(warnings.filters), warnings.showwarning, warnings.formatwarning


def _restore_warnings(saved: tuple[Any, list[Any], Any, Any]) -> None:
    filters, contents, showwarning, formatwarning = saved
    changed = warnings.filters is not filters or filters != contents
    if warnings.filters is not filters:
        warnings.filters = filters
    if filters != contents:
        filters[:] = contents
    if changed:
        getattr(warnings, "_filters_mutated", lambda: None)()
    if warnings.showwarning is not showwarning:
        warnings.showwarning = showwarning
    if warnings.formatwarning is not formatwarning:
        warnings.formatwarning = formatwarning


register(
    Guard(
        "warnings",
        "`warnings.filters` (the list object and its contents), `showwarning` and `formatwarning`.",
        _capture_warnings,
        _restore_warnings,
        fingerprint=lambda saved: (id(saved[0]), tuple(map(repr, saved[1])), id(saved[2]), id(saved[3])),
        category="logging",
    )
)

_LoggerState = tuple[int, tuple[logging.Handler, ...], bool, bool]
_NEW_LOGGER_STATE: _LoggerState = (logging.NOTSET, (), True, False)
_SavedLogging = tuple[int, list[logging.Logger], list[_LoggerState]]
_loggers: list[list[Any]] = [[], []]
"""The last `loggerDict` values seen (root first) and the loggers among them (not placeholders)."""


def _current_loggers() -> list[logging.Logger]:
    """Root and every logger, without placeholders; the filtered list is reused while `loggerDict` is unchanged."""
    root = logging.root
    values = [root, *root.manager.loggerDict.values()]
    seen, loggers = _loggers
    if values != seen:  # compares by identity first: cheap when nothing was added or replaced
        placeholder = logging.PlaceHolder
        loggers = [logger for logger in values if logger.__class__ is not placeholder]
        _loggers[:] = [values, loggers]
    return loggers


def _capture_logging() -> _SavedLogging:
    # Flat lists that compare equal in C when nothing changed: a process with every library imported has some
    # 400 loggers, and this walk runs twice per call.
    loggers = _current_loggers()
    states = [(logger.level, tuple(logger.handlers), logger.propagate, logger.disabled) for logger in loggers]
    return logging.root.manager.disable, loggers, states


def _states_by_name(saved: _SavedLogging) -> dict[str, _LoggerState]:
    """The saved state of each logger by name (the root's under `""`)."""
    _, loggers, states = saved
    names = ["" if logger is logging.root else logger.name for logger in loggers]
    return dict(zip(names, states, strict=True))


def _restore_logging(saved: _SavedLogging) -> None:
    if _capture_logging() == saved:
        return
    disable = saved[0]
    states = _states_by_name(saved)
    manager = logging.root.manager
    if manager.disable != disable:
        logging.disable(disable)
    loggers = {name: logger for name, logger in list(manager.loggerDict.items()) if isinstance(logger, logging.Logger)}
    loggers[""] = logging.root
    for name, logger in loggers.items():
        # A logger created during the call cannot be deleted safely; it gets a new logger's state.
        level, handlers, propagate, disabled = states.get(name, _NEW_LOGGER_STATE)
        if logger.level != level:
            logger.setLevel(level)
        if tuple(logger.handlers) != handlers:
            logger.handlers[:] = handlers
        logger.propagate, logger.disabled = propagate, disabled
    manager._clear_cache()  # levels set behind setLevel's back (logger.level = ...) leave stale caches


def _logging_fingerprint(saved: _SavedLogging) -> Any:
    return {"<disable>": saved[0]} | {
        name or "<root>": (logging.getLevelName(level), tuple(map(repr, handlers)), propagate, disabled)
        for name, (level, handlers, propagate, disabled) in _states_by_name(saved).items()
        if name == "" or (level, handlers, propagate, disabled) != _NEW_LOGGER_STATE
    }


register(
    Guard(
        "logging",
        "Root and every named logger: level, handlers, propagate, disabled; `logging.disable` level. "
        "Loggers created during the call are reset to a new logger's state.",
        _capture_logging,
        _restore_logging,
        fingerprint=_logging_fingerprint,
        category="logging",
    )
)

# --- process hooks ------------------------------------------------------------------------------------------

_GUARDED_SIGNALS = ("SIGINT", "SIGTERM")


# `signal.getsignal` wraps `_signal.getsignal` and converts the handler to a `Handlers` member, which for a
# Python handler raises and catches a ValueError inside `enum` (2 us a call). The raw handler is the same object
# on every read (`SIG_DFL` and `SIG_IGN` as the module's own ints) and `signal.signal` takes it back as it is.
_getsignal = getattr(sys.modules.get("_signal"), "getsignal", signal.getsignal)


def capture_signals(names: tuple[str, ...]) -> dict[str, Any]:
    """The handlers of the signals called `names` (those this platform has)."""
    return {name: _getsignal(getattr(signal, name)) for name in names if hasattr(signal, name)}


def _restore_signals(saved: dict[str, Any]) -> None:
    for name, handler in saved.items():
        number = getattr(signal, name)
        if _getsignal(number) is not handler and handler is not None:
            signal.signal(number, handler)


register(
    Guard(
        "signal handlers",
        "The SIGINT and SIGTERM handlers (restored from the main thread).",
        lambda: capture_signals(_GUARDED_SIGNALS),
        _restore_signals,
        fingerprint=lambda saved: {name: id(handler) for name, handler in saved.items()},
        category="process",
    )
)


_recorded_registrations = 0
"""How many exit hooks went through a recorder in this process (they are unregistered after each call)."""


def unrecorded_exit_hooks() -> int:
    """How many exit hooks are registered that did not go through a call's recorder (watched in `watched`)."""
    # CPython's counter does not go down on unregister; hooks that went through a recorder are subtracted.
    return atexit._ncallbacks() - _recorded_registrations


class _AtexitRecorder:
    """Stands in for `atexit.register` during a call and remembers what the call registered."""

    def __init__(self, register_function: Any) -> None:
        self.register_function = register_function
        """What `atexit.register` was (put back at the end); an outer call's recorder when calls nest."""
        self._real = register_function._real if isinstance(register_function, _AtexitRecorder) else register_function
        """The function that registers: a nested call's hooks bypass the outer recorder, which would
        otherwise count them twice and run them again at the outer call's end."""
        self.callbacks: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        global _recorded_registrations
        result = self._real(function, *args, **kwargs)
        self.callbacks.append((function, args, kwargs))
        _recorded_registrations += 1
        return result


def _capture_atexit() -> tuple[Any, _AtexitRecorder]:
    recorder = _AtexitRecorder(atexit.register)
    atexit.register = recorder
    return recorder.register_function, recorder


def _restore_atexit(saved: tuple[Any, _AtexitRecorder]) -> None:
    register_function, recorder = saved
    atexit.register = register_function
    # What the call registered would have run when a fresh process exits: run it now, newest first.
    failures = []
    for function, args, kwargs in reversed(recorder.callbacks):
        atexit.unregister(function)
        try:
            function(*args, **kwargs)
        except Exception as error:  # an exit hook that fails at exit is only printed, not raised
            failures.append(f"{getattr(function, '__qualname__', function)!s}: {error!r}")
    recorder.callbacks.clear()
    if failures:
        raise RuntimeError("atexit callbacks registered during the call failed: " + "; ".join(failures))


register(
    Guard(
        "atexit.register",
        "The `atexit.register` function, and the exit hooks registered through it during the call: run at the "
        "end of the call (as a fresh process would at exit), then unregistered. Hooks added any other way are "
        "reported (`atexit callbacks`).",
        _capture_atexit,
        _restore_atexit,
        observe=lambda: atexit.register,
        fingerprint=lambda saved: getattr(saved, "__qualname__", repr(saved)),
        category="process",
    )
)


def _set_start_method(method: str | None) -> None:
    multiprocessing.set_start_method(method, force=True)


register(
    object_guard(
        "multiprocessing start method",
        lambda: multiprocessing.get_start_method(allow_none=True),
        _set_start_method,
        doc="`multiprocessing.get_start_method(allow_none=True)`; put back with `force=True`.",
        category="process",
    )
)


def _shared_memory_heap() -> Any:
    import multiprocessing.heap

    return multiprocessing.heap.BufferWrapper._heap


def _capture_shared_memory() -> tuple[Any, list[Any], int]:
    heap = _shared_memory_heap()
    return heap, list(heap._arenas), heap._size


def _restore_shared_memory(saved: tuple[Any, list[Any], int]) -> None:
    """Drop the arenas the call made that nothing uses any more. CPython keeps a free arena under 4 MiB for
    later use, with its `/dev/shm` file open twice (its descriptor and mmap's duplicate); dropping the heap's
    references closes both, as a fresh process would not have them. Arenas still in use are left to the
    leak detector (the open files are reported)."""
    heap, arenas, size = saved
    if _shared_memory_heap() is not heap:  # a forked child made its own heap
        return
    known = {id(arena) for arena in arenas}
    with heap._lock:
        heap._free_pending_blocks()
        for arena in [arena for arena in heap._arenas if id(arena) not in known]:
            if heap._allocated_blocks.get(arena):
                continue
            heap._allocated_blocks.pop(arena, None)
            heap._start_to_block.pop((arena, 0), None)
            heap._stop_to_block.pop((arena, arena.size), None)
            heap._arenas.remove(arena)
            sequence = heap._len_to_seq.get(arena.size, [])
            if (arena, 0, arena.size) in sequence:
                sequence.remove((arena, 0, arena.size))
            if not sequence and arena.size in heap._len_to_seq:
                del heap._len_to_seq[arena.size]
                heap._lengths.remove(arena.size)
        heap._size = size


register(
    Guard(
        "multiprocessing shared-memory heap",
        "The arenas of `multiprocessing.heap` (shared ctypes, Gymnasium's async vector envs): free arenas the "
        "call made are dropped, which closes their `/dev/shm` files; the next arena size is put back.",
        _capture_shared_memory,
        _restore_shared_memory,
        fingerprint=lambda saved: (id(saved[0]), tuple(id(arena) for arena in saved[1]), saved[2]),
        category="process",
        available=module_loaded("multiprocessing.heap"),
    )
)


_SDL: list[Any] = []


def _sdl() -> Any | None:
    """The SDL library pygame loaded, through ctypes (already in the process: nothing new is loaded), or None
    where it cannot be found (no /proc, a pygame linked otherwise)."""
    if not _SDL:
        library = None
        with contextlib.suppress(OSError, StopIteration):
            with open("/proc/self/maps") as maps:
                path = next(line.split()[-1] for line in maps if "/libSDL2-2" in line)
            library = ctypes.CDLL(path)
            library.SDL_WasInit.restype = ctypes.c_uint32
            library.SDL_WasInit.argtypes = [ctypes.c_uint32]
        _SDL.append(library)
    return _SDL[0]


def _capture_sdl() -> int:
    sdl = _sdl()
    return int(sdl.SDL_WasInit(0)) if sdl is not None else 0


def _restore_sdl(subsystems: int) -> None:
    """Shut down the SDL subsystems a render left running. Gymnasium's classic-control renders call
    `pygame.display.init()` and close with `pygame.quit()`, which shuts SDL down only after `pygame.init()`: SDL's
    timer subsystem, and its native thread, would outlive the call. `SDL_Quit` joins that thread."""
    sdl = _sdl()
    if sdl is None or subsystems or sys.modules["pygame"].get_init() or not sdl.SDL_WasInit(0):
        return
    sdl.SDL_Quit()


register(
    Guard(
        "SDL subsystems (pygame)",
        "The SDL subsystems initialised (`SDL_WasInit`): where none were before the call and pygame is not "
        "initialised after it, `SDL_Quit` stops what a render left running (SDL's timer thread).",
        _capture_sdl,
        _restore_sdl,
        category="process",
        available=module_loaded("pygame"),
    )
)


def _capture_gc() -> tuple[bool, tuple[int, ...]]:
    return gc.isenabled(), gc.get_threshold()


def _restore_gc(saved: tuple[bool, tuple[int, ...]]) -> None:
    enabled, threshold = saved
    if gc.get_threshold() != threshold:
        gc.set_threshold(*threshold)
    if gc.isenabled() != enabled:
        (gc.enable if enabled else gc.disable)()


register(
    Guard(
        "garbage collector",
        "`gc.isenabled()` and `gc.get_threshold()`.",
        _capture_gc,
        _restore_gc,
        category="process",
    )
)

# --- global random number generators ------------------------------------------------------------------------

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


def _numpy_options() -> tuple[dict[str, Any], dict[str, Any]]:
    numpy = sys.modules["numpy"]
    return numpy.geterr(), numpy.get_printoptions()


def _restore_numpy_options(saved: tuple[dict[str, Any], dict[str, Any]]) -> None:
    numpy = sys.modules["numpy"]
    errors, printoptions = saved
    if numpy.geterr() != errors:
        numpy.seterr(**errors)
    if numpy.get_printoptions() != printoptions:
        numpy.set_printoptions(**printoptions)


register(
    Guard(
        "numpy error and print options",
        "`np.geterr()` and `np.get_printoptions()`.",
        _numpy_options,
        _restore_numpy_options,
        fingerprint=lambda saved: (tuple(sorted(saved[0].items())), repr(sorted(saved[1].items()))),
        category="numpy",
        available=module_loaded("numpy"),
    )
)

# --- Gymnasium ----------------------------------------------------------------------------------------------


def _capture_gymnasium() -> tuple[dict[str, Any], Any, Any]:
    registration = sys.modules["gymnasium.envs.registration"]
    logger = sys.modules["gymnasium.logger"]
    return dict(registration.registry), registration.current_namespace, logger.min_level


def _restore_gymnasium(saved: tuple[dict[str, Any], Any, Any]) -> None:
    registration = sys.modules["gymnasium.envs.registration"]
    registry, namespace, min_level = saved
    current = registration.registry
    if current.keys() != registry.keys() or not all(map(operator.is_, current.values(), registry.values())):
        current.clear()
        current.update(registry)
    if registration.current_namespace != namespace:
        registration.current_namespace = namespace
    logger = sys.modules["gymnasium.logger"]
    if logger.min_level != min_level:
        logger.min_level = min_level


register(
    Guard(
        "gymnasium registry",
        "Gymnasium's environment registry (ids and spec objects), `current_namespace` and `logger.min_level`.",
        _capture_gymnasium,
        _restore_gymnasium,
        fingerprint=lambda saved: ({key: id(spec) for key, spec in saved[0].items()}, saved[1], saved[2]),
        category="gymnasium",
        available=module_loaded("gymnasium.envs.registration", "gymnasium.logger"),
    )
)

_ = MISSING  # re-exported for guards written elsewhere
