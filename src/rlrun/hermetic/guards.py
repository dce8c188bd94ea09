"""The generic guards of the Python runtime: `sys` state, environment, working directory, warnings, logging.

Registered on import, in this order, first of all guards; then come the process hooks (`process_guards`), the
global RNGs (`rng_guards`), NumPy's and Gymnasium's module state (`package_guards`), torch (`torch_state`) and
the watch-only entries (`watched`), in the order `rlrun.hermetic` imports them. The scope captures in that order
and restores in reverse. Library adapters add their own guards (for example SKRL's config singleton) with
`register`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from typing import Any

from rlrun.hermetic.registry import MISSING, Guard, identity_guard, list_guard, object_guard, register

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
    # Flat lists that compare equal in C when nothing changed: a process with every library imported has
    # hundreds of loggers, and this walk runs twice per call.
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
    # Levels set behind setLevel's back (logger.level = ...) leave stale caches.
    manager._clear_cache()  # type: ignore[attr-defined]  # private Manager method, absent from typeshed


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

_ = MISSING  # re-exported for guards written elsewhere
