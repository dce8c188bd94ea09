"""Atomic writes: a reader sees the old file or the new one, and a batch lands in order, whatever stops it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlrun import runs
from rlrun.runs import atomic


def test_atomic_write_leaves_the_old_file_and_no_temporary_when_writing_fails(tmp_path):
    target = tmp_path / "model.pt"
    target.write_text("old")

    def broken(path):
        with open(path, "w") as file:
            file.write("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs.atomic_save(target, broken)
    assert target.read_text() == "old"
    assert [path.name for path in tmp_path.iterdir()] == ["model.pt"]
    runs.atomic_write_text(target, "new")
    assert target.read_text() == "new" and [path.name for path in tmp_path.iterdir()] == ["model.pt"]


def test_temporaries_of_dead_writers_are_swept_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".model_3.pt.{dead.pid}.abc{runs.TEMPORARY_SUFFIX}"
    mine = tmp_path / f".model_4.pt.{os.getpid()}.def{runs.TEMPORARY_SUFFIX}"
    interrupted = tmp_path / f".model_5.pt.{os.getpid()}.ghi{runs.TEMPORARY_SUFFIX}"
    stale.write_bytes(b"partial")
    mine.write_bytes(b"being written")
    interrupted.mkdir()  # this process's, left by a Ctrl-C while the folder was being made: nobody writes in it
    atomic._WRITING.add(mine.name)  # another thread of this process writes in it now
    try:
        runs.atomic_write_text(tmp_path / "run.json", "{}")
    finally:
        atomic._WRITING.discard(mine.name)
    assert not stale.exists() and mine.exists() and not interrupted.exists()


# --- batches ------------------------------------------------------------------------------------------------


def steps_of(monkeypatch, interrupt_at: int | None = None) -> list[tuple[str, int | str]]:
    """The fsyncs (by inode) and moves (by target name) that follow, in order; a KeyboardInterrupt instead of
    step number `interrupt_at` (counted from 1), as a Ctrl-C landing there would."""
    steps: list[tuple[str, int | str]] = []
    fsync, replace = os.fsync, os.replace

    def step(kind: str, what: int | str) -> None:
        steps.append((kind, what))
        if len(steps) == interrupt_at:
            raise KeyboardInterrupt

    def counted_fsync(descriptor: int) -> None:
        step("fsync", os.fstat(descriptor).st_ino)
        fsync(descriptor)

    def counted_replace(source, target) -> None:
        step("move", Path(target).name)
        replace(source, target)

    monkeypatch.setattr(os, "fsync", counted_fsync)
    monkeypatch.setattr(os, "replace", counted_replace)
    return steps


def named(steps, *paths: Path) -> list[tuple[str, int | str]]:
    """`steps` with each fsynced inode given the name of the file or folder it is (now) at."""
    names = {path.stat().st_ino: path.name for path in paths}
    return [(kind, names.get(what, what) if kind == "fsync" else what) for kind, what in steps]


def write_batch(paths: list[Path], text: str, moved: list[Path] | None = None) -> None:
    with runs.atomic_paths(*paths, moved=moved) as temporaries:
        for temporary in temporaries:
            temporary.write_text(text)


def test_a_batch_fsyncs_every_file_before_the_first_move_and_its_folder_once_after_the_last(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir()
    files = [folder / "model_1.pt", folder / "run.json"]
    steps = steps_of(monkeypatch)
    write_batch(files, "new")
    assert named(steps, *files, folder) == [
        ("fsync", "model_1.pt"),
        ("fsync", "run.json"),
        ("move", "model_1.pt"),
        ("move", "run.json"),
        ("fsync", "run"),
    ]
    assert [path.read_text() for path in files] == ["new", "new"]
    assert sorted(os.listdir(folder)) == ["model_1.pt", "run.json"]  # no temporary left


def test_a_batch_over_two_folders_fsyncs_the_first_folder_before_moving_into_the_second(tmp_path, monkeypatch):
    """SKRL's checkpoints live in `checkpoints/`, its run.json one level up: the checkpoint's move must reach
    the disk before run.json's can."""
    (tmp_path / "checkpoints").mkdir()
    files = [tmp_path / "checkpoints" / "agent_8.pt", tmp_path / "run.json"]
    steps = steps_of(monkeypatch)
    write_batch(files, "new")
    assert named(steps, *files, tmp_path / "checkpoints", tmp_path) == [
        ("fsync", "agent_8.pt"),
        ("fsync", "run.json"),
        ("move", "agent_8.pt"),
        ("fsync", "checkpoints"),
        ("move", "run.json"),
        ("fsync", tmp_path.name),
    ]
    assert not list(tmp_path.rglob(f"*{runs.TEMPORARY_SUFFIX}"))


MOVED_BEFORE = {None: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 2, 7: 3}
"""A batch of three files: steps 1-3 fsync the files, 4-6 move them, 7 fsyncs their folder. An interrupt
instead of step n (None: in the writer) leaves this many files new."""


@pytest.mark.parametrize("interrupt_at", list(MOVED_BEFORE), ids=lambda n: f"step {n}" if n else "in the writer")
def test_an_interrupt_anywhere_in_a_batch_leaves_no_temporary_and_never_a_later_file_new_before_an_earlier(
    interrupt_at, tmp_path, monkeypatch
):
    files = [tmp_path / "model_1.pt", tmp_path / "run.json", tmp_path / "notes.txt"]
    for path in files:
        path.write_text("old")
    moved: list[Path] = []
    steps = steps_of(monkeypatch, interrupt_at)

    def interrupted_writer():
        with runs.atomic_paths(*files, moved=moved) as temporaries:
            for temporary in temporaries:
                temporary.write_text("new")
            if interrupt_at is None:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_writer()
    monkeypatch.undo()
    contents = [path.read_text() for path in files]
    new = contents.count("new")
    assert contents == ["new"] * new + ["old"] * (len(files) - new)  # the earlier files, if any
    assert moved == files[:new]
    assert new == MOVED_BEFORE[interrupt_at] and len(steps) == (interrupt_at or 0)
    assert sorted(os.listdir(tmp_path)) == sorted(path.name for path in files)  # no temporary left


def test_a_batch_refuses_the_same_path_twice_before_writing_anything(tmp_path):
    with pytest.raises(ValueError, match="distinct paths"), runs.atomic_paths(tmp_path / "a", tmp_path / "a"):
        pass
    assert list(tmp_path.iterdir()) == []
