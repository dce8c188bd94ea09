"""Module-level functions for the executor tests: a spawned worker or a Ray task imports them by name
(the workers get this process's `sys.path`, where pytest put this folder).

Each takes one item. `square_or_die` treats three items apart: `KILL` SIGKILLs the process that runs it,
`EXIT` leaves it with code 3, `RAISE` raises a `ValueError` with a two-line message.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

KILL = "kill"
EXIT = "exit"
EXIT_ONE = "exit 1"
RAISE = "raise"
INTERRUPT = "interrupt"
GAVE_UP = "gave up"


def square_or_die(item: int | str) -> int:
    """`item * item`, except for `KILL`, `EXIT` (code 3), `EXIT_ONE`, `RAISE` and `INTERRUPT` (raises
    `KeyboardInterrupt`)."""
    if item == KILL:
        os.kill(os.getpid(), signal.SIGKILL)
    if item == EXIT:
        os._exit(3)
    if item == EXIT_ONE:
        os._exit(1)
    if item == RAISE:
        raise ValueError("no square for this item\nsecond line of the message")
    if item == INTERRUPT:
        raise KeyboardInterrupt
    assert isinstance(item, int)
    return item * item


def pid_of(item: object) -> tuple[object, int]:
    """The item and the id of the process that ran it."""
    return item, os.getpid()


def lock(item: object) -> threading.Lock:
    """A result that cannot be pickled."""
    return threading.Lock()


def hold(paths: tuple[str, str], patience_s: float = 120.0) -> str:
    """Write this process's id to `started`, then wait until `release` exists and return it; return `GAVE_UP` if
    it never comes (so that a test whose executor got stuck fails rather than hangs)."""
    started, release = paths
    Path(started).write_text(str(os.getpid()))
    deadline = time.monotonic() + patience_s
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            return GAVE_UP
        time.sleep(0.01)
    return release


def hold_through_sigterm(paths: tuple[str, str]) -> str:
    """`hold`, ignoring SIGTERM (as a training that saves a checkpoint first might take its time to stop)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return hold(paths)


def wait_until_exists(path: str | Path, patience_s: float = 120.0) -> None:
    """Block the test until a worker has created `path`; fail rather than hang if it never does."""
    deadline = time.monotonic() + patience_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise AssertionError(f"no worker created {path}")
        time.sleep(0.01)


def wait_until_gone(pid: int, patience_s: float = 120.0) -> None:
    """Block the test until process `pid` has ended; fail rather than hang if it does not."""
    deadline = time.monotonic() + patience_s
    while os.path.exists(f"/proc/{pid}") and _state(pid) != "Z":
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} is still running")
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def count_aloud(item: int) -> int:
    """Report 0..item-1 to the run's `on_progress`, then return item (a training reporting its iterations)."""
    from rlrun.executors import report

    for step in range(item):
        report((item, step))
    return item


def report_then_die(item: int) -> int:
    """Report once, then die by SIGKILL: the progress already sent arrives, and the item fails."""
    from rlrun.executors import report

    report((item, 0))
    os.kill(os.getpid(), signal.SIGKILL)
    return item


def place(item: object) -> tuple[object, str | None, str, bool]:
    """The item and where it ran (`rlrun.executors.where()`): node id, host name, away from the driver's node."""
    from rlrun.executors import where

    here = where()
    return item, here.node_id, here.host, here.away


def nap(seconds: float) -> float:
    """Sleep `seconds`, then return them (an item that holds its CPU for a while)."""
    time.sleep(seconds)
    return seconds


def timed_nap(seconds: float) -> tuple[float, float]:
    """Sleep `seconds`; return when the sleep began and ended, by the wall clock that every process of this
    machine shares (so that a test orders what tasks did by cause, not by how soon the driver heard of it)."""
    began = time.time()
    time.sleep(seconds)
    return began, time.time()
