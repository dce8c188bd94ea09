"""`rlrun list tasks --gymnasium` lists the ids this installation can make; the others are named by what they lack."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import gymnasium
import pytest

from rlrun import cli
from rlrun.envs.requirements import missing_requirement


def test_retired_ids_and_ids_whose_package_is_missing_are_named_by_what_they_need(monkeypatch):
    assert "mujoco-py" in missing_requirement(gymnasium.spec("HalfCheetah-v3"))
    assert missing_requirement(gymnasium.spec("CartPole-v1")) is None
    box2d = SimpleNamespace(entry_point="gymnasium.envs.box2d.lunar_lander:LunarLander")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert missing_requirement(box2d) == "Box2D (pip install 'gymnasium[box2d]')"
    monkeypatch.undo()
    assert (missing_requirement(box2d) is None) == (importlib.util.find_spec("Box2D") is not None)


def test_the_listing_leaves_out_what_cannot_be_made_and_counts_it(capsys):
    pytest.importorskip("rich")
    assert cli.main(["list", "tasks", "--gymnasium"]) == 0
    out = capsys.readouterr().out
    assert "CartPole-v1" in out and "HalfCheetah-v3" not in out
    assert "Gymnasium ids that need mujoco-py" in out
