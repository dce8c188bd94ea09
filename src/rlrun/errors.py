"""One exception per user mistake, each message a single line that quotes the bad value and names the fix.

`UserError` and its subclasses are what `rlrun.main` turns into exit code 2 with no traceback.
Everything else that escapes a call is a runtime failure (exit code 1).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(value: str, choices: Iterable[str], *, listing: int = 12) -> str:
    """Return ' Did you mean 'x'?' for the nearest choice, or a short list of valid choices, or ''."""
    choices = sorted(set(choices))
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    if not close:
        close = [c for c in choices if value.lower() in c.lower() or c.lower() in value.lower()][:1]
    if close:
        return f" Did you mean {close[0]!r}?"
    if 0 < len(choices) <= listing:
        return f" Valid choices: {', '.join(choices)}."
    return ""


class UserError(Exception):
    """A request that rlrun rejects before it changes anything; the message says how to fix it."""

    exit_code = 2


class InvalidArgument(UserError, ValueError):
    """A value out of range or of the wrong form (`--num_envs -4`, `--seed -1`, ...)."""


class UnknownTask(UserError, LookupError):
    """The task id is not registered with Gymnasium."""


class UnknownLibrary(UserError, LookupError):
    """The library name is not one rlrun knows."""


class MissingDependency(UserError, ImportError):
    """The library is known but not installed; the message names the pip extra."""


class UnsupportedTask(UserError, ValueError):
    """The library cannot train this task (for example a discrete action space for RSL-RL)."""


class UnknownConfigKey(UserError, KeyError):
    """An `agent.*=` or `env.*=` override names a key the configuration does not have."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class CheckpointNotFound(UserError, FileNotFoundError):
    """No checkpoint matches `--checkpoint` / `--load_run`."""


class CorruptCheckpoint(UserError, ValueError):
    """The checkpoint file exists but cannot be read."""


class ConcurrentCall(RuntimeError):
    """A second thread called rlrun while a call was running; process-global state allows one at a time."""


class LeakDetected(RuntimeError):
    """The leak detector found process state that a call changed and did not put back."""


class RestoreFailed(RuntimeError):
    """One or more guards could not restore the state they captured."""
