"""The adapter surface every library module shares: checked checkpoints refuse damaged files the same way."""

from __future__ import annotations

import random

import pytest

from rlrun.errors import CorruptCheckpoint
from rlrun.libraries import LIBRARIES, get_library, load_adapter


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_damaged_files_are_refused_as_corrupt_checkpoints_whatever_the_reader_raises(library, tmp_path):
    """Unpicklers raise anything on random bytes (`EOFError`, `IndexError`, ...): each must become one user error."""
    check = load_adapter(get_library(library)).check_checkpoint
    generator = random.Random(library)
    damaged = [b"", b"PK\x03\x04", b"\x80\x02", *(generator.randbytes(generator.randint(1, 4096)) for _ in range(200))]
    for index, data in enumerate(damaged):
        path = tmp_path / f"damaged_{index}.pt"
        path.write_bytes(data)
        with pytest.raises(CorruptCheckpoint, match=r"cannot be read as|is not"):
            check(path)


def test_the_adapter_member_list_is_the_protocol():
    """`ADAPTER_MEMBERS`, which `load_adapter` checks, names exactly what the `Adapter` Protocol declares."""
    from rlrun.libraries.base import ADAPTER_MEMBERS, Adapter

    declared = set(Adapter.__annotations__) | {
        name for name, value in vars(Adapter).items() if callable(value) and not name.startswith("_")
    }
    assert set(ADAPTER_MEMBERS) == declared


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_every_adapter_in_the_table_is_a_whole_adapter(library):
    from rlrun.libraries.base import missing_members

    adapter = load_adapter(get_library(library))
    assert missing_members(adapter) == []
    assert adapter.DEFAULT_ALGORITHM in adapter.ALGORITHMS
    assert set(get_library(library).frameworks) == set(adapter.IMPORTS)
    assert get_library(library).action_spaces, "the action spaces come from the adapter's ALGORITHMS"


def test_an_incomplete_adapter_is_refused_when_loaded_naming_what_it_lacks(monkeypatch):
    import sys
    import types

    from rlrun.libraries import IncompleteAdapter, Library

    module = types.ModuleType("rlrun_test_incomplete_adapter")
    module.IMPORTS = {"torch": ()}
    module.ALGORITHMS = {"ppo": ("Box",)}
    module.DEFAULT_ALGORITHM = "ppo"
    module.LOGGERS = ()
    module.train = lambda job: None
    module.check_checkpoint = "not a function"
    monkeypatch.setitem(sys.modules, module.__name__, module)
    row = Library("incomplete", module.__name__, "rlrun_no_such_library", "incomplete", "incomplete", "")
    lacks = "lacks env_steps_per_iteration, check_checkpoint, load_policy, export_policy"
    with pytest.raises(IncompleteAdapter, match=lacks):
        load_adapter(row)


def test_action_spaces_are_the_union_over_the_adapters_algorithms():
    assert get_library("rsl_rl").action_spaces == ("Box",)
    assert set(get_library("sb3").action_spaces) == {"Box", "Discrete"}


@pytest.mark.parametrize("library", ["rsl_rl", "rl_games"])
def test_a_checkpoint_with_a_refused_object_names_it_and_not_torchs_unsafe_advice(library, tmp_path):
    import io

    import torch

    path = tmp_path / "foreign.pt"
    torch.save({"model": {}, "actor_state_dict": {}, "smuggled": io.BytesIO}, path)
    with pytest.raises(CorruptCheckpoint) as caught:
        load_adapter(get_library(library)).check_checkpoint(path)
    message = str(caught.value)
    assert "_io.BytesIO" in message and "weights_only=True" in message
    assert "two options" not in message and "\x1b" not in message and "\n" not in message


def test_every_install_hint_names_an_extra_that_every_pip_matches():
    """pip before 23.3 compares extras as spelt, and setuptools writes them normalized (PEP 685: `rsl_rl`
    becomes `rsl-rl`): with an older pip, `pip install 'rlrun[rsl_rl]'` installs rlrun without RSL-RL and
    only warns. So the extras are declared in their normalized spelling, and the hints and `all` use it."""
    import re
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def normalized(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    assert all(name == normalized(name) for name in extras), sorted(extras)
    for library in LIBRARIES.values():
        if library.provider == "rlrun":
            assert library.extra in extras and library.install_hint == f"pip install 'rlrun[{library.extra}]'"
    own = [requirement for requirement in (*extras["all"], *extras["dev"]) if requirement.startswith("rlrun[")]
    assert own, "`all` and `dev` name rlrun's own extras"
    for requirement in own:
        inner = re.fullmatch(r"rlrun\[([^\]]+)\]", requirement)
        assert inner is not None and set(inner.group(1).split(",")) <= set(extras), requirement
