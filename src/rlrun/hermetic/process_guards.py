"""The generic guards of process hooks: signal handlers, exit hooks, multiprocessing, SDL, the garbage collector.

What a call may install for the whole process: SIGINT and SIGTERM handlers, `atexit` callbacks (run at the
end of the call, as a fresh process would at exit), the multiprocessing start method and shared-memory heap,
SDL subsystems a render left running, and the collector's switches. Registered after `guards`, in this order.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import multiprocessing
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from rlrun.hermetic.registry import Guard, module_loaded, object_guard, register

_GUARDED_SIGNALS = ("SIGINT", "SIGTERM")

_P = ParamSpec("_P")
_T = TypeVar("_T")

if TYPE_CHECKING:

    class _RegisterFunction(Protocol):
        """The shape of `atexit.register`."""

        def __call__(self, func: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Callable[_P, _T]: ...


# `signal.getsignal` wraps `_signal.getsignal` and converts the handler to a `Handlers` member, which for a
# Python handler raises and catches a ValueError inside `enum`, every call. The raw handler is the same object
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

    def __init__(self, register_function: _RegisterFunction) -> None:
        self.register_function = register_function
        """What `atexit.register` was (put back at the end); an outer call's recorder when calls nest."""
        self._real: _RegisterFunction = (
            register_function._real if isinstance(register_function, _AtexitRecorder) else register_function
        )
        """The function that registers: a nested call's hooks bypass the outer recorder, which would
        otherwise count them twice and run them again at the outer call's end."""
        self.callbacks: list[tuple[Callable[..., object], tuple[object, ...], dict[str, object]]] = []

    def __call__(self, function: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> Callable[_P, _T]:
        global _recorded_registrations
        result = self._real(function, *args, **kwargs)
        self.callbacks.append((function, args, kwargs))
        _recorded_registrations += 1
        return result


def _capture_atexit() -> tuple[_RegisterFunction, _AtexitRecorder]:
    recorder = _AtexitRecorder(atexit.register)
    # The recorder's `function` may also be passed by keyword, so a hook whose own keyword arguments include
    # `function` cannot go through it; atexit.register's `func` is positional-only.
    atexit.register = recorder  # type: ignore[assignment]  # its `function` is not positional-only
    return recorder.register_function, recorder


def _restore_atexit(saved: tuple[_RegisterFunction, _AtexitRecorder]) -> None:
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
    return sys.modules["multiprocessing.heap"].BufferWrapper._heap  # the guard is available once it is imported


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
    if heap._size == size and heap._arenas == arenas:  # no arena made: the usual call, nothing to take or drop
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
