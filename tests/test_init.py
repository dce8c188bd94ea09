"""Importing rlrun is light, and its public names are the documented ones."""

from __future__ import annotations

import json
import subprocess
import sys

import rlrun

HEAVY = ("torch", "jax", "numpy", "gymnasium", "rsl_rl", "skrl", "stable_baselines3", "rl_games", "tensordict")


def test_import_rlrun_imports_no_torch_jax_or_rl_library():
    code = (
        "import json, sys, rlrun, rlrun.errors, rlrun.hermetic, rlrun.libraries; print(json.dumps(sorted(sys.modules)))"
    )
    modules = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    assert [name for name in modules if name.split(".")[0] in HEAVY] == []


def test_importing_the_api_modules_imports_none_either():
    """The api imports NumPy, Gymnasium and torch inside a call's import phase (`rlrun.api.imports`), where their
    import effects (Gymnasium's warning filter, ...) belong to the import; a module-level import would make them
    the first call's, left in the caller."""
    code = (
        "import importlib, json, pkgutil, sys, rlrun.api\n"
        "for module in pkgutil.iter_modules(rlrun.api.__path__):\n"
        "    importlib.import_module(f'rlrun.api.{module.name}')\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    modules = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    assert "rlrun.api.planning" in modules
    assert [name for name in modules if name.split(".")[0] in HEAVY] == []


def test_public_api():
    assert {"TrainRequest", "PlayRequest", "TrainResult", "PlayResult", "train", "play", "main"} <= set(rlrun.__all__)
    assert rlrun.TrainRequest(task="rlrun/Pendulum-v1").library is None
    assert callable(rlrun.main) and rlrun.main.__module__ == "rlrun.cli"
