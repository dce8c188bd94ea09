"""Run folders through a storage that every node reaches (`rlrun bench --storage URI`): uploaded by the process
that made them, read back by the driver as data.

The storage is any filesystem fsspec knows: a local or NFS path, `file://...`, `s3://bucket/prefix`,
`gs://...` (the filesystem's package, s3fs or gcsfs, installed on every node). A shared bucket is written by
others too, so the driver reads a folder back as it reads an archive from another node (`rlrun.trust.archive`):

- every entry is a regular file or a folder: an entry the filesystem reports as a link is refused;
- every name below the folder is relative, in POSIX form, without `..`, `.`, an empty part, a backslash or a NUL;
- the files add up to at most the bound (`MAX_STORED_BYTES` unless given), at most `MAX_MEMBERS` entries, all
  counted before anything is written;
- folders are made with `real_folders` and files with `create_file` (`O_CREAT | O_EXCL | O_NOFOLLOW`);
- nothing read is run, imported or unpickled: files are bytes copied to disk.

A refusal is `UnsafeArchive`, one line; a URL fsspec cannot open is `InvalidArgument` (or `MissingDependency`
naming the package its protocol needs), raised by `check_storage` in planning, before any cell runs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.trust.archive import MAX_MEMBERS, UnsafeArchive, copy_file, name_parts, shown_size
from rlrun.trust.paths import real_folders

__all__ = [
    "MAX_STORED_BYTES",
    "check_storage",
    "download_folder",
    "is_file",
    "list_folders",
    "read_file",
    "upload_folder",
]

MAX_STORED_BYTES = 16 << 30
"""The most file bytes the driver reads back as one run folder from the storage (16 GiB)."""


def check_storage(url: str) -> str:
    """`url` as a storage fsspec can open here (`MissingDependency` naming the package its protocol needs, else
    `InvalidArgument`), returned as fsspec spells it with its protocol (`file:///abs/path`, `s3://bucket/x`)."""
    fs, root = _open(url)
    return str(fs.unstrip_protocol(root))


def _open(url: str) -> tuple[Any, str]:
    try:
        import fsspec
    except ImportError:
        raise MissingDependency("--storage needs fsspec: pip install 'rlrun[ray]' (or pip install fsspec).") from None
    if not isinstance(url, str) or not url.strip() or "\x00" in url:
        raise InvalidArgument(f"--storage {url!r} is not a folder or URL; give a path or s3://bucket/prefix.")
    try:
        fs, root = fsspec.core.url_to_fs(url)
    except ImportError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise MissingDependency(f"--storage {url!r}: {first}") from None
    except (ValueError, TypeError, KeyError, OSError) as error:
        raise InvalidArgument(
            f"--storage {url!r} is no filesystem fsspec knows ({type(error).__name__}: {error}); give a path, "
            "file:///path or a URL such as s3://bucket/prefix."
        ) from None
    return fs, str(root).rstrip("/") or "/"


def upload_folder(
    folder: str | os.PathLike[str], url: str, parts: tuple[str, ...], sent: dict[str, tuple[int, int]] | None = None
) -> str:
    """Copy the files of `folder` (rlrun's own run folder: files and folders, no link followed) to `url/parts...`;
    returns the URL of the copy. With `sent` (relative name -> size and modification time of what was copied
    before, updated here), a file copied before and unchanged since is not copied again. `run.json` goes last, so
    that the copy never lists a checkpoint it does not hold yet."""
    fs, root = _open(url)
    target = "/".join((root.rstrip("/"), *parts))
    base = Path(folder)
    files: list[tuple[str, Path, tuple[int, int]]] = []
    for current, folders, names in os.walk(base, followlinks=False):
        for name in sorted(names):
            path = Path(current) / name
            try:
                status = path.lstat()
            except FileNotFoundError:  # a temporary file of a writer, gone since the listing
                continue
            if not stat.S_ISREG(status.st_mode):
                continue  # rlrun makes no link in a run folder; one planted there is not sent
            files.append((path.relative_to(base).as_posix(), path, (status.st_size, status.st_mtime_ns)))
        folders.sort()
    files.sort(key=lambda file: file[0] == "run.json")
    made: set[str] = set()
    for relative, path, version in files:
        if sent is not None and sent.get(relative) == version:
            continue
        destination = f"{target}/{relative}"
        parent = destination.rsplit("/", 1)[0]
        if parent not in made:
            fs.makedirs(parent, exist_ok=True)
            made.add(parent)
        fs.put_file(str(path), destination)
        if sent is not None:
            sent[relative] = version
    return str(fs.unstrip_protocol(target))


def list_folders(url: str, parts: tuple[str, ...]) -> set[str]:
    """The names of the folders directly inside `url/parts...` (none when it is missing or not a folder)."""
    fs, root = _open(url)
    path = "/".join((root.rstrip("/"), *parts))
    try:
        listing = fs.ls(path, detail=True)
    except (OSError, ValueError):
        return set()
    return {
        str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
        for info in listing
        if isinstance(info, dict) and info.get("type") == "directory" and not info.get("islink")
    }


def is_file(url: str, parts: tuple[str, ...]) -> bool:
    """Whether `url/parts...` is a regular file (not a link)."""
    fs, root = _open(url)
    try:
        info = fs.info("/".join((root.rstrip("/"), *parts)))
    except (OSError, ValueError):
        return False
    return info.get("type") == "file" and not info.get("islink")


def read_file(url: str, parts: tuple[str, ...], limit: int) -> bytes | None:
    """The bytes of the regular file at `url/parts...`, if it is one of at most `limit` bytes; else None."""
    fs, root = _open(url)
    path = "/".join((root.rstrip("/"), *parts))
    try:
        info = fs.info(path)
        if info.get("type") != "file" or info.get("islink") or not 0 <= int(info.get("size") or 0) <= limit:
            return None
        with fs.open(path, "rb") as source:
            data = bytes(source.read(limit + 1))
    except (OSError, ValueError):
        return None
    return data if len(data) <= limit else None


def download_folder(
    url: str, parts: tuple[str, ...], destination: str | os.PathLike[str], *names: str, what: str,
    limit: int = MAX_STORED_BYTES,
) -> Path:  # fmt: skip
    """Copy the folder at `url/parts...` into `destination/names...`, made here as real folders. Every entry is
    checked before the first is written (see the module docstring); `what` names the folder in refusals."""
    fs, root = _open(url)
    source = "/".join((root.rstrip("/"), *parts))
    try:
        listing = fs.find(source, detail=True, withdirs=True)
    except (OSError, ValueError) as error:
        raise UnsafeArchive(f"{what} cannot be listed ({type(error).__name__}: {error}).") from None
    entries: list[tuple[tuple[str, ...], str, int]] = []
    total = 0
    for path, info in sorted(listing.items()):
        relative = str(path)[len(source) :].lstrip("/")
        if not relative:
            continue
        if len(entries) >= MAX_MEMBERS:
            raise UnsafeArchive(f"{what} holds more than {MAX_MEMBERS} entries; it is refused.")
        names_below = name_parts(relative, what)
        kind = info.get("type")
        if info.get("islink") or kind not in ("file", "directory"):
            raise UnsafeArchive(f"{what} holds {relative!r}, which is not a file or a folder (a link?); it is refused.")
        size = max(0, int(info.get("size") or 0)) if kind == "file" else 0
        total += size
        if total > limit:
            raise UnsafeArchive(f"{what} holds more than {shown_size(limit)} of files; it is refused.")
        entries.append((names_below, str(path), size if kind == "file" else -1))
    if not entries:
        raise UnsafeArchive(f"{what} is empty or missing.")
    folder = real_folders(destination, *names, what="run folder")
    for names_below, path, size in entries:
        if size < 0:
            real_folders(folder, *names_below, what="run folder")
            continue
        parent = real_folders(folder, *names_below[:-1], what="run folder")
        with fs.open(path, "rb") as handle:
            copy_file(handle, parent / names_below[-1], size)
    return folder
