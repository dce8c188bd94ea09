"""Planning: a request becomes a complete, typed plan, or a user error, before anything changes."""

from __future__ import annotations

import dataclasses

import pytest

import rlrun
from rlrun.api import planning, plans
from rlrun.errors import InvalidArgument
from rlrun.hermetic import hermetic_call


def test_a_train_plan_is_complete_and_frozen(log_root):
    request = rlrun.TrainRequest(task="rlrun/CartPole-v1", library="sb3", log_root=str(log_root))
    with hermetic_call() as call:
        plan = planning.plan_train(call, request)
    assert plan.library.name == "sb3" and plan.algorithm == "ppo" and plan.ml_framework == "torch"
    assert plan.num_envs >= 1 and plan.max_iterations >= 1 and plan.env_steps_per_iteration >= plan.num_envs
    assert "num_envs" not in plan.library_config and "num_envs" in plan.agent_config
    assert plan.resume_from is None and plan.resume_iteration == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(plan, "seed", 3)  # noqa: B010 - a frozen plan refuses it
    assert not log_root.exists(), "planning made a directory"


def test_an_agent_plan_has_its_own_type(log_root):
    with hermetic_call() as call:
        plan = planning.plan_agent(call, rlrun.AgentRequest(task="rlrun/Pendulum-v1", max_steps=5), "random")
    assert isinstance(plan, plans.AgentPlan) and not isinstance(plan, plans.LibraryPlan)
    assert plan.kind == "random" and plan.max_steps == 5 and plan.num_episodes is None


@pytest.mark.parametrize(
    ("call", "request_"),
    [
        (rlrun.train, rlrun.PlayRequest(task="rlrun/CartPole-v1")),
        (rlrun.play, rlrun.TrainRequest(task="rlrun/CartPole-v1")),
        (rlrun.export, rlrun.AgentRequest(task="rlrun/CartPole-v1")),
        (rlrun.random_agent, rlrun.TrainRequest(task="rlrun/CartPole-v1")),
    ],
)
def test_a_request_of_the_wrong_type_is_a_user_error(call, request_, log_root):
    with pytest.raises(InvalidArgument, match=f"takes a .*Request, not {type(request_).__name__}"):
        call(request_)
    assert not log_root.exists()


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("log_root", "FILE", "is a file"),
        ("log_root", "FILE/below", "which is a file"),
        ("experiment", "x" * 300, "300 characters long"),
        ("run_name", "y" * 201, "201 characters long"),
    ],
)
def test_a_log_root_or_name_the_filesystem_cannot_take_is_refused_before_anything(tmp_path, field, value, fragment):
    blocker = tmp_path / "FILE"
    blocker.write_text("not a folder", encoding="utf-8")
    fields = {"log_root": str(tmp_path / "logs"), field: value.replace("FILE", str(blocker))}
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(InvalidArgument, match=fragment):
        rlrun.train(rlrun.TrainRequest(task="rlrun/CartPole-v1", library="sb3", **fields))
    assert sorted(tmp_path.rglob("*")) == before
