"""Run folders that come home from another node: same path, kept when already there, beside a taken name."""

from __future__ import annotations

import io
import tarfile

import pytest

from rlrun.runs.transfer import pack_runs, unpack_home
from rlrun.trust.archive import UnsafeArchive, pack_folder

PARTS = ("sb3", "bench", "2026-01-01_00-00-00_abc")


def node_run(root, name=PARTS[-1], manifest='{"status": "completed"}'):
    folder = root.joinpath(*PARTS[:-1], name)
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(manifest, encoding="utf-8")
    (folder / "model.pt").write_bytes(b"\x00" * 600)
    return folder


def files_under(folder):
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_a_folder_comes_home_at_the_same_path(tmp_path):
    sent = node_run(tmp_path / "node")
    home = unpack_home(pack_folder(sent), tmp_path / "driver", PARTS, "the run folder")
    assert home == tmp_path.joinpath("driver", *PARTS) and files_under(home) == files_under(sent)


def test_the_same_run_already_there_is_kept_and_another_run_with_its_name_gets_one_beside(tmp_path):
    sent = node_run(tmp_path / "node")
    data = pack_folder(sent)
    shared = node_run(tmp_path / "shared")  # the node and the driver share this disk: the run is there
    assert unpack_home(data, tmp_path / "shared", PARTS, "x") == shared
    assert len(list(shared.parent.iterdir())) == 1
    taken = node_run(tmp_path / "driver", manifest='{"status": "running"}')  # a run here started that second
    home = unpack_home(data, tmp_path / "driver", PARTS, "x")
    assert home == taken.parent / f"{PARTS[-1]}_2" and files_under(home) == files_under(sent)
    assert (taken / "run.json").read_text(encoding="utf-8") == '{"status": "running"}'


def test_a_refused_archive_leaves_no_claimed_folder(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        link = tarfile.TarInfo("checkpoints")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        archive.addfile(link)
    with pytest.raises(UnsafeArchive, match="'checkpoints', which is not a file or a folder"):
        unpack_home(buffer.getvalue(), tmp_path / "driver", PARTS, "the run folder")
    assert list(tmp_path.joinpath("driver", *PARTS[:-1]).iterdir()) == []


def test_pack_runs_packs_while_the_folders_fit_the_bound_together_and_says_why_it_stopped(tmp_path):
    first = node_run(tmp_path / "node", "a")
    second = node_run(tmp_path / "node", "b")
    archives, why = pack_runs([str(first), str(second)], limit=1000)
    assert list(archives) == [str(first)] and why is not None and "UnsafeArchive" in why and "\n" not in why
    archives, why = pack_runs([str(first), str(second)], limit=10_000)
    assert list(archives) == [str(first), str(second)] and why is None
