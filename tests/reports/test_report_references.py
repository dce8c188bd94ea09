"""rlrun's reference table and suites: every number sourced, every suite task with a reference and a budget."""

from __future__ import annotations

import pytest

from rlrun.errors import InvalidArgument
from rlrun.reports.references import KINDS, references, suite, suites

ATARI_5 = ("BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert")  # Aitchison et al. 2023


def test_every_reference_has_a_kind_a_source_and_a_reference_apart_from_random():
    table = references()
    assert len(table) >= 16
    for task, ref in table.items():
        assert ref.kind in KINDS and ref.source and ref.random_source, task
        assert ref.reference != ref.random, task
        assert ref.reference > ref.random, f"{task}: the reference should beat random play"


def test_thresholds_are_gymnasiums_where_the_table_says_so():
    gymnasium = pytest.importorskip("gymnasium")
    for task, ref in references().items():
        spec = gymnasium.registry.get(task)
        if spec is None:  # an Atari id without ale_py, a native task before rlrun.envs is imported
            continue
        if ref.kind == "threshold":
            assert ref.reference == spec.reward_threshold, task
        if ref.threshold is not None:
            assert ref.threshold == spec.reward_threshold, task


def test_the_suites_name_their_tasks_and_budgets():
    assert list(suites()) == ["classic", "mujoco", "atari-5"]
    atari = suite("atari-5")
    assert [t.task for t in atari.tasks] == [f"ALE/{game}-v5" for game in ATARI_5]
    assert {t.env_steps for t in atari.tasks} == {10_000_000} and {t.install for t in atari.tasks} == {"rlrun[atari]"}
    mujoco = suite("MuJoCo")
    assert [t.task for t in mujoco.tasks] == ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5"]
    classic = suite("classic")
    assert [t.task for t in classic.tasks if not t.optional] == [
        "CartPole-v1",
        "Pendulum-v1",
        "Acrobot-v1",
        "MountainCarContinuous-v0",
    ]
    assert [t.task for t in classic.tasks if t.optional] == ["LunarLander-v3"]
    for named in suites().values():
        for task in named.tasks:
            assert task.env_steps > 0, task
            assert task.optional or task.task in references(), f"{task.task} has no reference score"


def test_a_mistyped_suite_is_one_line_with_the_nearest_name():
    with pytest.raises(InvalidArgument, match=r"suite 'mujcoo' is unknown\. Did you mean 'mujoco'\?") as caught:
        suite("mujcoo")
    assert "\n" not in str(caught.value) and "classic, mujoco, atari-5" in str(caught.value)
    with pytest.raises(InvalidArgument):
        suite(3)
