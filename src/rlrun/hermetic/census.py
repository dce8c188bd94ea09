"""The leak detector: a broad snapshot of process state before and after a call, and a readable diff.

It reads every entry of the guard registry: the restored guards and the watch-only entries of
`watched` (state that cannot be restored by assignment: Python threads, open file descriptors,
child processes, CUDA initialisation, ...). A difference is reported as
"X was modified by the call: before -> after". Switch it on for one call with
`check_leaks=True`, or for every call with `RLRUN_CHECK_LEAKS=1`; the test suite runs with it on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Set
from typing import Any

from rlrun.hermetic.registry import GUARDS

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
