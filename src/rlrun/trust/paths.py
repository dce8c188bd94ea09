"""Paths rlrun reads and writes: each resolved with its links followed, and refused when it ends outside its place.

A log root may be shared, and a folder or file in it may be a symbolic link that someone else planted: a
checkpoint that points at another user's file, an experiment folder that points at a home directory. rlrun
follows no such link out of its place:

- the log root is the user's choice and may itself be a link; it is resolved once (`real`), and whatever rlrun
  reads or writes below it must resolve inside it (`inside`);
- a file that a run lists (run.json, a checkpoint) must resolve inside its run folder (`inside` again), and
  must still be there when it is opened: a file is read through one descriptor, and while a call reads a run's
  files (`confined`), the file that descriptor names is checked to lie inside the run folder as it was resolved
  when the run was found (`check_opened`), so a folder or file swapped for a link after the check is refused;
- a folder rlrun writes into below the log root is a real folder, not a link (`real_folders`, `output_folder`),
  and a file it creates is opened with `O_CREAT | O_EXCL | O_NOFOLLOW` (`create_file`), so that neither is ever
  written through a link that was there before.

A refusal is `OutsidePath`, a user error: one line naming the path, where it points and the folder it left.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from rlrun.errors import UserError

__all__ = [
    "NotRead",
    "OutsidePath",
    "check_folders",
    "check_opened",
    "confined",
    "create_file",
    "inside",
    "is_inside",
    "opened_path",
    "output_folder",
    "read_file",
    "real",
    "real_folders",
    "replace_file",
]


class OutsidePath(UserError, PermissionError):
    """A path that, with its links followed, ends outside the run folder or log root it belongs to, or a link
    where rlrun writes; the message names the path, where it points, and the folder it should stay in."""


def real(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute with every link followed (the parts that do not exist yet kept as they are)."""
    return Path(os.path.realpath(Path(path).absolute()))


def is_inside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether `path` is `folder` or under it, both taken as they are (resolve them first: `real`)."""
    path, folder = Path(path), Path(folder)
    return path == folder or folder in path.parents


def inside(path: str | os.PathLike[str], folder: str | os.PathLike[str], what: str) -> Path:
    """`path`, unchanged, when with its links followed it ends inside `folder` (resolved too); else `OutsidePath`
    naming `what` (e.g. "checkpoint"), the path and where it points."""
    target, home = real(path), real(folder)
    if not is_inside(target, home):
        raise outside(what, path, target, home)
    return Path(path)


def outside(what: str, path: str | os.PathLike[str], target: Path, folder: Path) -> OutsidePath:
    """The one-line refusal of `path` (`what` it is), which points to `target`, outside `folder`."""
    return OutsidePath(
        f"{what} {os.fspath(path)!r} points to {str(target)!r}, outside {str(folder)!r}; rlrun reads and writes "
        "only inside a run's folder and its log root: remove the link (or copy the file in) and try again."
    )


_HOME: ContextVar[Path | None] = ContextVar("rlrun_run_folder", default=None)
"""The run folder (resolved) whose files the reads in progress may open; None: any file the caller named."""


@contextlib.contextmanager
def confined(folder: Path | None) -> Iterator[None]:
    """Within the block, a file rlrun opens to read (`check_opened`) must lie inside `folder`, a run folder
    resolved when the run was found (`runs.Run.home`); None leaves reads unconfined (a lone checkpoint)."""
    token = _HOME.set(folder)
    try:
        yield
    finally:
        _HOME.reset(token)


def opened_path(descriptor: int) -> Path | None:
    """The path of the file open at `descriptor` as the system names it (every link followed): Linux's
    /proc/self/fd, macOS's F_GETPATH; None where neither says."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{descriptor}"))
    except OSError:
        pass
    if sys.platform == "darwin":
        import fcntl

        try:
            name = fcntl.fcntl(descriptor, fcntl.F_GETPATH, bytes(1024))
        except OSError:
            return None
        return Path(os.fsdecode(name.rstrip(b"\0")))
    return None


def check_opened(descriptor: int, path: str | os.PathLike[str], what: str) -> None:
    """Refuse (`OutsidePath`, naming `what`) the file open at `descriptor`, opened as `path`, when a run's files
    are being read (`confined`) and the file lies outside that run's folder: a link planted after the run was
    checked. The file itself is checked, not its name, so no swap between the check and the read gets through."""
    home = _HOME.get()
    if home is None:
        return
    target = opened_path(descriptor)
    if target is not None and not is_inside(target, home):
        raise outside(what, path, target, home)


class NotRead(Exception):
    """Why `read_file` returned no bytes: `kind` is "open" or "read" (with the system's `reason`), "type" (not a
    regular file) or "size" (larger than the limit; `size` when known). Each reader words it in its own errors."""

    def __init__(self, kind: str, reason: str = "", size: int | None = None) -> None:
        super().__init__(kind, reason, size)
        self.kind, self.reason, self.size = kind, reason, size


