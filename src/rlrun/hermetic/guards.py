"""The generic guards: process-global state that any call may change, whatever the library.

Registered in this order on import; the scope captures in this order and restores in reverse.
Library adapters add their own guards (for example SKRL's config singleton) with `register`.
"""

from __future__ import annotations

import atexit
import gc
import logging
import multiprocessing
import os
import random
import signal
import sys
import threading
import warnings
from typing import Any

from rlrun.hermetic.registry import MISSING, Guard, list_guard, module_loaded, object_guard, register

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


def _set_stream(name: str) -> Any:
    return lambda value: setattr(sys, name, value)


for _stream in ("stdin", "stdout", "stderr"):
    register(
        Guard(
            f"sys.{_stream}",
            f"The `sys.{_stream}` object (the CLI's progress display redirects stdout inside the call).",
            lambda _stream=_stream: getattr(sys, _stream),
            lambda saved, _stream=_stream: None if getattr(sys, _stream) is saved else setattr(sys, _stream, saved),
            fingerprint=id,
        )
    )

for _hook in ("excepthook", "displayhook", "unraisablehook"):
    register(
        Guard(
            f"sys.{_hook}",
            f"The `sys.{_hook}` function.",
            lambda _hook=_hook: getattr(sys, _hook),
            lambda saved, _hook=_hook: None if getattr(sys, _hook) is saved else setattr(sys, _hook, saved),
            fingerprint=id,
        )
    )
register(
    Guard(
        "threading.excepthook",
        "The `threading.excepthook` function.",
        lambda: threading.excepthook,
        lambda saved: None if threading.excepthook is saved else setattr(threading, "excepthook", saved),
        fingerprint=id,
    )
)
register(object_guard("sys.recursionlimit", sys.getrecursionlimit, sys.setrecursionlimit, doc="The recursion limit."))
register(
    object_guard("sys.switchinterval", sys.getswitchinterval, sys.setswitchinterval, doc="The thread switch interval.")
)
register(
    Guard(
        "sys trace and profile hooks",
        "`sys.gettrace()` and `sys.getprofile()` of the calling thread (watched: debuggers and coverage own them).",
        lambda: (sys.gettrace(), sys.getprofile()),
        fingerprint=lambda saved: tuple(map(id, saved)),
    )
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


def _capture_logging() -> tuple[int, dict[str, _LoggerState]]:
    manager = logging.root.manager
    placeholder = logging.PlaceHolder
    states = {
        name: (logger.level, tuple(logger.handlers), logger.propagate, logger.disabled)
        for name, logger in list(manager.loggerDict.items())
        if logger.__class__ is not placeholder
    }
    root = logging.root
    states[""] = (root.level, tuple(root.handlers), root.propagate, root.disabled)
    return manager.disable, states


def _restore_logging(saved: tuple[int, dict[str, _LoggerState]]) -> None:
    if _capture_logging() == saved:
        return
    disable, states = saved
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


def _logging_fingerprint(saved: tuple[int, dict[str, _LoggerState]]) -> Any:
    disable, states = saved
    return {"<disable>": disable} | {
        name or "<root>": (logging.getLevelName(level), tuple(map(repr, handlers)), propagate, disabled)
        for name, (level, handlers, propagate, disabled) in states.items()
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
_WATCHED_SIGNALS = ("SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGPIPE")


def _capture_signals(names: tuple[str, ...]) -> dict[str, Any]:
    return {name: signal.getsignal(getattr(signal, name)) for name in names if hasattr(signal, name)}


def _restore_signals(saved: dict[str, Any]) -> None:
    for name, handler in saved.items():
        number = getattr(signal, name)
        if signal.getsignal(number) is not handler and handler is not None:
            signal.signal(number, handler)


register(
    Guard(
        "signal handlers",
        "The SIGINT and SIGTERM handlers (restored from the main thread).",
        lambda: _capture_signals(_GUARDED_SIGNALS),
        _restore_signals,
        fingerprint=lambda saved: {name: id(handler) for name, handler in saved.items()},
        category="process",
    )
)
register(
    Guard(
        "other signal handlers",
        "SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD and SIGPIPE handlers (watched).",
        lambda: _capture_signals(_WATCHED_SIGNALS),
        fingerprint=lambda saved: {name: id(handler) for name, handler in saved.items()},
        category="process",
    )
)


_recorded_registrations = 0
"""How many exit hooks went through a recorder in this process (they are unregistered after each call)."""


class _AtexitRecorder:
    """Stands in for `atexit.register` during a call and remembers what the call registered."""

    def __init__(self, register_function: Any) -> None:
        self.register_function = register_function
        self.callbacks: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        global _recorded_registrations
        result = self.register_function(function, *args, **kwargs)
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
        "atexit callbacks",
        "Exit hooks registered during the call through `atexit.register`: run at the end of the call "
        "(as a fresh process would at exit), then unregistered. Hooks added any other way are reported.",
        _capture_atexit,
        _restore_atexit,
        # CPython's counter does not go down on unregister; hooks that went through a recorder are subtracted.
        observe=lambda: (atexit.register, atexit._ncallbacks() - _recorded_registrations),
        fingerprint=lambda saved: (getattr(saved[0], "__qualname__", repr(saved[0])), saved[1]),
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
register(
    Guard(
        "garbage collector freeze",
        "`gc.get_freeze_count()` (watched: objects moved to the permanent generation stay there).",
        gc.get_freeze_count,
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


def _restore_numpy_rng(saved: tuple[Any, ...]) -> None:
    _numpy_random().set_state(saved)


def _numpy_rng_fingerprint(saved: tuple[Any, ...]) -> Any:
    name, keys, position, has_gauss, cached = saved
    return name, hash(keys.tobytes()), position, has_gauss, cached


register(
    Guard(
        "numpy.random",
        "The state of NumPy's legacy global generator (`np.random.seed` and friends).",
        lambda: _numpy_random().get_state(),
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
    if current.keys() != registry.keys() or any(current[key] is not spec for key, spec in registry.items()):
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
        available=lambda: "gymnasium.envs.registration" in sys.modules and "gymnasium.logger" in sys.modules,
    )
)

_ = MISSING  # re-exported for guards written elsewhere
