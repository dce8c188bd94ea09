"""The bench's resume key (`rlrun.benching.cell.cell_key`): a cell already in results.jsonl under the same key
is not run again, so the key changes with every field that changes a cell's result, and with nothing that
only says where the run is written or how it was asked for."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from rlrun.api.requests import TrainRequest
from rlrun.benching.cell import cell_key

WORDS = st.text(min_size=1, max_size=12)
REQUEST_FIELDS = {
    "task": st.sampled_from(["rlrun/CartPole-v1", "rlrun/Pendulum-v1", "dying_task:RlrunTestDying-v0"]) | WORDS,
    "library": st.sampled_from(["sb3", "rsl_rl", "skrl", "rl_games", "torchrl"]),
    "algorithm": st.sampled_from(["ppo", "sac", "a2c", "td3"]),
    "ml_framework": st.sampled_from(["torch", "jax"]),
    "num_envs": st.integers(1, 4096),
    "seed": st.integers(-1, 2**32),
    "device": st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:1"]),
    "overrides": st.lists(st.sampled_from(["agent.learning_rate=0.001", "agent.gamma=0.9", "env.g=9.0"]) | WORDS,
                          max_size=3).map(tuple),
    "max_iterations": st.integers(1, 10**7),
}  # fmt: skip
"""The resolved request's fields that decide a cell's result, and values each may take."""
CELL_FIELDS = {
    "eval_episodes": st.integers(0, 1000),
    "seconds": st.none() | st.floats(min_value=1e-3, max_value=1e6),
}
"""The cell's own fields beside the request that decide its result."""
IGNORED_FIELDS = {
    "log_root": WORDS,
    "argv": st.none() | st.lists(WORDS, max_size=4).map(tuple),
    "run_name": st.none() | WORDS,
    "experiment": st.none() | WORDS,
    "verbose": st.booleans(),
}
"""Where the run is written and how it was asked for: the same cell wherever its logs go."""

CELLS = st.fixed_dictionaries({**REQUEST_FIELDS, **CELL_FIELDS})
FAST = settings(max_examples=30, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
"""Few examples (one already catches a field left out of the key), and no explain phase (slow on a failure)."""
BASE = {
    "task": "rlrun/Pendulum-v1",
    "library": "sb3",
    "algorithm": "ppo",
    "ml_framework": "torch",
    "num_envs": 16,
    "seed": 0,
    "device": "cpu",
    "overrides": (),
    "max_iterations": 10,
    "eval_episodes": 10,
    "seconds": None,
}
"""One resolved cell."""
CHANGES = [
    ("task", "rlrun/CartPole-v1"),
    ("library", "rsl_rl"),
    ("algorithm", "sac"),
    ("ml_framework", "jax"),
    ("num_envs", 17),
    ("seed", 1),
    ("device", "cuda"),
    ("overrides", ("agent.learning_rate=0.001",)),
    ("max_iterations", 11),
    ("eval_episodes", 0),
    ("eval_episodes", 11),
    ("seconds", 60.0),
]


def key(cell: dict) -> str:
    fields = {name: value for name, value in cell.items() if name not in CELL_FIELDS}
    return cell_key(TrainRequest(**fields), cell["eval_episodes"], cell["seconds"])


def test_the_fields_named_here_are_the_requests_and_every_decisive_one_is_changed():
    names = {item.name for item in dataclasses.fields(TrainRequest)}
    assert set(REQUEST_FIELDS) | set(IGNORED_FIELDS) <= names
    assert set(BASE) == {field for field, _ in CHANGES} == set(REQUEST_FIELDS) | set(CELL_FIELDS)


@pytest.mark.parametrize(("field", "value"), CHANGES)
def test_the_key_changes_with_each_field_that_decides_the_result(field, value):
    assert key(BASE) != key({**BASE, field: value})


@FAST
@given(cell=CELLS, other=CELLS)
def test_the_key_changes_with_every_field_that_decides_the_result(cell, other):
    for field in (*REQUEST_FIELDS, *CELL_FIELDS):
        if other[field] != cell[field]:
            changed = {**cell, field: other[field]}
            assert key(cell) != key(changed), f"{field}: {cell[field]!r} and {other[field]!r} share a key"


@pytest.mark.parametrize("field", IGNORED_FIELDS)
def test_the_key_does_not_change_with_each_log_path_argv_or_name(field):
    assert key(BASE) == key({**BASE, field: {"argv": ("rlrun", "bench"), "verbose": True}.get(field, "elsewhere")})


@FAST
@given(cell=CELLS, ignored=st.fixed_dictionaries(IGNORED_FIELDS))
def test_the_key_does_not_change_with_log_paths_argv_or_names(cell, ignored):
    assert key(cell) == key({**cell, **ignored})
    assert len(key(cell)) == 16 and int(key(cell), 16) >= 0
