"""Checkpoint files read once, as data (`rlrun.trust.checkpoints`): bounded reads, weights-only loads, refusals
that name what they refused in one line."""

from __future__ import annotations

import io
import os
import pickle

import pytest
import torch

from rlrun.errors import CorruptCheckpoint
from rlrun.trust import checkpoints


class Payload:
    """Unpickled by anything but a weights-only loader, it writes `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def saved(value) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def test_a_checkpoint_is_read_through_one_descriptor_and_its_bytes_are_loaded(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    path.write_bytes(saved({"weight": torch.ones(3), "iteration": 4}))
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda file, *args: opened.append(os.fspath(file)) or real_open(file, *args))
    state = checkpoints.read_weights(path, "a test checkpoint")
    assert opened == [str(path)]
    assert torch.equal(state["weight"], torch.ones(3)) and state["iteration"] == 4


def test_a_refused_global_is_named_in_one_line_without_torchs_advice_and_runs_nothing(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "model.pt"
    data = saved({"weight": torch.ones(1), "payload": Payload(marker)})
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpoint) as caught:
        checkpoints.read_weights(path, "a test checkpoint")
    message = str(caught.value)
    assert f"checkpoint {str(path)!r} ({len(data)} bytes) cannot be read as a test checkpoint" in message
    assert "'builtins.exec'" in message and "weights_only=True" in message
    assert "\n" not in message and "weights_only=False" not in message and "\x1b" not in message
    assert not marker.exists()


def test_a_plain_pickle_with_a_global_is_refused_naming_it(tmp_path):
    marker = tmp_path / "marker"
    data = pickle.dumps({"payload": Payload(marker)}, protocol=2)
    with pytest.raises(CorruptCheckpoint, match="cannot be read as a test checkpoint") as caught:
        checkpoints.load_weights(data, tmp_path / "model.pt", "a test checkpoint")
    assert "\n" not in str(caught.value) and "weights_only=False" not in str(caught.value)
    assert not marker.exists()


def test_globals_the_caller_allows_are_loaded():
    import numpy

    data = saved({"mean": numpy.float64(1.5)})
    with pytest.raises(CorruptCheckpoint, match="numpy"):
        checkpoints.load_weights(data, "model.pt", "a test checkpoint")
    core = numpy._core if hasattr(numpy, "_core") else numpy.core
    allowed = [core.multiarray.scalar, numpy.dtype, numpy.dtypes.Float64DType]
    assert checkpoints.load_weights(data, "model.pt", "a test checkpoint", allowed=allowed)["mean"] == 1.5


def test_a_file_larger_than_the_limit_is_refused_unread(tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(CorruptCheckpoint, match=r"\(2048 bytes\) cannot be read as a test checkpoint: it is larger"):
        checkpoints.read_bytes(path, "a test checkpoint", max_bytes=1024)
    assert checkpoints.read_bytes(path, "a test checkpoint", max_bytes=2048) == b"x" * 2048


def test_what_is_not_a_regular_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.pt"
    os.mkfifo(fifo)
    for path, reason in ((fifo, "not a regular file"), (tmp_path, "not a regular file"), (tmp_path / "no.pt", "")):
        with pytest.raises(CorruptCheckpoint, match=f"cannot be read as a test checkpoint: it .*{reason}") as caught:
            checkpoints.read_bytes(path, "a test checkpoint")
        assert "\n" not in str(caught.value)


def test_damaged_bytes_are_one_corrupt_checkpoint_whatever_torch_raises():
    for data in (b"", b"PK\x03\x04", b"\x80\x02", b"\x80\x04not a zip", os.urandom(512)):
        with pytest.raises(CorruptCheckpoint, match="cannot be read as a test checkpoint") as caught:
            checkpoints.load_weights(data, "model.pt", "a test checkpoint")
        assert "\n" not in str(caught.value)
