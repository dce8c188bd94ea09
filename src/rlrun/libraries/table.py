"""The table of RL libraries rlrun drives: one `Library` row per library (name, adapter module, import
name, distribution, pip extra), and the look-ups on it.

Installed packages add rows through the `rlrun.libraries` entry-point group (`rlrun.libraries.plugins`),
read on the table's first read. `load_adapter` imports a row's adapter module and checks it against
`rlrun.libraries.base.Adapter`, so an incomplete adapter fails before a call starts.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from rlrun.errors import MissingDependency, UnknownLibrary, UnsupportedTask, did_you_mean
from rlrun.libraries.base import Adapter, missing_members


@dataclass(frozen=True)
class Library:
    """One row of the table."""

    name: str
    """The name users pass to `--library`."""
    adapter: str
    """The rlrun module that implements the adapter surface for this library."""
    import_name: str
    """The library's top-level package (its presence means it is installed)."""
    distribution: str
    """The PyPI distribution, for version reporting."""
    extra: str
    """The rlrun pip extra that installs it."""
    summary: str
    frameworks: tuple[str, ...] = ("torch",)
    """The ML frameworks it runs on (`--ml_framework`), the default first."""
    configs: str | None = None
    """The package whose files hold its agent configurations, laid out as `rlrun.configs`'s
    (`<name>/<algorithm>/default.yaml`, ...); None: `rlrun.configs`. For a library a package adds."""
    provider: str = "rlrun"
    """The distribution that ships the adapter: rlrun, or the package whose entry point added the row (set
    when the entry point is loaded)."""

    @property
    def installed(self) -> bool:
        """True when the library can be imported (checked without importing it)."""
        return importlib.util.find_spec(self.import_name) is not None

    @property
    def version(self) -> str | None:
        """The installed distribution's version, or None."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    @property
    def action_spaces(self) -> tuple[str, ...]:
        """Gymnasium space classes at least one of its algorithms can act in (`Box`, `Discrete`), read
        from the adapter's `ALGORITHMS` (loading the adapter does not import the library)."""
        spaces = (space for spaces in load_adapter(self).ALGORITHMS.values() for space in spaces)
        return tuple(dict.fromkeys(spaces))

    @property
    def sees_images(self) -> bool:
        """Whether its adapter has a policy for image observations (`IMAGE_OBSERVATIONS`: an Atari task)."""
        from rlrun.libraries.base import sees_images

        return sees_images(load_adapter(self))

    @property
    def install_hint(self) -> str:
        if self.provider != "rlrun":
            return f"pip install '{self.distribution}'"
        return f"pip install 'rlrun[{self.extra}]'"


LIBRARIES: dict[str, Library] = {
    library.name: library
    for library in (
        Library(
            name="rsl_rl",
            adapter="rlrun.libraries.rsl_rl",
            import_name="rsl_rl",
            distribution="rsl-rl-lib",
            extra="rsl-rl",
            summary="RSL-RL on-policy runner (PPO), continuous actions only",
        ),
        Library(
            name="skrl",
            adapter="rlrun.libraries.skrl",
            import_name="skrl",
            distribution="skrl",
            extra="skrl",
            summary="SKRL runner: PPO (Box, Discrete) and SAC (Box), on PyTorch or JAX",
            frameworks=("torch", "jax"),
        ),
        Library(
            name="sb3",
            adapter="rlrun.libraries.sb3",
            import_name="stable_baselines3",
            distribution="stable-baselines3",
            extra="sb3",
            summary="Stable-Baselines3 PPO, A2C (Box, Discrete), SAC and TD3 (Box)",
        ),
        Library(
            name="rl_games",
            adapter="rlrun.libraries.rl_games",
            import_name="rl_games",
            distribution="rl-games",
            extra="rl-games",
            summary="rl_games Runner: PPO (a2c_continuous for Box, a2c_discrete for Discrete)",
        ),
        Library(
            name="torchrl",
            adapter="rlrun.libraries.torchrl",
            import_name="torchrl",
            distribution="torchrl",
            extra="torchrl",
            summary="TorchRL trainers: PPOTrainer (Box, Discrete) and SACTrainer (Box), on tensordict",
        ),
    )
}
"""Library name -> row. Adding a library is adding a row and an adapter module."""


