"""The watch-only entries: process state that a call must not change but that cannot be put back by assignment.

A thread has to be stopped, a file closed, a child process reaped, by the code that started it; CUDA
initialisation and torch's inter-op thread count are one-way. These entries have no restorer: the
scope never captures them, and the leak detector (`census`) reports any difference as
"X was modified by the call: before -> after". Registered after every restorable guard.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from typing import Any

from rlrun.hermetic.process_guards import capture_signals, unrecorded_exit_hooks
from rlrun.hermetic.registry import Guard, module_loaded, register

_torch_loaded = module_loaded("torch")

ENTRIES: list[Guard] = []
"""rlrun's watch-only entries, all of them (a test checks that none is registered elsewhere)."""


def watch(guard: Guard) -> Guard:
    """Register a watch-only entry (a `Guard` without a restorer) and list it in `ENTRIES`."""
    if guard.restored:
        raise ValueError(f"{guard.name} has a restorer: register it with the guards, not here")
    ENTRIES.append(register(guard))
    return guard


def _torch() -> Any:
    return sys.modules["torch"]


# --- Python runtime and process -----------------------------------------------------------------------------


def _threads() -> frozenset[tuple[int | None, str]]:
    return frozenset((thread.ident, thread.name) for thread in threading.enumerate())


def _open_files() -> frozenset[tuple[int, str]]:
    directory = f"/proc/{os.getpid()}/fd"
    if not os.path.isdir(directory):
        return frozenset()
    files = set()
    for entry in os.listdir(directory):
        try:
            target = os.readlink(f"{directory}/{entry}")
        except OSError:  # closed meanwhile, or the listing's own descriptor
            continue
        if target != directory:
            files.add((int(entry), target))
    return frozenset(files)


def _working_directory_files() -> frozenset[str]:
    """The names of the files (not folders: a call makes its log root there) in the working directory."""
    try:
        with os.scandir(".") as entries:
            return frozenset(entry.name for entry in entries if not entry.is_dir(follow_symlinks=False))
    except OSError:
        return frozenset()


def _child_processes() -> frozenset[int]:
    children: set[int] = set()
    task_directory = f"/proc/{os.getpid()}/task"
    if os.path.isdir(task_directory):
        for task in os.listdir(task_directory):
            try:
                with open(f"{task_directory}/{task}/children") as listing:
                    children.update(int(pid) for pid in listing.read().split())
            except OSError:
                continue
    return frozenset(children)


_WATCHED_SIGNALS = ("SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGPIPE")

watch(
    Guard(
        "sys trace and profile hooks",
        "`sys.gettrace()` and `sys.getprofile()` of the calling thread (watched: debuggers and coverage own them).",
        lambda: (sys.gettrace(), sys.getprofile()),
        fingerprint=lambda saved: tuple(map(id, saved)),
    )
)
watch(
    Guard(
        "other signal handlers",
        "SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD and SIGPIPE handlers (watched).",
        lambda: capture_signals(_WATCHED_SIGNALS),
        fingerprint=lambda saved: {name: id(handler) for name, handler in saved.items()},
        category="process",
    )
)
watch(
    Guard(
        "atexit callbacks",
        "How many exit hooks are registered behind `atexit.register`'s back (watched: the hooks registered "
        "through it during a call are run and unregistered by the `atexit.register` guard).",
        unrecorded_exit_hooks,
        category="process",
    )
)
watch(
    Guard(
        "garbage collector freeze",
        "`gc.get_freeze_count()` (watched: objects moved to the permanent generation stay there).",
        gc.get_freeze_count,
        category="process",
    )
)
watch(
    Guard(
        "threads",
        "Python threads alive after the call (watched: whoever starts a thread must stop it).",
        _threads,
        category="process",
    )
)
watch(
    Guard(
        "open file descriptors",
        "This process's open file descriptors and what they point to (watched; Linux `/proc`).",
        _open_files,
        category="process",
    )
)
watch(
    Guard(
        "files in the working directory",
        "The names of the files, not folders, in the working directory (watched: a call writes only under its "
        "log root; MuJoCo's `MUJOCO_LOG.TXT` is the usual stray).",
        _working_directory_files,
        category="process",
    )
)
watch(
    Guard(
        "child processes",
        "Live child processes of this process (watched; Linux `/proc`).",
        _child_processes,
        category="process",
    )
)

# --- torch --------------------------------------------------------------------------------------------------

watch(
    Guard(
        "torch inter-op threads",
        "`torch.get_num_interop_threads()` (watched: it can be set once per process only).",
        lambda: _torch().get_num_interop_threads(),
        category="torch",
        available=_torch_loaded,
    )
)
watch(
    Guard(
        "torch inference mode",
        "`torch.is_inference_mode_enabled()` of the calling thread (watched: only a context manager sets it).",
        lambda: _torch().is_inference_mode_enabled(),
        category="torch",
        available=_torch_loaded,
    )
)
watch(
    Guard(
        "CUDA initialised",
        "`torch.cuda.is_initialized()` (watched: a CPU call must not initialise CUDA).",
        lambda: _torch().cuda.is_initialized(),
        category="torch",
        available=_torch_loaded,
    )
)
