"""Render the guard registry as the Markdown page `docs/guards.md`.

    python scripts/guard_docs.py > docs/guards.md

The page is generated from `rlrun.hermetic.GUARDS` after every library adapter is imported (which
registers the library's guards; the libraries themselves are not imported), so the docs list exactly
what the scope restores and what the leak detector watches. `tests/hermetic/test_registry.py` fails
when the page is out of date. This lives outside the package because it needs the library table,
which the hermetic core must not import.
"""

from __future__ import annotations

import importlib

from rlrun.hermetic import GUARDS
from rlrun.libraries import LIBRARIES

HEADER = """# What a call guards

Generated from the guard registry (`rlrun.hermetic.GUARDS`) by
`python scripts/guard_docs.py > docs/guards.md`; a test fails while this page is out of date.
*Restored* entries are captured before a call and put back after it, in reverse order, each
restorer isolated from the others. *Watched* entries cannot be put back by assignment (threads,
file descriptors, child processes, ...; `rlrun/hermetic/watched.py`): the leak detector reports
them, and the code that created them must close them. Library adapters add their own entries when
they are imported. To add a guard, follow the recipe at the top of `rlrun/hermetic/registry.py`.
"""


def load_library_guards() -> list[str]:
    """Import every adapter module (which registers its guards); return the owners in table order."""
    for library in LIBRARIES.values():
        importlib.import_module(library.adapter)
    return ["rlrun", *LIBRARIES]


def guard_table() -> str:
    """One Markdown table row per registry entry: rlrun's in registry order, then each library's, in table order.

    (The registry itself holds library guards in the order adapters happened to be imported.)
    """
    owners = load_library_guards()
    rows = ["| global | kind | owner | what is covered |", "|---|---|---|---|"]
    for guard in sorted(GUARDS, key=lambda guard: owners.index(guard.owner) if guard.owner in owners else len(owners)):
        kind = "restored" if guard.restored else "watched"
        rows.append(f"| `{guard.name}` | {kind} | {guard.owner} | {guard.doc.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def page() -> str:
    """The whole page."""
    table = guard_table()
    restored = sum(guard.restored for guard in GUARDS)
    return f"{HEADER}\n{restored} restored, {len(GUARDS) - restored} watched.\n\n{table}"


if __name__ == "__main__":
    print(page(), end="")
