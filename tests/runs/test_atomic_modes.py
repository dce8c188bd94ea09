"""Run files respect the umask, as every other tool's output does: 0644 under umask 022, 0600 under 077.

The umask can only be read by setting it, so each test sets it for its own span and puts the caller's back.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlrun import runs

UMASKS = {0o022: (0o644, 0o755), 0o077: (0o600, 0o700), 0o002: (0o664, 0o775)}
"""umask -> (file mode, folder mode) that `open` and `mkdir` give under it."""


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("value", list(UMASKS), ids=oct)
def test_atomic_writes_give_the_mode_the_umask_gives(value, tmp_path):
    file_mode, _ = UMASKS[value]
    with umask(value):
        runs.atomic_write_text(tmp_path / "text.yaml", "a: 1\n")
        runs.atomic_save(tmp_path / "saved.bin", lambda name: Path(name).write_bytes(b"weights"))
        runs.atomic_write_text(tmp_path / "text.yaml", "a: 2\n")  # replacing a file keeps working
    assert mode(tmp_path / "text.yaml") == file_mode and mode(tmp_path / "saved.bin") == file_mode
    assert (tmp_path / "text.yaml").read_text() == "a: 2\n" and (tmp_path / "saved.bin").read_bytes() == b"weights"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["saved.bin", "text.yaml"]  # no temporary left


@pytest.mark.parametrize("value", [0o022, 0o077], ids=oct)
def test_a_writer_that_makes_its_file_private_still_leaves_the_umasks_mode(value, tmp_path):
    """`mkstemp`-style writers create 0600 files; the run file still gets the mode the umask gives."""

    def private_writer(name: str) -> None:
        descriptor = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(b"checkpoint")

    with umask(value):
        runs.atomic_save(tmp_path / "model.pt", private_writer)
    assert mode(tmp_path / "model.pt") == UMASKS[value][0]


@pytest.mark.parametrize("value", [0o022, 0o077], ids=oct)
def test_a_run_record_makes_folders_as_mkdir_does_and_files_as_open_does(value, tmp_path):
    file_mode, folder_mode = UMASKS[value]
    with umask(value):
        record = runs.RunRecord.create(
            tmp_path / "logs", "lib", "exp", None, {"library": "lib", "task": "t"}, {"agent.yaml": "a: 1\n"}
        )
        record.save_checkpoint("model.pt", lambda name: Path(name).write_bytes(b"weights"), iteration=1)
    assert mode(record.dir) == folder_mode and mode(record.dir / "params") == folder_mode
    assert mode(record.dir / "run.json") == file_mode and mode(record.dir / "params" / "agent.yaml") == file_mode
    assert mode(record.dir / "model.pt") == file_mode


@pytest.mark.parametrize("value", [0o022, 0o077], ids=oct)
def test_every_file_and_folder_of_a_training_run_follows_the_umask(value, log_root):
    import rlrun
    from support import SMALL_RSL_RL

    pytest.importorskip("rsl_rl")
    file_mode, folder_mode = UMASKS[value]
    with umask(value):
        result = rlrun.train(
            rlrun.TrainRequest(
                task="rlrun/Pendulum-v1",
                library="rsl_rl",
                num_envs=4,
                max_iterations=1,
                overrides=SMALL_RSL_RL,
                log_root=str(log_root),
                device="cpu",
            )
        )
    paths = [result.run_dir, *result.run_dir.rglob("*")]
    assert any(path.name.startswith("events.out.tfevents") for path in paths)
    wrong = {str(path.relative_to(log_root)): oct(mode(path)) for path in paths if not path.is_symlink()}
    wrong = {
        name: found
        for name, found in wrong.items()
        if int(found, 8) != (folder_mode if (log_root / name).is_dir() else file_mode)
    }
    assert wrong == {}