class LibraryTable(dict[str, Library]):
    """`LIBRARIES`: the rows above and, from the first read on, the rows of installed packages' `rlrun.libraries`
    entry points (`rlrun.libraries.plugins`). Every read loads them first, so whatever reads the table (the
    planner, `rlrun list`, the tests) sees them, and `import rlrun` reads no entry point."""

    _loaded = False

    def load_plugins(self, *, reload: bool = False) -> None:
        """Add the plugins' rows (once; `reload` drops them and reads the group again)."""
        if self._loaded and not reload:
            return
        self._loaded = True
        from rlrun.libraries.plugins import load_library_plugins

        load_library_plugins(self, reload=reload)

    def __getitem__(self, name: str) -> Library:
        self.load_plugins()
        return super().__getitem__(name)

    def __contains__(self, name: object) -> bool:
        self.load_plugins()
        return super().__contains__(name)

    def __iter__(self) -> Iterator[str]:
        self.load_plugins()
        return super().__iter__()

    def __len__(self) -> int:
        self.load_plugins()
        return super().__len__()

    def get(self, name: str, default: Any = None) -> Any:
        self.load_plugins()
        return super().get(name, default)

    def keys(self) -> Any:
        self.load_plugins()
        return super().keys()

    def values(self) -> Any:
        self.load_plugins()
        return super().values()

    def items(self) -> Any:
        self.load_plugins()
        return super().items()


LIBRARIES = LibraryTable(LIBRARIES)

ALIASES = {"rsl-rl": "rsl_rl", "rslrl": "rsl_rl"}


def get_library(name: str) -> Library:
    """Return the row for `name`, or raise `UnknownLibrary` with the nearest name and the list."""
    name = ALIASES.get(name, name)
    if name in LIBRARIES:
        return LIBRARIES[name]
    from rlrun.libraries.plugins import BROKEN

    if name in BROKEN:
        raise UnknownLibrary(f"library {name!r} comes from a plugin that did not load: {BROKEN[name]}")
    close = did_you_mean(name, LIBRARIES, listing=0)
    raise UnknownLibrary(f"unknown library {name!r}.{close} Known libraries: {', '.join(LIBRARIES)} (rlrun list).")


FRAMEWORKS = {"torch": ("torch", None), "jax": ("jax", "jax")}
"""ML framework -> (module to find, rlrun pip extra that installs it)."""


def check_installed(library: Library, framework: str = "torch") -> None:
    """Raise `MissingDependency` naming the pip extra when the library or its framework is not installed."""
    if not library.installed:
        raise MissingDependency(
            f"library {library.name!r} is not installed (no module {library.import_name!r}); "
            f"install it with: {library.install_hint}"
        )
    module, extra = FRAMEWORKS[framework]
    if extra is not None and importlib.util.find_spec(module) is None:
        raise MissingDependency(
            f"{library.name} on {framework} needs {module!r}, which is not installed; "
            f"install it with: pip install 'rlrun[{extra}]'"
        )


class IncompleteAdapter(TypeError):
    """An adapter module lacks members of `rlrun.libraries.base.Adapter` (a bug in the adapter, not a user error)."""


def load_adapter(library: Library) -> Adapter:
    """Import the adapter module (which does not import the library itself) and check it is a whole `Adapter`."""
    module = importlib.import_module(library.adapter)
    missing = missing_members(module)
    if missing:
        raise IncompleteAdapter(
            f"{library.adapter} does not implement rlrun.libraries.base.Adapter: it lacks {', '.join(missing)}."
        )
    return cast(Adapter, module)


def libraries_for(space: str, *, images: bool = False) -> list[str]:
    """Names of the libraries that can act in a Gymnasium space class called `space` (and, with `images`, see
    image observations)."""
    return [
        library.name
        for library in LIBRARIES.values()
        if space in library.action_spaces and (library.sees_images or not images)
    ]


def blind_to(library: Library, task: str, images: bool) -> str | None:
    """Why `library` cannot train on `task` when the task's observations are `images` (an Atari task, uint8 frames)
    and the library has no policy for them; None when it can."""
    if not images or library.sees_images:
        return None
    return f"{library.name} has no policy for {task}'s image observations"


def check_sees(library: Library, task: str, images: bool) -> None:
    """Refuse `library` for `task` when it is `blind_to` the task's observations, naming the libraries that see
    them."""
    reason = blind_to(library, task, images)
    if reason is None:
        return
    able = " or ".join(f"--library {name}" for name in libraries_for("Discrete", images=True))
    raise UnsupportedTask(reason + (f"; use {able}." if able else "."))
