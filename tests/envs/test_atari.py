"""Atari ids (`rlrun.envs.atari`): the same preprocessed task on EnvPool and on Gymnasium's vector envs, the step
contract on both, and the `env.` keys and installs an Atari task is refused for, in one line."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch
from env_contract import check_contract

from rlrun.envs import atari, env_config, make_env, resolve_task
from rlrun.envs.envpool import ENVPOOL_ATARI_MISSING, check_envpool, covered
from rlrun.errors import InvalidArgument, MissingDependency, UnsupportedTask

pytest.importorskip("ale_py")
pytest.importorskip("cv2")
envpool = pytest.importorskip("envpool")

TASK = "ALE/Breakout-v5"
VECTORIZATIONS = ("envpool", "sync")


@pytest.fixture(scope="module")
def task() -> str:
    return resolve_task(TASK)  # imports ale_py, which registers Gymnasium's ALE ids


@pytest.mark.parametrize("vectorization", VECTORIZATIONS)
def test_an_atari_id_keeps_the_step_contract_with_uint8_frames(task, vectorization):
    check_contract(task, num_envs=4, steps=14, vectorization=vectorization, seed_moves_reset=False)


def make(task: str, vectorization: str, noop_max: int, **env_kwargs):
    with mock.patch.object(atari, "NOOP_MAX", noop_max):
        return make_env(task, 2, vectorization=vectorization, env_kwargs={**env_config(task), **env_kwargs})


def test_both_engines_make_the_same_preprocessed_observation(task):
    """Without no-ops and sticky actions, both start from the very same stacked 84x84 grayscale frames (the
    preprocessing is the same); EnvPool's `noop_max=1` is no no-op, as Gymnasium's 0 is (EnvPool crashes on 0)."""
    envs = {
        "envpool": make(task, "envpool", 1, repeat_action_probability=0.0),
        "sync": make(task, "sync", 0, repeat_action_probability=0.0),
    }
    try:
        first = {name: env.reset(seed=5)[0] for name, env in envs.items()}
        for env in envs.values():
            assert env.single_observation_space.shape == (4, 84, 84)
            assert env.single_observation_space.dtype == np.uint8
            assert int(env.single_action_space.n) == 4  # Breakout's minimal action set
        assert first["envpool"].dtype == first["sync"].dtype == torch.uint8
        assert torch.equal(first["envpool"], first["sync"])
        assert first["sync"].float().std() > 0  # a screen, not a blank frame
    finally:
        for env in envs.values():
            env.close()


def test_envpool_runs_every_gymnasium_atari_id_but_the_ones_it_lacks(task):
    import gymnasium

    ids = sorted(name for name in gymnasium.registry if atari.is_atari(name))
    assert len(ids) > 100
    lacking = {name for name in ids if name.removeprefix("ALE/") not in envpool.list_all_envs()}
    assert lacking == set(ENVPOOL_ATARI_MISSING)
    assert all(covered(name) == (name not in lacking) for name in ids)


def test_the_options_make_whole_games_with_the_games_own_rewards():
    game, options = atari.envpool_options(TASK, {"frameskip": 3, "max_episode_steps": 100, "mode": None})
    assert game == "Breakout-v5"
    assert options["frame_skip"] == 3 and options["max_episode_steps"] == 100 and "mode" not in options
    assert options["repeat_action_probability"] == 0.25  # Gymnasium's -v5 stickiness, not EnvPool's 0
    assert not options["episodic_life"] and not options["reward_clip"] and not options["use_fire_reset"]


def test_a_time_limit_counts_agent_steps_on_both_engines(task):
    for vectorization in VECTORIZATIONS:
        env = make_env(task, 1, vectorization=vectorization, env_kwargs={"max_episode_steps": 5})
        try:
            env.reset(seed=0)
            ends = [bool(env.step(torch.zeros(1, dtype=torch.int64))[3][0]) for _ in range(5)]
        finally:
            env.close()
        assert ends == [False] * 4 + [True], vectorization


def test_keys_the_preprocessing_fixes_are_refused_in_one_line(task):
    config = env_config(task)
    for vectorization in ("sync", "envpool"):
        with pytest.raises(InvalidArgument, match=r"env\.obs_type='ram' is not taken by an Atari task") as error:
            atari.check_atari(task, {**config, "obs_type": "ram"}, vectorization)
        assert "\n" not in str(error.value)
    with pytest.raises(InvalidArgument, match="frameskip"):
        atari.check_atari(task, {**config, "frameskip": 0}, "sync")
    atari.check_atari(task, {**config, "repeat_action_probability": 0.0, "max_episode_steps": 10}, "sync")
    with pytest.raises(InvalidArgument, match="obs_type"):
        check_envpool(task, {**config, "obs_type": "grayscale"})


def test_a_game_envpool_lacks_is_refused_on_envpool():
    with pytest.raises(UnsupportedTask, match="does not run 'ALE/TicTacToe3D-v5'"):
        check_envpool("ALE/TicTacToe3D-v5", {})


def test_missing_installs_name_the_extra(task, monkeypatch):
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cv2" else found(name, *a))
    with pytest.raises(MissingDependency, match=r"needs OpenCV .*pip install 'rlrun\[atari\]'"):
        atari.check_atari(task, env_config(task), "sync")
    atari.check_atari(task, env_config(task), "envpool")  # EnvPool resizes frames itself


def test_an_atari_id_without_ale_py_names_the_extra(monkeypatch):
    import importlib.util

    import gymnasium

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ale_py" else found(name, *a))
    monkeypatch.setattr(
        gymnasium, "registry", {k: v for k, v in gymnasium.registry.items() if not k.startswith("ALE/")}
    )
    with pytest.raises(MissingDependency, match=r"ALE/Pong-v5 is an Atari id, which needs ale-py.*rlrun\[atari\]"):
        resolve_task("ALE/Pong-v5")