def read_file(path: str | os.PathLike[str], what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path` (`what` it is, for `check_opened`), read through one descriptor,
    at most `max_bytes` of them: the bytes a caller checks are the bytes it loads, whatever replaces the file.
    A FIFO, a device or a folder is refused without blocking on it, and a larger file unread (`NotRead`); while
    a run's files are read, a file outside the run folder as opened is refused unread (`OutsidePath`)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise NotRead("open", _reason(error)) from None
    try:
        check_opened(descriptor, path, what)
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise NotRead("type")
        if info.st_size > max_bytes:
            raise NotRead("size", size=info.st_size)
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(descriptor, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OutsidePath:
        raise
    except OSError as error:
        raise NotRead("read", _reason(error)) from None
    finally:
        os.close(descriptor)
    data = b"".join(chunks)
    if len(data) > max_bytes:  # it grew while it was read
        raise NotRead("size", size=len(data))
    return data


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


def linked(what: str, path: str | os.PathLike[str]) -> OutsidePath:
    """The one-line refusal of writing through `path` (`what` it is), a link."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return OutsidePath(
        f"{what} {os.fspath(path)!r} is a link (to {target!r}); rlrun writes only into real folders, never "
        "through a link: remove the link and try again."
    )


def real_folders(root: str | os.PathLike[str], *parts: str, what: str = "folder") -> Path:
    """`root/parts...`: the root made with its parents if missing (it may be a link: the user's choice), and
    each folder below it made if missing or, if there, checked to be a real folder, never a link.

    A folder below the root that is a link, or that is not a folder, is refused (`OutsidePath`): rlrun
    would otherwise create files wherever it points. `os.mkdir` never follows a link, so a link planted
    between the check and the make fails the make instead of being followed.
    """
    folder = Path(root).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    for part in parts:
        if part in ("", ".", "..") or os.sep in part or (os.altsep and os.altsep in part):
            raise ValueError(f"{part!r} is not one folder name")
        folder = folder / part
        try:
            os.mkdir(folder)
        except FileExistsError:
            if folder.is_symlink():
                raise linked(what, folder) from None
            if not folder.is_dir():
                raise
    return folder


def check_folders(root: str | os.PathLike[str], *parts: str, what: str = "folder") -> None:
    """Refuse, before anything is made, what `real_folders(root, *parts)` would refuse: a folder below the root
    that is a link (`OutsidePath`) or a file (`UserError`). Makes nothing; `real_folders` checks again as it makes."""
    folder = Path(root).absolute()
    for part in parts:
        folder = folder / part
        if folder.is_symlink():
            raise linked(what, folder)
        if not folder.exists():
            return
        if not folder.is_dir():
            raise UserError(
                f"{what} {str(folder)!r} is a file, not a folder; move the file away or choose another log root."
            )


def output_folder(
    folder: str | os.PathLike[str], name: str, root: str | os.PathLike[str] | None = None, *, make: bool = True
) -> Path:
    """`folder/name`, made if missing (unless not `make`: then only checked), for rlrun to write its files into
    (`exported/` in a run folder).

    `folder` must not itself be a link, nor `folder/name`; when `folder` lies under `root` (the log root, as
    the user spelled it), no folder between the root and it may be a link either, and it must resolve inside
    the root. Otherwise `OutsidePath`.
    """
    path = Path(folder).absolute()
    if root is not None:
        base = Path(root).absolute()
        if is_inside(path, base):
            step = base
            for part in path.relative_to(base).parts:
                step = step / part
                if step.is_symlink():
                    raise linked("run folder" if step == path else "folder", step)
            inside(path, base, "folder")
    if path.is_symlink():
        raise linked("run folder", path)
    target = path / name
    if not make:
        if target.is_symlink():
            raise linked("folder", target)
        return target
    try:
        os.mkdir(target)
    except FileExistsError:
        if target.is_symlink():
            raise linked("folder", target) from None
        if not target.is_dir():
            raise
    return target


def create_file(path: str | os.PathLike[str], mode: int = 0o666) -> int:
    """A new file at `path` opened for writing (its descriptor): never an existing file, never through a link
    (`O_CREAT | O_EXCL | O_NOFOLLOW`); `FileExistsError` when anything is there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, mode)


def replace_file(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Put `data` (text is written as UTF-8) at `path`: into a new file beside it (`create_file`), then moved
    over it. Whatever had the name before, a link included, is replaced, never written through."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    partial.unlink(missing_ok=True)  # this process's own leftover, or a link: removed, never followed
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor = create_file(partial)
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(descriptor, view) :]
        finally:
            os.close(descriptor)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
