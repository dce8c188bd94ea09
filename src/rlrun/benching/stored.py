"""A bench cell's run folder in `--storage`: sent as the training goes, read back wherever it is needed.

- `Uploads`: in the process that runs the cell, each checkpoint the training lists in its run.json is sent as
  it is listed (with the files changed since the last send, run.json last), and the rest when the cell ends; a
  node lost mid-cell leaves its last listed checkpoint in the storage.
- `fetch`: a folder of the storage copied below a log root, as data (`rlrun.trust.remote`): by the driver for
  its results and report, and by a retry on whatever node it runs.
- `last_stored_checkpoint`: where a retry goes on from when the failed attempt's folder is out of reach (its node
  is gone): the newest checkpoint that the storage copy's run.json lists and that the copy holds.

A cell's run folders are named `<time>_<key>...` (`key_folders`); those a failed attempt made are the ones not
there before the round began.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rlrun.runs.transfer import claim, same_run
from rlrun.trust.archive import UnsafeArchive, name_parts
from rlrun.trust.limits import MAX_JSON_BYTES, UnreadableFile, parse_json, whole_number
from rlrun.trust.remote import check_storage, download_folder, is_file, list_folders, read_file, upload_folder


def key_folders(names: Iterable[str], key: str) -> set[str]:
    """The names among `names` of run folders of the cell whose key is `key` (`<time>_<key>...`)."""
    return {name for name in names if f"_{key}" in name and name.split("_", 2)[-1].startswith(key)}


def local_folders(base: Path, key: str) -> set[str]:
    """The names of the cell's run folders in `base` (`<log root>/<library>/<experiment>`), none when it is missing."""
    return key_folders((path.name for path in base.iterdir()), key) if base.is_dir() else set()


def resumable(manifest: Any, budget: int) -> Iterator[tuple[str, int, int]]:
    """(file, iteration, env steps) of each checkpoint a parsed run.json lists, newest first, where the entry is
    well formed (a file name, whole numbers) and iterations are still to go (`0 < iteration < budget`)."""
    entries = manifest.get("checkpoints") if isinstance(manifest, dict) else None
    for entry in reversed(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict):
            continue
        file, iteration, env_steps = entry.get("file"), entry.get("iteration"), entry.get("env_steps")
        if isinstance(file, str) and whole_number(iteration) and whole_number(env_steps) and 0 < iteration < budget:
            yield file, iteration, env_steps


def stored_folders(storage: str, experiment: tuple[str, ...], key: str) -> set[str]:
    """The names of the cell's run folders in `storage/experiment...` (`<library>/<experiment>`)."""
    return key_folders(list_folders(storage, experiment), key)


class Uploads:
    """Sends one cell's run folder to `storage` as its training goes (see the module docstring). `begin()` is
    called just before the training starts, `seen()` after every iteration, `finish(run_dir)` when the training
    ended (returning the copy's URL)."""

    def __init__(self, storage: str, log_root: Path, experiment: tuple[str, ...], key: str) -> None:
        check_storage(storage)  # the filesystem made now, before the training's call (an async one starts a thread)
        self.storage = storage
        self.log_root = log_root
        self.experiment = experiment
        self.key = key
        self.before: set[str] = set()
        self.folder: Path | None = None
        self.newest: object = None
        self.sent: dict[str, tuple[int, int]] = {}

    def _local(self) -> set[str]:
        return local_folders(self.log_root.joinpath(*self.experiment), self.key)

    def begin(self) -> None:
        """Note the cell's run folders already here: the training's is the one that appears after."""
        self.before = self._local()

    def seen(self) -> None:
        """Send the run folder if its run.json lists a newer checkpoint than the last one sent. A failed send is
        left for the next checkpoint or the end of the cell, which says why it failed."""
        if self.folder is None:
            made = sorted(self._local() - self.before)
            if not made:
                return
            self.folder = self.log_root.joinpath(*self.experiment, made[-1])
        newest = _newest_checkpoint(self.folder / "run.json")
        if newest is None or newest == self.newest:
            return
        try:
            self._send(self.folder)
        except Exception:  # a filesystem's own errors (botocore's, ...) are not all OSErrors
            return
        self.newest = newest

    def finish(self, run_dir: str) -> str:
        return self._send(Path(run_dir))

    def _send(self, folder: Path) -> str:
        parts = folder.relative_to(self.log_root).parts
        return upload_folder(folder, self.storage, parts, self.sent)


def _newest_checkpoint(manifest: Path) -> object:
    """The last entry of the `checkpoints` list of the run.json at `manifest` (None when there is none)."""
    try:
        data = parse_json(manifest.read_text(encoding="utf-8"), "run.json") if manifest.is_file() else None
    except (OSError, UnicodeDecodeError, UnreadableFile):
        return None
    entries = data.get("checkpoints") if isinstance(data, dict) else None
    return entries[-1] if isinstance(entries, list) and entries else None


def fetch(storage: str, relative: tuple[str, ...], log_root: Path, what: str) -> Path:
    """The run folder at `relative` in `storage`, copied to the same place below `log_root` (beside it with a
    suffix when another run holds that name) unless the same run is there already."""
    folder = log_root.joinpath(*relative)
    if same_run(folder, read_file(storage, (*relative, "run.json"), MAX_JSON_BYTES)):
        return folder
    folder = claim(log_root, relative)
    try:
        download_folder(storage, relative, log_root, *folder.relative_to(log_root).parts, what=what)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # the folder claimed here a moment ago, links never followed
        raise
    return folder


def last_stored_checkpoint(
    storage: str, experiment: tuple[str, ...], names: Iterable[str], budget: int
) -> tuple[tuple[str, ...], str, int, int] | None:
    """(folder parts, checkpoint file inside it, iteration, env steps) of the newest checkpoint listed in the
    run.json of a folder `names` in `storage/experiment...`, held by the copy, with iterations still to go
    (`0 < iteration < budget`); None when there is none. The names are checked as data: relative, no `..`."""
    for name in sorted(names, reverse=True):  # names start with the time: newest first
        folder = (*experiment, name)
        text = read_file(storage, (*folder, "run.json"), MAX_JSON_BYTES)
        try:
            manifest = parse_json(text.decode("utf-8"), "run.json") if text is not None else None
        except (UnicodeDecodeError, UnreadableFile):
            continue
        for file, iteration, env_steps in resumable(manifest, budget):
            try:
                below = name_parts(file, "a checkpoint listed in the stored run.json")
            except UnsafeArchive:  # an absolute name, `..`, a NUL
                continue
            if is_file(storage, (*folder, *below)):
                return folder, "/".join(below), iteration, env_steps
    return None
