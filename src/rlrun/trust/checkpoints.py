"""Checkpoint files read once, as data: the bytes rlrun checks are the bytes a library is handed.

A checkpoint may come from someone else, and its file may be replaced while rlrun works with it. So rlrun opens
it once and reads the bytes of a regular file of at most `MAX_CHECKPOINT_BYTES` into memory (`read_bytes`); it
unpickles those bytes with torch's weights-only loader (`load_weights`), which builds tensors, numbers, strings
and containers and refuses any other global, so no code runs. The object that comes back is what the library
loads, through its `load_state_dict`-level API, never through its own loader of a path: the file is not opened
again, so a file replaced after the check is never read.

A refusal is one `CorruptCheckpoint` line naming the file, its size and the global it refers to, never torch's
advice to load the file with `weights_only=False`. Imports only `rlrun.errors` and the standard library; torch
inside the functions.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from collections.abc import Iterable
from typing import Any

from rlrun.errors import CorruptCheckpoint
from rlrun.trust import paths

MAX_CHECKPOINT_BYTES = 4 << 30
"""The largest checkpoint rlrun reads (4 GiB): the agents rlrun trains save a few megabytes."""


def read_bytes(path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_CHECKPOINT_BYTES) -> bytes:
    """The bytes of the regular file at `path`, read through one open descriptor, at most `max_bytes` of them.
    A FIFO, a device or a folder is refused without blocking on it; so is a larger file, unread. `what` names
    the format in errors (`an RSL-RL checkpoint`). While a run's files are read (`paths.confined`), a file that
    lies outside the run folder as opened is refused (`paths.OutsidePath`), unread."""
    try:
        return paths.read_file(path, "checkpoint", max_bytes)
    except paths.NotRead as refusal:
        reason = {
            "open": f"it cannot be opened ({refusal.reason})",
            "type": "it is not a regular file",
            "size": f"it is larger than {_size(max_bytes)}",
            "read": f"it cannot be read ({refusal.reason})",
        }[refusal.kind]
        raise _refused(path, refusal.size, what, reason) from None


def load_weights(
    data: bytes,
    path: str | os.PathLike[str],
    what: str,
    *,
    map_location: Any = "cpu",
    allowed: Iterable[Any] = (),
) -> Any:
    """`torch.load(weights_only=True)` of `data`, the bytes read from `path`: tensors, numbers, strings and
    containers, and the globals of `allowed` (torch's `safe_globals` entries); anything else is refused."""
    import torch

    allowed = list(allowed)
    try:
        # torch warns about a pickle protocol it did not write: the refusal, if any, says all there is to say
        with torch.serialization.safe_globals(allowed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except Exception as error:
        raise unreadable(path, len(data), what, error, data=data, allowed=allowed) from error


def read_weights(
    path: str | os.PathLike[str],
    what: str,
    *,
    map_location: Any = "cpu",
    allowed: Iterable[Any] = (),
    max_bytes: int = MAX_CHECKPOINT_BYTES,
) -> Any:
    """The checkpoint at `path` read once (`read_bytes`) and loaded from those bytes (`load_weights`)."""
    data = read_bytes(path, what, max_bytes=max_bytes)
    return load_weights(data, path, what, map_location=map_location, allowed=allowed)


def unreadable(
    path: str | os.PathLike[str],
    size: int | None,
    what: str,
    error: BaseException,
    *,
    data: bytes | None = None,
    allowed: Iterable[Any] = (),
) -> CorruptCheckpoint:
    """The one-line error for a checkpoint a reader failed on, whatever it raised (a damaged file makes
    unpicklers raise anything from `EOFError` to `IndexError`): the file, its size and the reason. For a global
    the weights-only loader refused, the reason names it (read from the pickle's opcodes where `data` is
    torch's archive, else from torch's message)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()
    refused = _refused_globals(data, allowed) if data is not None else []
    if not refused:
        named = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        refused = [named.group(1)] if named else []
    if refused:
        reason = (
            f"it refers to {', '.join(map(repr, refused[:3]))}, which is not a tensor, number or container; rlrun "
            "reads checkpoints with torch.load(weights_only=True) and never loads code from a file, so pass a "
            "checkpoint that rlrun or the library wrote"
        )
    elif "WeightsUnpickler error" in text:
        detail = re.search(r"WeightsUnpickler error:\s*(.+?)(?:\.\s|\n|$)", text)
        reason = (
            f"it holds what torch's weights-only loader refuses ({detail.group(1).strip() if detail else 'unknown'}); "
            "rlrun reads checkpoints with torch.load(weights_only=True), so pass a checkpoint that rlrun or the "
            "library wrote"
        )
    else:
        reason = text.splitlines()[0] if text else type(error).__name__
    return _refused(path, size, what, reason)


def _refused_globals(data: bytes, allowed: Iterable[Any]) -> list[str]:
    """The globals torch's weights-only loader would refuse in the torch archive `data`, read from the pickle's
    opcodes without running them; empty for bytes that are not such an archive."""
    import torch

    try:
        with torch.serialization.safe_globals(list(allowed)):
            return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data)))
    except Exception:
        return []


def _refused(path: str | os.PathLike[str], size: int | None, what: str, reason: str) -> CorruptCheckpoint:
    sized = f" ({size} bytes)" if size is not None else ""
    return CorruptCheckpoint(f"checkpoint {os.fspath(path)!r}{sized} cannot be read as {what}: {reason.rstrip('.')}.")


def _size(limit: int) -> str:
    return f"{limit >> 30} GiB" if limit >= 1 << 30 else f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
