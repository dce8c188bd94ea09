"""SKRL's checkpoint writer: a best agent found at a checkpoint moment shares the current agent's file."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlrun import runs
from rlrun.libraries import skrl_checkpoints
from rlrun.libraries.skrl_checkpoints import CheckpointWriter


class Agent:
    """What the writer reads of a SKRL agent: its modules, and the best ones as SKRL's `post_interaction` keeps
    them (a deep copy of the weights, the timestep, whether they were saved)."""

    def __init__(self) -> None:
        self.checkpoint_modules = {"policy": torch.nn.Linear(3, 2), "value": torch.nn.Linear(3, 1)}
        self.checkpoint_best_modules = {"modules": {}, "timestep": 0, "saved": False}

    def _get_internal_value(self, module):
        return module.state_dict()

    def best_now(self, timestep: int) -> None:
        """SKRL's new best at a checkpoint moment: the current weights, copied just before the write."""
        copied = {
            name: {k: v.clone() for k, v in m.state_dict().items()} for name, m in self.checkpoint_modules.items()
        }
        self.checkpoint_best_modules.update(modules=copied, timestep=timestep, saved=False)

    def learn(self) -> None:
        with torch.no_grad():
            for module in self.checkpoint_modules.values():
                for parameter in module.parameters():
                    parameter.add_(1.0)


@pytest.fixture
def writer(tmp_path):
    record = runs.RunRecord(tmp_path, {"checkpoints": []})

    def save_checkpoints(checkpoints):
        return record.save_checkpoints([(name, write, {"iteration": it}) for name, write, it in checkpoints])

    job = SimpleNamespace(
        run_dir=tmp_path, ml_framework="torch", resume_iteration=0, save_checkpoints=save_checkpoints, record=record
    )
    record.write()
    return CheckpointWriter(Agent(), job, per_iteration=10)


def weights(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def same_weights(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(
        a[name].keys() == b[name].keys() and all(torch.equal(a[name][k], b[name][k]) for k in a[name]) for name in a
    )


def listed(writer) -> list[str]:
    return [entry["file"] for entry in json.loads((writer.job.run_dir / "run.json").read_text())["checkpoints"]]


def test_a_best_agent_found_at_the_moment_is_the_current_agents_file_written_once(writer, monkeypatch):
    saves = []
    write_modules = skrl_checkpoints._write_modules
    monkeypatch.setattr(skrl_checkpoints, "_write_modules", lambda *a: saves.append(a[2]) or write_modules(*a))
    writer.agent.best_now(20)
    writer(timestep=20, timesteps=40)
    folder = writer.job.run_dir / "checkpoints"
    assert len(saves) == 1 and os.path.samefile(folder / "best_agent.pt", folder / "agent_20.pt")
    current = {name: module.state_dict() for name, module in writer.agent.checkpoint_modules.items()}
    assert same_weights(weights(folder / "best_agent.pt"), current)
    assert listed(writer) == ["checkpoints/best_agent.pt", "checkpoints/agent_20.pt"]
    assert writer.agent.checkpoint_best_modules["saved"]

    writer.agent.learn()  # the next moment: no new best, the best agent's file stays as it was
    writer(timestep=40, timesteps=40)
    assert not os.path.samefile(folder / "best_agent.pt", folder / "agent_40.pt")
    assert same_weights(weights(folder / "best_agent.pt"), weights(folder / "agent_20.pt"))
    assert not same_weights(weights(folder / "agent_40.pt"), weights(folder / "agent_20.pt"))
    writer.job.record.settle()  # the batches' temporary folders go
    assert sorted(path.name for path in folder.iterdir()) == ["agent_20.pt", "agent_40.pt", "best_agent.pt"]


def test_where_the_folder_takes_no_hard_link_the_best_agent_is_written_apart(writer, monkeypatch):
    def no_link(source, target):
        raise OSError(errno.EPERM, "Operation not permitted", target)

    monkeypatch.setattr(skrl_checkpoints.os, "link", no_link)
    writer.agent.best_now(20)
    writer(timestep=20, timesteps=40)
    folder = writer.job.run_dir / "checkpoints"
    assert not os.path.samefile(folder / "best_agent.pt", folder / "agent_20.pt")
    assert same_weights(weights(folder / "best_agent.pt"), weights(folder / "agent_20.pt"))
    assert listed(writer) == ["checkpoints/best_agent.pt", "checkpoints/agent_20.pt"]


def test_a_best_agent_of_another_moment_is_written_with_its_own_weights(writer):
    writer.agent.best_now(10)  # found at an earlier moment and not saved then (a stop's checkpoint)
    writer.agent.learn()
    writer(timestep=20, timesteps=40)
    folder = writer.job.run_dir / "checkpoints"
    assert not os.path.samefile(folder / "best_agent.pt", folder / "agent_20.pt")
    assert same_weights(weights(folder / "best_agent.pt"), writer.agent.checkpoint_best_modules["modules"])
    assert not same_weights(weights(folder / "best_agent.pt"), weights(folder / "agent_20.pt"))
