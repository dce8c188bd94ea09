"""The leak detector: a broad snapshot of process state before and after a call, and a readable diff.

It reads every entry of the guard registry (restored guards and watch-only entries alike) and
adds the state that cannot be restored by assignment: Python threads, open file descriptors,
child processes, CUDA initialisation. A difference is reported as
"X was modified by the call: before -> after". Switch it on for one call with
`check_leaks=True`, or for every call with `RLRUN_CHECK_LEAKS=1`; the test suite runs with it on.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping, Set
from typing import Any

from rlrun.hermetic.registry import GUARDS, Guard, module_loaded, register

Snapshot = dict[str, Any]

THREAD_GRACE_S = 2.0
"""How long the detector waits for threads that a call has already told to stop (writers flushing)."""


def leak_check_requested(check_leaks: bool | None) -> bool:
    """Resolve an explicit `check_leaks` argument against the `RLRUN_CHECK_LEAKS` environment variable."""
    if check_leaks is not None:
        return check_leaks
    return os.environ.get("RLRUN_CHECK_LEAKS", "").strip().lower() in ("1", "true", "yes", "on")


def snapshot() -> Snapshot:
    """Fingerprint every available registry entry; never imports anything or initialises CUDA."""
    return {guard.name: guard.snapshot() for guard in list(GUARDS) if guard.available()}


def compare(before: Snapshot, after: Snapshot, *, what: str = "the call") -> list[str]:
    """Return one line per entry present in both snapshots whose fingerprint differs."""
    reports = []
    for name, old in before.items():
        if name in after and after[name] != old:
            reports.append(f"{name} was modified by {what}: {_describe(old, after[name])}")
    return reports


def settle(before: Snapshot, timeout: float = THREAD_GRACE_S) -> Snapshot:
    """Take the after-snapshot, first giving threads started by the call a moment to finish."""
    started = {
        thread for thread in threading.enumerate() if (thread.ident, thread.name) not in before.get("threads", ())
    }
    deadline = time.monotonic() + timeout
    for thread in started:
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    return snapshot()


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(old: Any, new: Any) -> str:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = sorted({*old, *new}, key=str)
        changes = [
            f"{key}: {_short(old.get(key, '<missing>'), 60)} -> {_short(new.get(key, '<missing>'), 60)}"
            for key in keys
            if old.get(key, "<missing>") != new.get(key, "<missing>")
        ]
        return "; ".join(changes)
    if isinstance(old, Set) and isinstance(new, Set):
        added, removed = sorted(new - old, key=str), sorted(old - new, key=str)
        parts = [f"added {_short(added)}"] * bool(added) + [f"removed {_short(removed)}"] * bool(removed)
        return ", ".join(parts)
    return f"{_short(old)} -> {_short(new)}"


# --- watch-only entries for state that cannot be put back by assignment -------------------------------------


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


register(
    Guard(
        "threads",
        "Python threads alive after the call (watched: whoever starts a thread must stop it).",
        _threads,
        category="process",
    )
)
register(
    Guard(
        "open file descriptors",
        "This process's open file descriptors and what they point to (watched; Linux `/proc`).",
        _open_files,
        category="process",
    )
)
register(
    Guard(
        "child processes",
        "Live child processes of this process (watched; Linux `/proc`).",
        _child_processes,
        category="process",
    )
)
register(
    Guard(
        "CUDA initialised",
        "`torch.cuda.is_initialized()` (watched: a CPU call must not initialise CUDA).",
        lambda: sys.modules["torch"].cuda.is_initialized(),
        category="torch",
        available=module_loaded("torch"),
    )
)


def watched() -> list[Guard]:
    """Return the registry entries the detector watches but the scope does not restore."""
    return [guard for guard in GUARDS if not guard.restored]
