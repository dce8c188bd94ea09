"""Run folders through `--storage`: uploaded as they are, read back as data (no link, no '..', bounded)."""

from __future__ import annotations

import os

import pytest

from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.trust.archive import UnsafeArchive
from rlrun.trust.remote import check_storage, download_folder, is_file, list_folders, read_file, upload_folder

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


def test_a_folder_sent_again_sends_only_what_changed_and_run_json_last(tmp_path, monkeypatch):
    import fsspec.implementations.local

    folder = run_folder(tmp_path)
    bucket = tmp_path / "bucket"
    sent: dict = {}
    copied: list[str] = []
    put = fsspec.implementations.local.LocalFileSystem.put_file

    def recording(self, source, destination, *args, **kwargs):
        copied.append(os.path.relpath(source, folder))
        return put(self, source, destination, *args, **kwargs)

    monkeypatch.setattr(fsspec.implementations.local.LocalFileSystem, "put_file", recording)
    upload_folder(folder, str(bucket), PARTS, sent)
    assert sorted(copied) == ["model.zip", "params/agent.yaml", "run.json"] and copied[-1] == "run.json"
    copied.clear()
    (folder / "model_2.zip").write_bytes(b"newer")
    (folder / "run.json").write_text('{"status": "running", "checkpoints": [{"file": "model_2.zip"}]}')
    upload_folder(folder, str(bucket), PARTS, sent)
    assert copied == ["model_2.zip", "run.json"]  # the checkpoint before the run.json that lists it
    assert files_under(bucket.joinpath(*PARTS)) == files_under(folder)


def test_the_storage_lists_folders_and_files_but_never_links(tmp_path):
    folder = run_folder(tmp_path)
    bucket = tmp_path / "bucket"
    upload_folder(folder, str(bucket), PARTS)
    (bucket / "sb3" / "bench" / "linked").symlink_to(tmp_path / "logs", target_is_directory=True)
    (bucket / "sb3" / "bench" / "a_file").write_text("x", encoding="utf-8")
    assert list_folders(str(bucket), ("sb3", "bench")) == {PARTS[-1]}
    assert list_folders(str(bucket), ("sb3", "nothing")) == set()
    assert is_file(str(bucket), (*PARTS, "model.zip")) and not is_file(str(bucket), (*PARTS, "params"))
    (bucket.joinpath(*PARTS) / "linked.zip").symlink_to(folder / "model.zip")
    assert not is_file(str(bucket), (*PARTS, "linked.zip")) and not is_file(str(bucket), (*PARTS, "none.zip"))


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
