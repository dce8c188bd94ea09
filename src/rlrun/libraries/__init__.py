"""The RL libraries rlrun drives: a plain table of names, adapter modules, pip extras and import names.

Every adapter module implements `rlrun.libraries.base.Adapter` and imports its library lazily,
inside its functions, so that a missing library only breaks its own row. `load_adapter` checks the
module against that surface. Installed packages add rows through the `rlrun.libraries` entry-point
group (`rlrun.libraries.plugins`), read when the table is first read. The table and its look-ups
live in `rlrun.libraries.table`; this package hands their names on.
"""

from __future__ import annotations

from rlrun.libraries.table import (
    ALIASES,
    FRAMEWORKS,
    LIBRARIES,
    IncompleteAdapter,
    Library,
    LibraryTable,
    blind_to,
    check_installed,
    check_sees,
    get_library,
    libraries_for,
    load_adapter,
)

__all__ = [
    "ALIASES",
    "FRAMEWORKS",
    "LIBRARIES",
    "IncompleteAdapter",
    "Library",
    "LibraryTable",
    "blind_to",
    "check_installed",
    "check_sees",
    "get_library",
    "libraries_for",
    "load_adapter",
]
