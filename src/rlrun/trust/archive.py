"""A run folder sent from one machine to another as a tar archive: packed from rlrun's own files, unpacked as data.

A bench cell that ran on a Ray node other than the driver's wrote its run folder on that node's disk; it sends the
folder back as an uncompressed tar archive (`pack_folder`) and the driver writes it into its own log root
(`unpack_folder`). The bytes crossed a network and the driver did not make them, so the reader takes nothing on
faith:

- every member is a regular file or a folder: no link (symbolic or hard), device, FIFO or sparse file;
- every name is relative, in POSIX form, without `..`, `.`, an empty part, a backslash or a NUL;
- the sizes the members declare add up to at most the bound (`MAX_ARCHIVE_BYTES` unless given), and there are at
  most `MAX_MEMBERS` of them, counted before anything is written;
- folders are made with `real_folders` and files with `create_file` (`O_CREAT | O_EXCL | O_NOFOLLOW`), so nothing
  is written through a link or over a file already there;
- nothing in the archive is run, imported or unpickled: its files are bytes copied to disk.

Each refusal is `UnsafeArchive`, one line naming what is wrong and the bound where there is one.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO

from rlrun.errors import UserError
from rlrun.trust.paths import create_file, real_folders

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_MEMBERS",
    "UnsafeArchive",
    "copy_file",
    "name_parts",
    "pack_folder",
    "read_member",
    "shown_size",
    "unpack_folder",
]

MAX_ARCHIVE_BYTES = 256 << 20
"""The most file bytes a run folder sent back from another machine may hold (256 MiB): a bench cell's checkpoints,
metrics.csv and configuration are a few megabytes; the archive travels through Ray's object store whole."""

MAX_MEMBERS = 100_000
"""The most files and folders one archive may hold."""

_CHUNK = 1 << 20
_FILE_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE)


class UnsafeArchive(UserError, ValueError):
    """A run folder that cannot be sent (too large, holds a link) or an archive refused as it is read."""


def shown_size(count: int) -> str:
    return f"{count / (1 << 20):.1f} MiB" if count >= 1 << 20 else f"{count} bytes"


def pack_folder(folder: str | os.PathLike[str], limit: int = MAX_ARCHIVE_BYTES) -> bytes:
    """The files and folders under `folder`, as an uncompressed tar archive with names relative to it. A folder
    whose files hold more than `limit` bytes, or that holds anything but files and folders (a link), is refused
    before anything is packed."""
    root = Path(folder)
    entries: list[tuple[Path, str]] = []
    total = 0
    for current, folders, files in os.walk(root, followlinks=False):
        base = Path(current)
        folders.sort()
        for name in folders + sorted(files):
            path = base / name
            mode = os.lstat(path).st_mode
            relative = path.relative_to(root).as_posix()
            if stat.S_ISREG(mode):
                total += os.lstat(path).st_size
            elif not stat.S_ISDIR(mode):
                raise UnsafeArchive(
                    f"run folder {str(root)!r} holds {relative!r}, which is not a file or a folder (a link?); only "
                    "files and folders are sent back from another node: remove it, or write runs to a shared disk."
                )
            entries.append((path, relative))
            if total > limit:
                raise UnsafeArchive(
                    f"run folder {str(root)!r} holds more than {shown_size(limit)} of files, the most a cell sends "
                    "back from another node: keep fewer checkpoints (or smaller ones), or give --storage."
                )
            if len(entries) > MAX_MEMBERS:
                raise UnsafeArchive(
                    f"run folder {str(root)!r} holds more than {MAX_MEMBERS} files and folders, the most a cell sends "
                    "back from another node: keep fewer files, or write runs to a shared disk."
                )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, relative in entries:
            info = archive.gettarinfo(str(path), arcname=relative)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with open(path, "rb") as handle:
                    archive.addfile(info, handle)
            else:
                archive.addfile(info)
    return buffer.getvalue()


def name_parts(name: str, what: str) -> tuple[str, ...]:
    """The parts of a member's name, refused unless it is a plain relative POSIX path."""
    problem = None
    if not name or "\x00" in name or "\\" in name:
        problem = "is empty or holds a NUL or a backslash"
    elif PurePosixPath(name).is_absolute():
        problem = "is an absolute path"
    else:
        parts = tuple(name.rstrip("/").split("/"))
        if any(part in ("", ".", "..") for part in parts):
            problem = "has an empty, '.' or '..' part"
    if problem is not None:
        raise UnsafeArchive(f"{what} holds a member named {name!r}, which {problem}; the archive is refused.")
    return parts


def unpack_folder(
    data: bytes, destination: str | os.PathLike[str], *parts: str, what: str, limit: int = MAX_ARCHIVE_BYTES
) -> Path:
    """Write the archive `data` (see `pack_folder`) into `destination/parts...`, made here as real folders (the
    destination may be a link: the user's log root). Every member is checked before the first is written (see the
    module docstring); `what` names the archive in refusals. Returns the folder."""
    members: list[tarfile.TarInfo] = []
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                if len(members) >= MAX_MEMBERS:
                    raise UnsafeArchive(f"{what} holds more than {MAX_MEMBERS} members; the archive is refused.")
                name_parts(member.name, what)
                if member.type not in _FILE_TYPES and not member.isdir():
                    raise UnsafeArchive(
                        f"{what} holds {member.name!r}, which is not a file or a folder (a link, a device?); "
                        "the archive is refused."
                    )
                total += max(0, member.size) if member.type in _FILE_TYPES else 0
                if total > limit:
                    raise UnsafeArchive(
                        f"{what} holds more than {shown_size(limit)} of files, the most a run folder sent back may "
                        "hold; the archive is refused."
                    )
                members.append(member)
            folder = real_folders(destination, *parts, what="run folder")
            for member in members:
                names = name_parts(member.name, what)
                if member.isdir():
                    real_folders(folder, *names, what="run folder")
                    continue
                parent = real_folders(folder, *names[:-1], what="run folder")
                source = archive.extractfile(member)
                assert source is not None  # a regular file's member has content
                copy_file(source, parent / names[-1], member.size)
    except tarfile.TarError as error:
        raise UnsafeArchive(f"{what} is not a readable tar archive ({error}); the archive is refused.") from None
    return folder


def read_member(data: bytes, name: str, limit: int) -> bytes | None:
    """The content of the archive's regular file `name` if it holds one of at most `limit` bytes, else None."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                if member.name == name and member.type in _FILE_TYPES and 0 <= member.size <= limit:
                    source = archive.extractfile(member)
                    return None if source is None else source.read(limit)
    except tarfile.TarError:
        return None
    return None


def copy_file(source: IO[bytes], target: Path, size: int) -> None:
    """`size` bytes of `source` into a new file at `target` (never over a file there, never through a link)."""
    descriptor = create_file(target, 0o644)
    try:
        left = size
        while left > 0:
            chunk = source.read(min(_CHUNK, left))
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(descriptor, view) :]
            left -= len(chunk)
    finally:
        os.close(descriptor)
