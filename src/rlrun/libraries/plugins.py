"""Libraries from installed packages: the `rlrun.libraries` entry-point group.

A package adds a library by naming, in its metadata, a `rlrun.libraries.Library` row; the entry point's
name is the library's name (what users pass to `--library`), e.g. in its `pyproject.toml`:

    [project.entry-points."rlrun.libraries"]
    my_lib = "my_package.rlrun_adapter:LIBRARY"

    # my_package/rlrun_adapter.py (imports neither torch nor the library: only its functions do)
    LIBRARY = Library(name="my_lib", adapter="my_package.rlrun_adapter", import_name="my_lib",
                      distribution="my-lib", extra="", summary="...", configs="my_package.rlrun_configs")

The adapter module implements `rlrun.libraries.base.Adapter`, as rlrun's own do (ARCHITECTURE.md, "add a
library"), and its agent configurations lie in the `configs` package as in `rlrun.configs`
(`my_lib/ppo/default.yaml`, with `num_envs`, `max_iterations` and `seed` at the top level). The row then
counts as any other: `rlrun list`, `--library my_lib`, bench, the leak detector and the contract tests.

The group is read on the table's first read (`LibraryTable.load_plugins`), never at `import rlrun`. A
plugin that fails (its module does not import, its value is not a row, its adapter is incomplete, its name
is taken) is left out of the table and named, with the reason on one line, in `BROKEN`: `rlrun list`
shows it and `--library <name>` says why; the other libraries load.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
from typing import TYPE_CHECKING

from rlrun import configs

if TYPE_CHECKING:
    from rlrun.libraries.table import Library, LibraryTable

GROUP = "rlrun.libraries"

ADDED: dict[str, str] = {}
"""Library name -> the distribution whose entry point added it."""

BROKEN: dict[str, str] = {}
"""Entry point (library) name -> why it was left out, one line naming the distribution."""


def load_library_plugins(table: LibraryTable, *, reload: bool = False) -> None:
    """Add a row to `table` for each sound `rlrun.libraries` entry point; `reload` first drops the rows added
    before and reads the group again, for packages installed since."""
    if reload:
        for name in ADDED:
            dict.pop(table, name, None)
            configs.CONFIG_PACKAGES.pop(name, None)
        ADDED.clear()
        BROKEN.clear()
        importlib.invalidate_caches()  # includes importlib.metadata's cached path listings
    for entry_point in importlib.metadata.entry_points(group=GROUP):
        distribution = entry_point.dist.name if entry_point.dist is not None else "unknown"
        try:
            row = _checked_row(table, entry_point.load(), entry_point.name, entry_point.value)
        except Exception as error:  # a broken plugin must not take the other libraries down
            reason = " ".join(f"{type(error).__name__}: {error}".split())
            BROKEN[entry_point.name] = f"{entry_point.value} (from {distribution}) {reason}"
            continue
        dict.__setitem__(table, row.name, dataclasses.replace(row, provider=distribution))
        ADDED[row.name] = distribution
        if row.configs is not None:
            configs.CONFIG_PACKAGES[row.name] = row.configs


def _checked_row(table: LibraryTable, row: object, name: str, where: str) -> Library:
    """`row` if it is a sound row named `name` whose adapter is whole, else an exception saying what is wrong."""
    from rlrun.libraries.table import Library, load_adapter

    if not isinstance(row, Library):
        raise TypeError(f"is {type(row).__name__}, not a rlrun.libraries.Library row")
    if row.name != name:
        raise ValueError(f"names the library {row.name!r}; the entry point must have the same name")
    if dict.__contains__(table, row.name):
        raise ValueError(f"names the library {row.name!r}, which rlrun already has")
    adapter = load_adapter(row)  # IncompleteAdapter names what is missing
    if set(row.frameworks) != set(adapter.IMPORTS):
        raise ValueError(
            f"lists the frameworks {', '.join(row.frameworks)} and its adapter imports for {', '.join(adapter.IMPORTS)}"
        )
    if row.configs is not None:
        importlib.import_module(row.configs)  # the package of its configurations is there
    return row
