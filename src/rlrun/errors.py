"""One exception per user mistake, each message a single line that quotes the bad value and names the fix.

`UserError` and its subclasses are what `rlrun.main` turns into exit code 2 with no traceback.
Everything else that escapes a call is a runtime failure (exit code 1): a `Failure` is said in one line, anything
else with its traceback.
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


class InvalidArgument(UserError, ValueError):
    """A value out of range or of the wrong form (`--num_envs -4`, `--seed -1`, ...)."""


class UnknownTask(UserError, LookupError):
    """The task id is not registered with Gymnasium."""


class UnknownLibrary(UserError, LookupError):
    """The library name is not one rlrun knows."""


class MissingDependency(UserError, ImportError):
    """The library is known but not installed; the message names the pip extra."""


class UnsafeConfig(InvalidArgument):
    """A configuration value that would select code outside the table rlrun keeps for the library (a class, a
    scheduler, an activation, a model expression) or reads as an import path; the message names the key, the
    value and what rlrun allows there, so the fix is to use one of those (`rlrun.trust.names`)."""


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


class CorruptRun(UserError, ValueError):
    """The run asked for (`latest`, `best`, `--load_run`, a checkpoint inside it) has a run.json that does not
    parse or is malformed; the message names the run and says to repair or delete it."""


class UnknownField(UserError, TypeError):
    """A request was built with a field it does not have (`rlrun.TrainRequest(num_env=4)`)."""


class ConcurrentCall(UserError, RuntimeError):
    """A second thread called rlrun while a call was running; process-global state allows one at a time.

    A user error (exit code 2): the fix is the caller's, to run parallel calls in separate processes."""


class TrainingStopped(KeyboardInterrupt):
    """Training was stopped early: Ctrl-C (SIGINT), SIGTERM, or a stop request (a tuner's pruner).

    A `KeyboardInterrupt`, so that no library's `except Exception` swallows it; each adapter saves a
    checkpoint of the state it has when it passes through, then lets it go on. `rlrun.train` turns a
    requested stop into a result with status `stopped`; the other two reach the caller with the run
    directory and its last checkpoint attached, and the command line exits 130 or 143.
    """

    EXIT_CODES = {"interrupted": 130, "terminated": 143}

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        """`interrupted` (SIGINT), `terminated` (SIGTERM) or `stopped` (on request)."""
        self.run_dir: object = None
        """The run directory of the stopped training, once known."""
        self.checkpoint: object = None
        """The last checkpoint the stopped training left, if any."""
        self.row: dict[str, object] | None = None
        """A bench cell's result row, when the training was one (`rlrun.benching.cell`)."""
        self.bench: object = None
        """The out folder of the bench it stopped, once known."""

    @property
    def exit_code(self) -> int:
        return self.EXIT_CODES.get(self.reason, 130)


class Failure(RuntimeError):
    """A failure of this machine or of a service a call needs, not of the request, said in one line that names
    what to do: `rlrun.main` prints it with no traceback and exits 1."""


class LeakDetected(RuntimeError):
    """The leak detector found process state that a call changed and did not put back."""


class RestoreFailed(RuntimeError):
    """One or more guards could not restore the state they captured."""
