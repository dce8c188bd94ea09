"""A checkpoint is read once: the bytes rlrun checks are the bytes the library loads, never the file again.

For every library, a genuine checkpoint is played, exported and resumed while each read of it through rlrun's
reader (`rlrun.trust.checkpoints.read_bytes`) returns the genuine bytes and then replaces the file with one
that writes a marker file when anything unpickles it the library's own way (`torch.load(weights_only=False)`,
`pickle.load`, SB3's cloudpickle). A library that opened the path again would run it. Each test also shows
that the replaced file does run code when loaded that way, so that it can fail.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

import rlrun
from rlrun.errors import CorruptCheckpoint
from rlrun.libraries import sb3_checkpoints, skrl_checkpoints
from rlrun.trust import checkpoints
from support import CONTRACT_CASES

TASK = "rlrun/Pendulum-v1"
CASES = ("rsl_rl", "skrl", "skrl_jax", "sb3", "rl_games", "torchrl", "torchrl_sac")
READERS = (checkpoints, sb3_checkpoints, skrl_checkpoints)
"""The modules that call `read_bytes` by that name."""


class Payload:
    """Unpickled by anything but a weights-only loader (or rlrun's globals-free one), it writes `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def planted(genuine: bytes, marker: Path) -> bytes:
    """A file of the genuine checkpoint's kind that runs `Payload(marker)` when its library's loader reads it."""
    archive = zipfile.ZipFile(io.BytesIO(genuine)) if zipfile.is_zipfile(io.BytesIO(genuine)) else None
    if archive is not None and "data" in archive.namelist():  # SB3: cloudpickled values in `data`
        return sb3_with_payloads(archive, marker)
    if archive is not None:  # a torch archive: torch.load(weights_only=False)
        buffer = io.BytesIO()
        torch.save({"payload": Payload(marker)}, buffer)
        return buffer.getvalue()
    return pickle.dumps({"policy": Payload(marker)}, protocol=4)  # SKRL's JAX pickle: pickle.load


PICKLED = ("policy_class", "observation_space", "action_space", "learning_rate", "lr_schedule")
"""The values of an SB3 zip's `data` that SB3's `load` decodes with cloudpickle."""


def sb3_with_payloads(archive: zipfile.ZipFile, marker: Path) -> bytes:
    """The SB3 zip with every cloudpickled value of `data` replaced by `Payload(marker)`, its plain fields kept."""
    data = json.loads(archive.read("data"))
    for key in PICKLED:
        if isinstance(data.get(key), dict):
            data[key][":serialized:"] = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as planted_zip:
        for name in archive.namelist():
            planted_zip.writestr(name, json.dumps(data) if name == "data" else archive.read(name))
    return buffer.getvalue()


def loaded_the_librarys_way(path: Path) -> None:
    """Load the file as the libraries' own loaders do (what rlrun never does)."""
    if zipfile.is_zipfile(path) and "data" in zipfile.ZipFile(path).namelist():
        from stable_baselines3 import PPO

        with pytest.raises(Exception):  # noqa: B017  # the payload runs first, then SB3 fails on its value
            PPO.load(path)
    elif zipfile.is_zipfile(path):
        torch.load(path, weights_only=False)
    else:
        with open(path, "rb") as file:
            pickle.load(file)  # the point: this runs the payload


@pytest.fixture
def swapped(monkeypatch, tmp_path):
    """`swap(checkpoint)`: from now on, every read of `checkpoint` through rlrun's reader returns its genuine
    bytes and leaves a planted file in its place. Returns the marker the planted file writes."""
    real = checkpoints.read_bytes
    marker = tmp_path / "marker"

    def swap(checkpoint: Path) -> Path:
        genuine = checkpoint.read_bytes()
        replacement = planted(genuine, marker)
        reads = []

        def read_bytes(path, what, **kwargs):
            if Path(path).resolve() != checkpoint.resolve():
                return real(path, what, **kwargs)
            reads.append(path)
            Path(path).write_bytes(replacement)  # replaced right after rlrun read it
            return genuine

        for module in READERS:
            monkeypatch.setattr(module, "read_bytes", read_bytes)
        swap.reads = reads
        return marker

    return swap


@pytest.mark.parametrize("case", CASES)
def test_a_checkpoint_replaced_after_rlrun_read_it_never_runs_code(case, tmp_path, swapped):
    if case == "skrl_jax":
        pytest.importorskip("jax")
    train_kwargs = dict(CONTRACT_CASES[case][0])
    root = str(tmp_path / "logs")
    trained = rlrun.train(rlrun.TrainRequest(task=TASK, seed=1, log_root=root, **train_kwargs))
    common = {key: train_kwargs[key] for key in ("library", "algorithm", "ml_framework") if key in train_kwargs}
    checkpoint = str(trained.checkpoint)
    marker = swapped(trained.checkpoint)

    played = rlrun.play(
        rlrun.PlayRequest(task=TASK, checkpoint=checkpoint, num_episodes=2, num_envs=2, log_root=root, **common)
    )
    assert len(played.returns) == 2 and not marker.exists()
    if case != "skrl_jax":  # rlrun exports PyTorch agents only
        exported = rlrun.export(rlrun.ExportRequest(task=TASK, checkpoint=checkpoint, log_root=root, **common))
        assert exported.files and not marker.exists()
    resumed_kwargs = {**train_kwargs, "max_iterations": 1, "resume": True, "checkpoint": checkpoint}
    resumed = rlrun.train(rlrun.TrainRequest(task=TASK, seed=1, log_root=root, **resumed_kwargs))
    assert resumed.iterations == trained.iterations + 1 and not marker.exists()
    assert len(swapped.reads) >= 3, "every surface read the checkpoint through rlrun's reader"

    loaded_the_librarys_way(trained.checkpoint)  # the planted file is live: a second read by the library runs it
    assert marker.exists()


@pytest.mark.parametrize("case", ["rsl_rl", "skrl", "skrl_jax", "sb3", "rl_games", "torchrl"])
def test_a_planted_checkpoint_is_refused_in_one_line_naming_what_it_refers_to(case, tmp_path, capsys):
    """A checkpoint file handed on its own, whose unpickling would run code, is one line on stderr, exit 2."""
    if case == "skrl_jax":
        pytest.importorskip("jax")
    marker = tmp_path / "marker"
    kwargs = CONTRACT_CASES[case][0]
    path = tmp_path / ("model.zip" if case == "sb3" else "model.pickle" if case == "skrl_jax" else "model.pt")
    if case == "sb3":  # cloudpickle in `data` is never decoded, so the payload sits in a tensor entry
        buffer = io.BytesIO()
        torch.save({"payload": Payload(marker)}, buffer)
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("data", json.dumps({"policy_class": {"__module__": "stable_baselines3.common.policies"}}))
            archive.writestr("policy.pth", buffer.getvalue())
            archive.writestr("_stable_baselines3_version", "2.9.2")
    else:
        genuine = io.BytesIO()
        torch.save({"weight": torch.zeros(1)}, genuine)
        path.write_bytes(planted(genuine.getvalue(), marker) if case != "skrl_jax" else planted(b"", marker))
    argv = ["play", "--task", TASK, "--library", kwargs["library"], "--checkpoint", str(path)]
    argv += ["--ml_framework", kwargs.get("ml_framework", "torch"), "--log_root", str(tmp_path / "logs")]
    assert rlrun.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"checkpoint {str(path)!r}" in line and "cannot be read as" in line
    assert "weights_only=False" not in line and not marker.exists()
    if case != "skrl_jax":
        assert "'builtins.exec'" in line


def test_a_checkpoint_is_opened_once_per_read_and_never_handed_to_torch_as_a_path(tmp_path, monkeypatch):
    """RSL-RL's play: the path is opened by rlrun's reader only, and `torch.load` only ever gets bytes."""
    import builtins
    import os

    root = str(tmp_path / "logs")
    trained = rlrun.train(rlrun.TrainRequest(task=TASK, seed=1, log_root=root, **CONTRACT_CASES["rsl_rl"][0]))
    target = str(trained.checkpoint)
    copy = tmp_path / "copy.pt"
    shutil.copy(target, copy)
    opened, loaded = [], []
    real_open, real_os_open, real_load = builtins.open, os.open, torch.load

    def record_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.fspath(file) == str(copy):
            opened.append("open")
        return real_open(file, *args, **kwargs)

    def record_os_open(file, *args, **kwargs):
        if os.fspath(file) == str(copy):
            opened.append("os.open")
        return real_os_open(file, *args, **kwargs)

    def record_load(file, *args, **kwargs):
        loaded.append(type(file).__name__)
        return real_load(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", record_open)
    monkeypatch.setattr(os, "open", record_os_open)
    monkeypatch.setattr(torch, "load", record_load)
    small = CONTRACT_CASES["rsl_rl"][0]["overrides"]
    request = rlrun.PlayRequest(
        task=TASK, library="rsl_rl", checkpoint=str(copy), num_episodes=1, log_root=root, overrides=small
    )
    rlrun.play(request)
    assert opened == ["os.open", "os.open"]  # planning's check, then the load's read
    assert set(loaded) == {"BytesIO"}


def test_a_checkpoint_that_is_not_there_when_loaded_is_one_user_error(tmp_path, monkeypatch):
    """Removed between planning and the load: the load's own read fails cleanly, nothing falls back to the path."""
    root = str(tmp_path / "logs")
    trained = rlrun.train(rlrun.TrainRequest(task=TASK, seed=1, log_root=root, **CONTRACT_CASES["rsl_rl"][0]))
    from rlrun.libraries import rsl_rl

    check = rsl_rl.check_checkpoint

    def check_then_remove(path):
        check(path)
        Path(path).unlink()

    monkeypatch.setattr(rsl_rl, "check_checkpoint", check_then_remove)
    request = rlrun.PlayRequest(
        task=TASK, library="rsl_rl", checkpoint=str(trained.checkpoint), num_episodes=1, log_root=root
    )
    with pytest.raises(CorruptCheckpoint, match="cannot be read as an RSL-RL checkpoint: it cannot be opened"):
        rlrun.play(request)
