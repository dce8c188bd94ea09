"""A call on EnvPool leaves the process as it found it: the leak detector clean and EnvPool's native worker threads
(which the detector's Python thread census does not see) gone, whether the call succeeds, fails in a step or is
interrupted."""

from __future__ import annotations

import os

import pytest

import rlrun
from rlrun.envs.envpool import EnvPoolTorchVectorEnv

pytest.importorskip("envpool")

REQUEST = rlrun.AgentRequest(task="Hopper-v5", num_envs=4, max_steps=30, seed=0, vectorization="envpool")


def native_threads() -> set[str]:
    return set(os.listdir("/proc/self/task"))


@pytest.fixture(scope="module", autouse=True)
def warm_up():
    """One call first, so that threads a first call starts for good (torch's pool) are there before counting."""
    rlrun.random_agent(REQUEST)


def failing_step(failure: BaseException):
    original = EnvPoolTorchVectorEnv.step
    steps = []

    def step(self, actions):
        steps.append(1)
        if len(steps) == 5:
            raise failure
        return original(self, actions)

    return step


def test_a_successful_call_is_clean():
    before = native_threads()
    result = rlrun.random_agent(REQUEST, check_leaks=True)
    assert result.env_steps == 4 * 30
    assert native_threads() == before


@pytest.mark.parametrize("failure", [RuntimeError("the env exploded"), KeyboardInterrupt()], ids=type)
def test_a_call_that_fails_in_a_step_is_clean(monkeypatch, failure):
    monkeypatch.setattr(EnvPoolTorchVectorEnv, "step", failing_step(failure))
    before = native_threads()
    with pytest.raises(type(failure)) as raised:
        rlrun.random_agent(REQUEST, check_leaks=True)
    assert not any("leak detector" in note for note in getattr(raised.value, "__notes__", ()))
    del raised  # the traceback holds the call's frames
    assert native_threads() == before


def test_auto_is_recorded_as_what_ran(tmp_path):
    auto = rlrun.train(
        rlrun.TrainRequest(
            task="Hopper-v5",
            library="rsl_rl",
            num_envs=4,
            max_iterations=1,
            vectorization="auto",
            log_root=str(tmp_path),
            overrides=("agent.num_steps_per_env=8",),
        ),
        check_leaks=True,
    )
    import json

    assert json.loads((auto.run_dir / "run.json").read_text())["vectorization"] == "envpool"
