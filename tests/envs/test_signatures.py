"""`static_env_config`: a native task's configuration read from its env class's source, equal to `env_config`'s
where the source says it plainly, None (checked after the imports) where it does not."""

from __future__ import annotations

import sys
import textwrap

import pytest

from rlrun.envs import BUILTIN_TASKS, NativeTask, env_config
from rlrun.envs.signatures import static_env_config
from rlrun.envs.tasks import NATIVE_TASKS


@pytest.mark.parametrize("task", [task.id for task in BUILTIN_TASKS])
def test_the_builtin_tasks_read_from_source_equal_their_imported_configuration(task):
    assert static_env_config(task) == env_config(task)


SOURCE = """
import torch  # never imported by the reading

class Plain:
    def __init__(self, num_envs, /, max_episode_steps=100, device="cpu", *, mass=1.5, sizes=(1, 2), render_mode=None):
        pass

class Inherits(Plain):
    pass

class TakesAnything:
    def __init__(self, num_envs, max_episode_steps=100, **kwargs):
        pass

class Computed:
    def __init__(self, num_envs, scale=torch.pi):
        pass

class PositionalOnly:
    def __init__(self, num_envs, gain=2.0, /, bias=0.5):
        pass
"""


@pytest.fixture
def planted(tmp_path, monkeypatch):
    (tmp_path / "planted_native_tasks.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))

    def task(name: str) -> str:
        record = NativeTask(f"test/{name}-v0", f"planted_native_tasks:{name}", 50, "rsl_rl", kwargs={"mass": 2.0})
        monkeypatch.setitem(NATIVE_TASKS, record.id, record)
        return record.id

    yield task
    assert "planted_native_tasks" not in sys.modules


def test_keywords_with_literal_defaults_are_read_and_the_task_sets_its_own(planted):
    assert static_env_config(planted("Plain")) == {"max_episode_steps": 50, "mass": 2.0, "sizes": (1, 2)}


def test_a_positional_only_parameter_is_left_out_as_a_keyword_cannot_set_it(planted):
    assert static_env_config(planted("PositionalOnly")) == {"bias": 0.5, "mass": 2.0, "max_episode_steps": 50}


@pytest.mark.parametrize("name", ["Inherits", "TakesAnything", "Computed", "Missing"])
def test_what_the_source_does_not_say_plainly_is_left_to_the_imported_class(planted, name):
    assert static_env_config(planted(name)) is None


def test_a_source_too_deep_for_ast_is_left_to_the_imported_class(planted, tmp_path):
    """`ast` gives up on a long enough expression with RecursionError: the reading says None, it does not raise."""
    deep = "LIMIT = " + "+".join(["1"] * 200_000) + "\n"
    source = tmp_path / "planted_native_tasks.py"
    source.write_text(deep + source.read_text())
    assert static_env_config(planted("Plain")) is None


def test_a_gymnasium_id_is_not_native():
    assert static_env_config("Pendulum-v1") is None
