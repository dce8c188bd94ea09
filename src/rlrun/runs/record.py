"""What a training run records: its directory and run.json as it goes (`RunRecord`), versions, results.

A checkpoint and the run.json that lists it are written as one batch (`RunRecord.save_checkpoint`): both
files fsynced, the checkpoint moved into place first, then run.json, then one fsync of the directory. So
run.json never lists a checkpoint that is not on disk, a crash between the two moves included, and a
checkpoint costs three fsyncs instead of the four of two separate atomic writes. Checkpoints saved at one
moment are one batch (`save_checkpoints`): SKRL's best and current agent take five fsyncs, not eight. A
training's record commits those batches in the background (`background=True`, `atomic.BackgroundCommits`):
the library goes on training while the disk confirms, and every later write of run.json waits for them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlrun.runs.atomic import BackgroundCommits, Folders, ForegroundCommits, written_batch
from rlrun.runs.manifest import MANIFEST, MANIFEST_VERSION, manifest_text, new_run_dir, utc_now, write_manifest
from rlrun.trust.paths import inside


class RunRecord:
    """A training run's directory and its manifest, written atomically at every change.

    `create` claims the run directory, writes `params/agent.yaml`, `params/env.yaml` and a first
    `run.json` with status `running` (one batch, committed as a checkpoint's is); `save_checkpoint` writes
    each checkpoint the library saves and lists it; `finish` sets the final status.

    With `background=True` a checkpoint's batch is committed on a thread (see the module docstring):
    `save_checkpoint` returns once the files are written, before they are in place, and `settle` waits for
    them (and raises what their commit raised). `write` and `finish` settle first; read `manifest`
    after `settle` to see the newest checkpoint.
    """

    def __init__(self, directory: Path, manifest: dict[str, Any], background: bool = False) -> None:
        self.dir = directory
        self.manifest = manifest
        self._commits = BackgroundCommits() if background else ForegroundCommits()
        self._folders = Folders()  # swept once, the new-file mode probed once, temporary folders reused
        self._listed: list[dict[str, Any]] = manifest.get("checkpoints", [])
        """The entries of the newest run.json handed to a commit (the next builds on it)."""

    @classmethod
    def create(
        cls,
        log_root: Path,
        library: str,
        experiment: str,
        run_name: str | None,
        manifest: dict[str, Any],
        params: dict[str, str],
        background: bool = False,
    ) -> RunRecord:
        """Claim a new run directory and write its parameter files (name -> YAML text) and manifest."""
        record = cls(
            new_run_dir(log_root, library, experiment, run_name),
            {
                "version": MANIFEST_VERSION,
                **manifest,
                "created_at": utc_now(),
                "status": "running",
                "checkpoints": [],
            },
            background,
        )
        (record.dir / "params").mkdir(parents=True)
        # One batch, run.json last (a run.json is never there without its parameters), committed like a
        # checkpoint's: in the background, the training starts while the disk confirms (6 fsyncs).
        files = {record.dir / "params" / name: text for name, text in params.items()}
        files[record.dir / MANIFEST] = manifest_text(record.manifest)
        with written_batch(*files, folders=record._folders) as batch:
            for temporary, text in zip(batch.temporaries, files.values(), strict=True):
                temporary.write_text(text, encoding="utf-8")
        record._commits.submit(batch, [], lambda moved: None)
        return record

    def write(self) -> None:
        self.settle()
        write_manifest(self.dir, self.manifest)

    def settle(self) -> None:
        """Wait until every checkpoint saved so far is in place and listed (at once without `background`)."""
        try:
            self._commits.wait()
        finally:
            self._listed = self.manifest["checkpoints"]
            self._folders.release()  # no batch is in flight: their temporary folders go

    def save_checkpoint(self, name: str, save: Callable[[str], Any], **fields: Any) -> Path:
        """Write checkpoint file `name` (a path inside the run) with `save(temporary_path)` and list it in
        run.json with `fields`, replacing an entry of the same file (saved again); return the file's path.
        A batch of one (see `save_checkpoints`)."""
        (path,) = self.save_checkpoints([(name, save, fields)])
        return path

    def save_checkpoints(self, checkpoints: Sequence[tuple[str, Callable[[str], Any], dict[str, Any]]]) -> list[Path]:
        """Write several checkpoints saved at one moment (`(name, save, fields)` each, as for `save_checkpoint`)
        and list them all in one run.json; return their paths.

        One batch of atomic writes (`atomic.written_batch`): the checkpoints are moved into place in the given
        order, then run.json. Two checkpoints of one moment (SKRL's best agent and its current one) so cost
        5 fsyncs instead of 8, one run.json instead of two. Once a checkpoint is in place the record lists it,
        even when an exception stops the batch before run.json's move: the next write of run.json (`finish`)
        then lists files that exist, and only those.
        """
        names = [name for name, _, _ in checkpoints]
        paths = [inside(self.dir / name, self.dir, "checkpoint") for name in names]
        new: dict[str, dict[str, Any]] = {}
        with written_batch(*paths, self.dir / MANIFEST, folders=self._folders) as batch:
            *temporaries, manifest = batch.temporaries
            for (name, save, fields), temporary in zip(checkpoints, temporaries, strict=True):
                save(str(temporary))
                new[name] = {"file": name, **fields, "saved_at": utc_now()}
            entries = [entry for entry in self._listed if entry["file"] not in new] + list(new.values())
            manifest.write_text(manifest_text({**self.manifest, "checkpoints": entries}), encoding="utf-8")
        listed_before = self._listed

        def listed(moved: list[Path]) -> None:
            if moved:  # the checkpoints in place are listed, even if run.json's move failed (all: `entries`)
                landed = {name for name, path in zip(names, paths, strict=True) if path in moved}
                kept = [entry for entry in listed_before if entry["file"] not in landed]
                self.manifest["checkpoints"] = kept + [new[name] for name in names if name in landed]

        try:  # at once, or after the batches before it in the background (see `settle`)
            self._commits.submit(batch, [], listed)
        except BaseException:
            self._listed = self.manifest["checkpoints"]
            raise
        self._listed = entries
        return paths

    def finish(self, status: str, **fields: Any) -> None:
        """Set the final status and write run.json, after every checkpoint's commit (a commit's error is raised
        here once; a second `finish`, as a training's failure path makes, then writes what did land)."""
        self.settle()
        self.manifest.update(status=status, finished_at=utc_now(), **fields)
        self.write()


def versions(distribution: str) -> dict[str, str | None]:
    """The versions a manifest records: rlrun, the library's distribution, torch, Gymnasium and Python."""
    import sys

    return {
        "rlrun": installed("rlrun"),
        distribution: installed(distribution),
        "torch": installed("torch"),
        "gymnasium": installed("gymnasium"),
        "python": sys.version.split()[0],
    }


@functools.cache
def installed(name: str) -> str | None:
    """The installed version of distribution `name`, or None; read once per process (reading the package metadata
    is slow, and what a process has imported does not change when a package is upgraded under it)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def jsonable(result: Any, limit: int | None = 1000) -> dict[str, Any]:
    """A result dataclass as a JSON-ready dict: paths as strings, sequences as lists, those of `limit`
    items or more left out (None: none)."""
    import dataclasses

    def plain(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, (tuple, list)):
            return [plain(item) for item in value]
        return value

    return {
        key: plain(value)
        for key, value in dataclasses.asdict(result).items()
        if limit is None or not isinstance(value, (tuple, list)) or len(value) < limit
    }
