"""Libraries from anywhere: installed packages add adapters through the `rlrun.libraries` entry-point group.

The package is made in the test (its modules and a dist-info with entry points on a temporary `sys.path`
entry): a thin adapter, `plugged`, that hands RSL-RL's adapter functions on under a new name, with its own
configuration package, and four broken plugins beside it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import textwrap
from importlib import resources

import pytest

import rlrun
from rlrun.errors import UnknownLibrary
from rlrun.hermetic import census
from rlrun.libraries import LIBRARIES, get_library, libraries_for, load_adapter, plugins
from support import FAILURE_MESSAGE, MEDDLING_TASK, SMALL_RSL_RL, EnvironmentExploded

pytest.importorskip("rsl_rl")

PACKAGE = "rlrun_test_libpkg"
DISTRIBUTION = "rlrun-test-libpkg"
NAME = "plugged"

FILES = {
    "__init__.py": f"""
        from rlrun.libraries import Library

        LIBRARY = Library(
            name="{NAME}",
            adapter="{PACKAGE}.adapter",
            import_name="rsl_rl",
            distribution="rsl-rl-lib",
            extra="",
            summary="RSL-RL, through a plugin",
            configs="{PACKAGE}.configs",
        )
        INCOMPLETE = Library("incomplete", "{PACKAGE}.incomplete", "rsl_rl", "rsl-rl-lib", "", "lacks members")
        TAKEN = Library("rsl_rl", "{PACKAGE}.adapter", "rsl_rl", "rsl-rl-lib", "", "rlrun's own name")
    """,
    "adapter.py": """
        from rlrun.libraries import rsl_rl as _rsl_rl

        IMPORTS = _rsl_rl.IMPORTS
        ALGORITHMS = _rsl_rl.ALGORITHMS
        DEFAULT_ALGORITHM = _rsl_rl.DEFAULT_ALGORITHM
        LOGGERS = _rsl_rl.LOGGERS
        env_steps_per_iteration = _rsl_rl.env_steps_per_iteration
        check_checkpoint = _rsl_rl.check_checkpoint
        train = _rsl_rl.train
        load_policy = _rsl_rl.load_policy
        export_policy = _rsl_rl.export_policy
    """,
    "incomplete.py": """
        IMPORTS = {"torch": ()}
        ALGORITHMS = {"ppo": ("Box",)}
        DEFAULT_ALGORITHM = "ppo"
        LOGGERS = ()
    """,
    "configs/__init__.py": "",
}
ENTRY_POINTS = f"""
[rlrun.libraries]
{NAME} = {PACKAGE}:LIBRARY
incomplete = {PACKAGE}:INCOMPLETE
missing = {PACKAGE}.nowhere:LIBRARY
renamed = {PACKAGE}:LIBRARY
rsl_rl = {PACKAGE}:TAKEN
"""


@pytest.fixture
def library_package(tmp_path, monkeypatch):
    """The package installed on a temporary `sys.path` entry and the table read again; all gone afterwards."""
    root = tmp_path / "site"
    for name, text in FILES.items():
        (root / PACKAGE / name).parent.mkdir(parents=True, exist_ok=True)
        (root / PACKAGE / name).write_text(textwrap.dedent(text), encoding="utf-8")
    shipped = resources.files("rlrun.configs").joinpath("rsl_rl/ppo/default.yaml")
    (root / PACKAGE / "configs" / NAME / "ppo").mkdir(parents=True)
    with resources.as_file(shipped) as path:
        shutil.copy(path, root / PACKAGE / "configs" / NAME / "ppo" / "default.yaml")
    info = root / f"{PACKAGE}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    LIBRARIES.load_plugins(reload=True)
    yield root
    monkeypatch.undo()
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]
    LIBRARIES.load_plugins(reload=True)
    assert NAME not in LIBRARIES and not plugins.BROKEN


def test_the_table_picks_the_plugin_up_with_its_package(library_package):
    row = get_library(NAME)
    assert row.provider == DISTRIBUTION and row.installed and row.version is not None
    assert list(LIBRARIES)[-1] == NAME and NAME in libraries_for("Box")
    assert get_library("rsl_rl").provider == "rlrun"  # rlrun's own row stays, the plugin that claims it does not
    assert row.install_hint == "pip install 'rsl-rl-lib'"


def test_the_plugin_adapter_is_a_whole_adapter_as_every_row_must_be(library_package):
    from rlrun.libraries.base import missing_members

    adapter = load_adapter(get_library(NAME))
    assert missing_members(adapter) == [] and adapter.DEFAULT_ALGORITHM in adapter.ALGORITHMS
    assert set(get_library(NAME).frameworks) == set(adapter.IMPORTS)


def test_broken_plugins_are_named_in_one_line_each_and_the_others_load(library_package):
    assert set(plugins.BROKEN) == {"incomplete", "missing", "renamed", "rsl_rl"}
    assert (
        "IncompleteAdapter" in plugins.BROKEN["incomplete"]
        and "lacks env_steps_per_iteration" in (plugins.BROKEN["incomplete"])
    )
    assert "ModuleNotFoundError" in plugins.BROKEN["missing"] and DISTRIBUTION in plugins.BROKEN["missing"]
    assert "the entry point must have the same name" in plugins.BROKEN["renamed"]
    assert "which rlrun already has" in plugins.BROKEN["rsl_rl"]
    assert all("\n" not in reason for reason in plugins.BROKEN.values())
    with pytest.raises(UnknownLibrary, match=r"comes from a plugin that did not load: .*IncompleteAdapter"):
        get_library("incomplete")
    assert {"rsl_rl", "skrl", "sb3", "rl_games", NAME} <= set(LIBRARIES)


def test_rlrun_list_libraries_shows_the_plugin_and_the_broken_ones(library_package, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert rlrun.main(["list", "libraries"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if f" {NAME} " in line]
    assert DISTRIBUTION in row and "RSL-RL, through a plugin" in row
    assert "library plugin 'incomplete' left out:" in out and "library plugin 'missing' left out:" in out


def test_the_plugin_trains_one_iteration_and_plays_back_through_rlrun(library_package, log_root):
    trained = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/Pendulum-v1",
            library=NAME,
            num_envs=4,
            max_iterations=1,
            device="cpu",
            log_root=str(log_root),
            overrides=SMALL_RSL_RL,
        )
    )
    assert trained.library == NAME and trained.run_dir.parent.parent == log_root / NAME
    manifest = json.loads((trained.run_dir / "run.json").read_text())
    assert manifest["library"] == NAME and manifest["versions"]["rsl-rl-lib"] is not None
    assert list(trained.run_dir.glob("events.out.tfevents.*.rlrun"))  # the same curves as every library
    played = rlrun.play(
        rlrun.PlayRequest(task="rlrun/Pendulum-v1", library=NAME, num_episodes=2, device="cpu", log_root=str(log_root))
    )
    assert played.checkpoint == trained.checkpoint


def test_the_plugin_keeps_the_hermetic_contract_when_training_fails_after_meddling(library_package, log_root):
    """The contract case of `tests/api/test_contract.py`: the env changes every guarded global, then fails."""
    request = rlrun.TrainRequest(
        task=MEDDLING_TASK,
        library=NAME,
        num_envs=4,
        max_iterations=3,
        device="cpu",
        log_root=str(log_root),
        overrides=(*SMALL_RSL_RL, "env.meddle_at=3", "env.fail_at=12", "env.failure=RuntimeError"),
    )
    warm = dataclasses.replace(request, max_iterations=1, overrides=SMALL_RSL_RL, log_root=str(log_root / "warm"))
    rlrun.train(warm)  # what a first call imports is there before the snapshot
    before = census.snapshot()
    with pytest.raises(EnvironmentExploded, match=FAILURE_MESSAGE):
        rlrun.train(request)
    assert census.compare(before, census.snapshot()) == []
