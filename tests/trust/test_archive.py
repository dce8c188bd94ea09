"""A run folder sent back from another machine is data (`rlrun.trust.archive`): what `pack_folder` makes comes back
byte for byte, and every crafted archive is refused in one line before anything is written."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from rlrun.trust.archive import UnsafeArchive, pack_folder, unpack_folder
from rlrun.trust.paths import OutsidePath


def make_run(folder):
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "model_2.pt").write_bytes(bytes(range(256)) * 40)
    (folder / "metrics.csv").write_text("iteration,mean_return\n1,3.5\n", encoding="utf-8")
    (folder / "empty").mkdir()
    return folder


def files(folder):
    return {
        path.relative_to(folder).as_posix(): (path.read_bytes() if path.is_file() else None)
        for path in sorted(folder.rglob("*"))
    }


def test_a_packed_run_folder_unpacks_byte_for_byte_at_its_relative_path(tmp_path):
    run = make_run(tmp_path / "node" / "runs" / "sb3" / "bench" / "2026-12-05_run")
    data = pack_folder(run)
    folder = unpack_folder(data, tmp_path / "driver", "sb3", "bench", "2026-12-05_run", what="the archive")
    assert folder == tmp_path / "driver" / "sb3" / "bench" / "2026-12-05_run"
    assert files(folder) == files(run)
    assert set(files(folder)) == {"checkpoints", "checkpoints/model_2.pt", "empty", "metrics.csv"}


def test_a_run_folder_over_the_bound_is_refused_naming_the_bound(tmp_path):
    run = make_run(tmp_path / "run")
    with pytest.raises(UnsafeArchive) as refused:
        pack_folder(run, limit=1000)
    message = str(refused.value)
    assert "more than 1000 bytes" in message and "--storage" in message and "\n" not in message
    pack_folder(run, limit=20_000)  # under the bound: packed


def test_a_run_folder_holding_a_link_is_not_packed(tmp_path):
    run = make_run(tmp_path / "run")
    (run / "elsewhere").symlink_to("/etc/hostname")
    with pytest.raises(UnsafeArchive, match="'elsewhere', which is not a file or a folder"):
        pack_folder(run)


def crafted(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for info, content in members:
            archive.addfile(info, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, content: bytes | None = b"data", **fields) -> tuple:
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind == tarfile.REGTYPE and content is not None:
        info.size = len(content)
    for key, value in fields.items():
        setattr(info, key, value)
    return info, content if kind == tarfile.REGTYPE else None


BAD = {
    "absolute": (member("/tmp/owned"), "is an absolute path"),
    "dot-dot": (member("checkpoints/../../owned"), "'..' part"),
    "dot-dot-alone": (member(".."), "'..' part"),
    "backslash": (member("a\\..\\b"), "backslash"),
    "symlink": (member("link", tarfile.SYMTYPE, linkname="/etc/passwd"), "not a file or a folder"),
    "hardlink": (member("hard", tarfile.LNKTYPE, linkname="metrics.csv"), "not a file or a folder"),
    "fifo": (member("pipe", tarfile.FIFOTYPE), "not a file or a folder"),
    "device": (member("disk", tarfile.BLKTYPE), "not a file or a folder"),
    "sparse": (member("sparse", tarfile.GNUTYPE_SPARSE), "not a file or a folder"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_crafted_member_is_refused_before_anything_is_written(tmp_path, case):
    bad, says = BAD[case]
    data = crafted(member("metrics.csv"), bad)
    with pytest.raises(UnsafeArchive) as refused:
        unpack_folder(data, tmp_path / "root", "run", what="the archive")
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "root").exists(), "nothing is written when any member is refused"
    assert not (tmp_path / "owned").exists()


def test_members_whose_sizes_add_up_past_the_bound_are_refused(tmp_path):
    data = crafted(member("a", content=b"x" * 600), member("b", content=b"y" * 600))
    with pytest.raises(UnsafeArchive, match="more than 1000 bytes"):
        unpack_folder(data, tmp_path / "root", "run", what="the archive", limit=1000)
    assert not (tmp_path / "root").exists()


def test_garbage_is_not_an_archive(tmp_path):
    with pytest.raises(UnsafeArchive, match="not a readable tar archive"):
        unpack_folder(b"\x00not a tar" * 100, tmp_path / "root", "run", what="the archive")


def test_a_link_planted_where_a_file_goes_is_never_written_through(tmp_path):
    target = tmp_path / "victim"
    target.write_text("keep", encoding="utf-8")
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    (run / "metrics.csv").symlink_to(target)
    with pytest.raises(FileExistsError):
        unpack_folder(crafted(member("metrics.csv")), tmp_path / "root", "run", what="the archive")
    assert target.read_text(encoding="utf-8") == "keep"
    os.unlink(run / "metrics.csv")
    (run / "checkpoints").symlink_to(tmp_path)
    with pytest.raises(OutsidePath, match="is a link"):
        unpack_folder(crafted(member("checkpoints/model.pt")), tmp_path / "root", "run", what="the archive")
    assert not (tmp_path / "model.pt").exists()
