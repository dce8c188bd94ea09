"""The layers of ARCHITECTURE.md, checked on the source: what each package may import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[1] / "src" / "rlrun"
RL_LIBRARIES = ("rsl_rl", "skrl", "stable_baselines3", "rl_games", "torchrl", "jax", "flax", "optax", "jaxlib")
LAYERS = {
    # package or module -> the rlrun modules it may import (prefixes)
    "errors.py": (),
    "hermetic": ("rlrun.errors", "rlrun.hermetic"),
    "configs": ("rlrun.errors", "rlrun.configs"),
    "runs": ("rlrun.errors", "rlrun.runs"),
    "envs": ("rlrun.errors", "rlrun.envs"),
    "libraries": ("rlrun.errors", "rlrun.hermetic", "rlrun.libraries", "rlrun.envs", "rlrun.configs", "rlrun.runs"),
    "reports": ("rlrun.errors", "rlrun.reports"),
    "executors": ("rlrun.errors", "rlrun.executors"),
    "cli": (
        "rlrun.errors",
        "rlrun.api",
        "rlrun.progress",
        "rlrun.cli",
        "rlrun.hermetic",
        "rlrun.envs",
        "rlrun.libraries",
        "rlrun.reports",
        "rlrun.runs",
    ),
    "api": (
        "rlrun.errors",
        "rlrun.hermetic",
        "rlrun.configs",
        "rlrun.runs",
        "rlrun.envs",
        "rlrun.libraries",
        "rlrun.rollout",
        "rlrun.progress",
        "rlrun.api",
        "rlrun.reports",
        "rlrun.executors",
    ),
}


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside functions (relative imports resolved within rlrun)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names if node.module == "rlrun")
    return names


def layer_files(layer: str) -> list[Path]:
    target = SOURCE / layer
    return [target] if target.is_file() else sorted(target.rglob("*.py"))


@pytest.mark.parametrize("layer", list(LAYERS))
def test_each_layer_imports_only_the_layers_below_it(layer):
    allowed = LAYERS[layer]
    for path in layer_files(layer):
        for name in imports_of(path):
            if name.split(".")[0] == "rlrun" and name != "rlrun":
                assert name.startswith(allowed), f"{path.relative_to(SOURCE)} imports {name}"


@pytest.mark.parametrize(
    "module", ["hermetic", "api", "cli", "runs", "envs", "configs", "errors.py", "reports", "executors"]
)
def test_the_core_imports_no_rl_library(module):
    for path in layer_files(module):
        for name in imports_of(path):
            assert name.split(".")[0] not in RL_LIBRARIES, f"{path.relative_to(SOURCE)} imports {name}"


RUNS_ORDER = ("atomic", "manifest", "lookup", "record")
"""The modules of `rlrun.runs`, each importing only those before it (ARCHITECTURE.md)."""


def test_each_runs_module_imports_only_the_ones_before_it():
    assert sorted(path.stem for path in (SOURCE / "runs").glob("*.py")) == sorted(["__init__", *RUNS_ORDER])
    for index, module in enumerate(RUNS_ORDER):
        below = tuple(f"rlrun.runs.{name}" for name in RUNS_ORDER[:index])
        for name in imports_of(SOURCE / "runs" / f"{module}.py"):
            if name.startswith("rlrun.runs"):
                assert name.startswith(below), f"runs/{module}.py imports {name}"


ADAPTERS = ("rsl_rl", "skrl", "sb3", "rl_games", "torchrl")


def adapter_files(name: str) -> list[Path]:
    """The adapter module `libraries/<name>.py` and the parts it is split into, `libraries/<name>_*.py`."""
    return [SOURCE / "libraries" / f"{name}.py", *sorted((SOURCE / "libraries").glob(f"{name}_*.py"))]


def test_each_adapter_imports_its_own_library_only():
    own = {"rsl_rl": ("rsl_rl", "tensordict", "git"), "skrl": ("skrl", "jax", "flax", "optax", "jaxlib")}
    own |= {"sb3": ("stable_baselines3",), "rl_games": ("rl_games",), "torchrl": ("torchrl", "tensordict")}
    for name, roots in own.items():
        for path in adapter_files(name):
            for imported in imports_of(path):
                root = imported.split(".")[0]
                if root in RL_LIBRARIES:
                    assert root in roots, f"libraries/{path.name} imports {imported}"


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapters_and_their_parts_import_heavy_modules_inside_functions_only(name):
    """Loading an adapter (planning does, and the guard docs) must not import torch or the library itself."""
    heavy = (*RL_LIBRARIES, "torch", "numpy", "gymnasium", "tensordict", "tqdm", "optuna")
    for path in adapter_files(name):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for imported in names:
                assert imported.split(".")[0] not in heavy, f"libraries/{path.name} imports {imported} at the top"
