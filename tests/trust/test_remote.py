"""Run folders through `--storage`: uploaded as they are, read back as data (no link, no '..', bounded)."""

from __future__ import annotations

import os

import pytest

from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.trust.archive import UnsafeArchive
from rlrun.trust.remote import check_storage, download_folder, read_file, upload_folder

pytest.importorskip("fsspec")


def run_folder(tmp_path):
    folder = tmp_path / "logs" / "sb3" / "bench" / "2026-01-01_00-00-00_abc"
    (folder / "params").mkdir(parents=True)
    (folder / "run.json").write_text('{"status": "completed"}', encoding="utf-8")
    (folder / "params" / "agent.yaml").write_text("n_steps: 8\n", encoding="utf-8")
    (folder / "model.zip").write_bytes(os.urandom(3000))
    return folder


def files_under(folder):
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


PARTS = ("sb3", "bench", "2026-01-01_00-00-00_abc")


@pytest.mark.parametrize("spelling", ["path", "file_url"])
def test_a_folder_goes_up_and_comes_back_byte_for_byte(tmp_path, spelling):
    folder = run_folder(tmp_path)
    bucket = tmp_path / "bucket"
    url = str(bucket) if spelling == "path" else f"file://{bucket}"
    assert check_storage(url) == f"file://{bucket}"
    stored = upload_folder(folder, url, PARTS)
    assert stored == f"file://{bucket}/" + "/".join(PARTS)
    assert files_under(bucket.joinpath(*PARTS)) == files_under(folder)
    assert read_file(url, (*PARTS, "run.json"), 1000) == b'{"status": "completed"}'
    assert read_file(url, (*PARTS, "model.zip"), 1000) is None  # over the bound
    home = download_folder(url, PARTS, tmp_path / "driver", *PARTS, what="the run folder")
    assert home == tmp_path.joinpath("driver", *PARTS) and files_under(home) == files_under(folder)


def test_a_link_planted_in_the_storage_is_refused_before_anything_is_written(tmp_path):
    folder = run_folder(tmp_path)
    bucket = tmp_path / "bucket"
    upload_folder(folder, str(bucket), PARTS)
    secret = tmp_path / "secret"
    secret.write_text("not yours", encoding="utf-8")
    (bucket.joinpath(*PARTS) / "metrics.csv").symlink_to(secret)
    with pytest.raises(UnsafeArchive, match=r"'metrics\.csv', which is not a file or a folder"):
        download_folder(str(bucket), PARTS, tmp_path / "driver", *PARTS, what="the run folder")
    assert not (tmp_path / "driver").exists()


def test_a_folder_over_the_bound_is_refused_before_anything_is_written(tmp_path):
    folder = run_folder(tmp_path)
    upload_folder(folder, str(tmp_path / "bucket"), PARTS)
    with pytest.raises(UnsafeArchive, match="holds more than 1000 bytes of files"):
        download_folder(str(tmp_path / "bucket"), PARTS, tmp_path / "driver", *PARTS, what="x", limit=1000)
    assert not (tmp_path / "driver").exists()


def test_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(UnsafeArchive, match="is empty or missing"):
        download_folder(str(tmp_path / "bucket"), PARTS, tmp_path / "driver", *PARTS, what="the run folder")


def test_a_protocol_fsspec_lacks_or_cannot_open_here_is_one_line(tmp_path):
    with pytest.raises(InvalidArgument, match="'foo://x' is no filesystem fsspec knows"):
        check_storage("foo://x")
    if importlib_util_find("s3fs") is None:
        with pytest.raises(MissingDependency, match="s3fs"):
            check_storage("s3://bucket/prefix")
    with pytest.raises(InvalidArgument):
        check_storage("")


def importlib_util_find(name):
    import importlib.util

    return importlib.util.find_spec(name)
