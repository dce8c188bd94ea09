"""The layers of ARCHITECTURE.md, checked on the source: what each package may import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[1] / "src" / "rlrun"
RL_LIBRARIES = ("rsl_rl", "skrl", "stable_baselines3", "rl_games", "torchrl", "jax", "flax", "optax", "jaxlib")
BELOW_API = (
    "rlrun.errors",
    "rlrun.trust",
    "rlrun.hermetic",
    "rlrun.configs",
    "rlrun.runs",
    "rlrun.envs",
    "rlrun.libraries",
)
LAYERS = {
    # package or module -> the rlrun modules it may import (prefixes)
    "errors.py": (),
    "trust": ("rlrun.errors", "rlrun.trust"),
    "hermetic": ("rlrun.errors", "rlrun.hermetic"),
    "configs": ("rlrun.errors", "rlrun.trust", "rlrun.configs"),
    "runs": ("rlrun.errors", "rlrun.trust", "rlrun.runs"),
    "envs": ("rlrun.errors", "rlrun.envs"),
    "libraries": (
        "rlrun.errors",
        "rlrun.trust",
        "rlrun.hermetic",
        "rlrun.libraries",
        "rlrun.envs",
        "rlrun.configs",
        "rlrun.runs",
    ),
    "reports": ("rlrun.errors", "rlrun.trust", "rlrun.reports"),
    "executors": ("rlrun.errors", "rlrun.executors"),
    "progress.py": (),
    "signals.py": ("rlrun.errors",),
    "rollout.py": ("rlrun.progress", "rlrun.envs"),
    "api": (*BELOW_API, "rlrun.rollout", "rlrun.progress", "rlrun.signals", "rlrun.api"),
    "sweep.py": ("rlrun.errors", "rlrun.trust", "rlrun.runs", "rlrun.api"),
    "benching": (
        *BELOW_API,
        "rlrun.api",
        "rlrun.signals",
        "rlrun.sweep",
        "rlrun.reports",
        "rlrun.executors",
        "rlrun.benching",
    ),
    "tuning": (
        *BELOW_API,
        "rlrun.api",
        "rlrun.signals",
        "rlrun.sweep",
        "rlrun.reports",
        "rlrun.executors",
        "rlrun.tuning",
    ),
    "cli": (
        "rlrun.errors",
        "rlrun.trust",
        "rlrun.api",
        "rlrun.benching",
        "rlrun.tuning",
        "rlrun.sweep",
        "rlrun.progress",
        "rlrun.signals",
        "rlrun.cli",
        "rlrun.hermetic",
        "rlrun.envs",
        "rlrun.libraries",
        "rlrun.reports",
        "rlrun.runs",
    ),
}
"""Benches and studies call `rlrun.api` as a user would: `api` imports neither, and neither imports the other."""


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside functions: `from rlrun import x` counts as `rlrun.x`, and
    a bare `import rlrun` as `rlrun`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == "rlrun":
            names.update(f"rlrun.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def layer_files(layer: str) -> list[Path]:
    target = SOURCE / layer
    return [target] if target.is_file() else sorted(target.rglob("*.py"))


@pytest.mark.parametrize("layer", list(LAYERS))
def test_each_layer_imports_only_the_layers_below_it(layer):
    allowed = LAYERS[layer]
    for path in layer_files(layer):
        for name in imports_of(path):
            if name.split(".")[0] == "rlrun":
                assert name.startswith(allowed), f"{path.relative_to(SOURCE)} imports {name}"


def test_every_package_and_module_has_a_layer():
    """A new package or top-level module is placed in the layers before it lands."""
    placed = {SOURCE / layer for layer in LAYERS} | {SOURCE / "__init__.py", SOURCE / "__main__.py"}
    unplaced = [path.name for path in SOURCE.iterdir() if path.suffix == ".py" or (path / "__init__.py").exists()]
    assert sorted(name for name in unplaced if SOURCE / name not in placed) == []


def test_no_module_imports_rlrun_bare():
    """`import rlrun` inside the package would reach every layer at once (and hide what a module depends on)."""
    for path in SOURCE.rglob("*.py"):
        if path != SOURCE / "__init__.py":
            assert "rlrun" not in imports_of(path), f"{path.relative_to(SOURCE)} imports rlrun bare"


MODULES = {
    ".".join(("rlrun", *path.relative_to(SOURCE).with_suffix("").parts)).removesuffix(".__init__")
    for path in SOURCE.rglob("*.py")
}


def test_the_import_graph_has_no_circle():
    """Module-level imports between rlrun's modules form no cycle (imports inside functions aside)."""
    graph: dict[str, set[str]] = {}
    for path in SOURCE.rglob("*.py"):
        module = ".".join(("rlrun", *path.relative_to(SOURCE).with_suffix("").parts)).removesuffix(".__init__")
        edges = graph.setdefault(module, set())
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rlrun"):
                edges.update(
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                    for alias in node.names
                )
            elif isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names if alias.name.startswith("rlrun."))
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycle = [*trail[trail.index(target) :], target] if target in trail else [module, target]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if target in graph and not state.get(target):
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(graph):
        if not state.get(module):
            visit(module, [module])


def test_no_package_shadows_a_public_name():
    """`import rlrun.<x>` sets the attribute `rlrun.<x>` to the module: a package named like a public function
    (`bench`, `tune`) would replace that function after its first use."""
    import rlrun

    names = set(rlrun.__all__)
    packages = {path.name for path in SOURCE.iterdir() if (path / "__init__.py").exists()}
    modules = {path.stem for path in SOURCE.glob("*.py")}
    assert sorted((packages | modules) & (names - {"errors"})) == []


def test_no_module_is_longer_than_400_lines_and_api_stays_under_2500():
    """`api/` is one hermetic call; its budget is what shows a subsystem (a sweep, a report) landing there."""
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in SOURCE.rglob("*.py")}
    assert sorted(str(path.relative_to(SOURCE)) for path, count in lengths.items() if count > 400) == []
    assert sum(count for path, count in lengths.items() if path.is_relative_to(SOURCE / "api")) < 2500


CORE = (
    "trust",
    "hermetic",
    "api",
    "benching",
    "tuning",
    "sweep.py",
    "cli",
    "runs",
    "envs",
    "configs",
    "errors.py",
    "reports",
)


@pytest.mark.parametrize("module", [*CORE, "executors"])
def test_the_core_imports_no_rl_library(module):
    for path in layer_files(module):
        for name in imports_of(path):
            assert name.split(".")[0] not in RL_LIBRARIES, f"{path.relative_to(SOURCE)} imports {name}"


RUNS_ORDER = ("atomic", "manifest", "lookup", "record", "metrics", "transfer")
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
