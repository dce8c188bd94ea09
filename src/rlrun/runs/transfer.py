"""Run folders that come home from another node: sent as a tar archive (`rlrun.trust.archive`) with a bench
cell's row or a tune trial's, written by the driver into its own log root at the same path below it.

A folder already there whose run.json has the sent bytes is that run (the node and the driver share the disk): it
is kept. A name a run here took in the meantime (two machines name run folders by the second they start) sends
the folder beside it, `<name>_2`, `<name>_3`, ... (`claim`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from rlrun.errors import UserError
from rlrun.trust.archive import MAX_ARCHIVE_BYTES, pack_folder, read_member, unpack_folder
from rlrun.trust.limits import MAX_JSON_BYTES
from rlrun.trust.paths import real_folders

__all__ = ["claim", "pack_runs", "same_run", "unpack_home"]


def same_run(folder: Path, sent: bytes | None) -> bool:
    """Whether `folder` is already the run that was sent: its `run.json` has the bytes `sent`."""
    manifest = folder / "run.json"
    if sent is None or not manifest.is_file() or manifest.is_symlink():
        return False
    return manifest.stat().st_size == len(sent) and manifest.read_bytes() == sent


def claim(log_root: Path, parts: tuple[str, ...]) -> Path:
    """A new, empty folder at `log_root/parts...`, or `<name>_2`, `<name>_3`, ... beside it when that name is
    taken (claimed by `mkdir`, as `rlrun.runs.new_run_dir` claims run folders)."""
    parent = real_folders(log_root, *parts[:-1], what="run folder")
    for counter in range(1, 1000):
        candidate = parent / (parts[-1] if counter == 1 else f"{parts[-1]}_{counter}")
        try:
            os.mkdir(candidate)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"999 run folders named {parts[-1]!r} (with suffixes) already exist in {str(parent)!r}")


def unpack_home(data: bytes, log_root: Path, parts: tuple[str, ...], what: str, limit: int = MAX_ARCHIVE_BYTES) -> Path:
    """The run folder archived in `data`, which lay at `parts` below its node's log root, written at the same place
    below `log_root` (or beside it, see the module docstring); returns where it is. The folder claimed for it is
    removed again when the archive is refused (`UnsafeArchive`)."""
    folder = log_root.joinpath(*parts)
    if same_run(folder, read_member(data, "run.json", MAX_JSON_BYTES)):
        return folder
    folder = claim(log_root, parts)
    try:
        unpack_folder(data, log_root, *folder.relative_to(log_root).parts, what=what, limit=limit)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # the folder claimed a moment ago; links are never followed
        raise
    return folder


def pack_runs(run_dirs: Sequence[str], limit: int = MAX_ARCHIVE_BYTES) -> tuple[dict[str, bytes], str | None]:
    """Each of `run_dirs` as an archive, by its path, while they hold at most `limit` bytes together; and why the
    rest could not be packed (None when all were)."""
    archives: dict[str, bytes] = {}
    left = limit
    for run_dir in run_dirs:
        try:
            archives[run_dir] = pack_folder(run_dir, left)  # refused when its files hold more than `left` bytes
        except (UserError, OSError) as error:
            lines = str(error).strip().splitlines()
            return archives, f"{type(error).__name__}: {lines[0] if lines else ''}"
        left -= _file_bytes(Path(run_dir))
    return archives, None


def _file_bytes(folder: Path) -> int:
    """The bytes of the regular files under `folder` (links not followed), as `pack_folder` counts them."""
    return sum(
        (Path(current) / name).lstat().st_size
        for current, _, files in os.walk(folder, followlinks=False)
        for name in files
        if (Path(current) / name).is_file() and not (Path(current) / name).is_symlink()
    )
