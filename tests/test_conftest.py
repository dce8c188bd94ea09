"""The suite's own skip rule (`conftest.pytest_runtest_makereport`): a missing module skips a test only when
it is a declared optional library that is indeed not installed; any other missing module fails the test."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rlrun.errors import MissingDependency
from rlrun.libraries import LIBRARIES

ROOT_CONFTEST = Path(__file__).with_name("conftest.py")


@pytest.fixture
def conftest(request):
    """The suite's root conftest module, as pytest loaded it (importing it again would register twice)."""
    plugins = request.config.pluginmanager.get_plugins()
    return next(plugin for plugin in plugins if getattr(plugin, "__file__", None) == str(ROOT_CONFTEST))


@pytest.fixture
def nothing_installed(monkeypatch):
    """Every module looks uninstalled to the skip rule (as on a bare install)."""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args, **kwargs: None)


def missing(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named {name!r}", name=name)


@pytest.mark.parametrize(
    "name",
    ["rlrun.does_not_exist", "rlrun", "rlrnu", "numpyy", "torch", "gymnasium", "no_such_module.sub"],
)
def test_a_missing_module_that_no_extra_installs_is_a_failure(conftest, nothing_installed, name):
    assert conftest._missing_module(missing(name)) is None
    assert conftest._missing_module(MissingDependency(f"library 'x' is not installed (no module {name!r})")) is None


@pytest.mark.parametrize("name", ["rsl_rl", "stable_baselines3", "jax", "flax.linen", "onnxruntime", "envpool"])
def test_a_missing_optional_library_is_a_skip(conftest, nothing_installed, name):
    assert conftest._missing_module(missing(name)) == name
    assert conftest._missing_module(MissingDependency(f"skrl on jax needs {name!r}, which is not installed")) == name


def test_an_installed_optional_library_named_missing_is_a_failure(conftest):
    """A wrong refusal of a library that is installed here still fails."""
    installed = [name for name in sorted(conftest.optional_modules()) if importlib.util.find_spec(name)]
    if not installed:
        pytest.skip("no optional library is installed")
    assert conftest._missing_module(missing(installed[0])) is None


def test_every_library_row_and_extra_is_optional(conftest):
    optional = conftest.optional_modules()
    assert {row.import_name for row in dict.values(LIBRARIES)} <= optional
    expected = {"rsl_rl", "skrl", "jax", "flax", "optax", "stable_baselines3", "rl_games", "torchrl", "tensordict"}
    expected |= {"onnx", "onnxruntime", "moviepy", "rliable", "matplotlib", "scipy", "ray", "optuna", "rl_zoo3"}
    assert expected | {"mujoco", "envpool"} <= optional
    assert not {"rlrun", "torch", "numpy", "gymnasium"} & optional
