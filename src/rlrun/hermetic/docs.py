"""Render the guard registry as the Markdown page `docs/guards.md`.

    python -m rlrun.hermetic.docs > docs/guards.md

The page is generated from `GUARDS`, so the docs list exactly what the scope restores and what the
leak detector watches; a test fails when the page is out of date.
"""

from __future__ import annotations

from rlrun.hermetic.registry import GUARDS

HEADER = """# What a call guards

Generated from the guard registry (`rlrun.hermetic.GUARDS`) by `python -m rlrun.hermetic.docs`.
*Restored* entries are captured before a call and put back after it, in reverse order, each
restorer isolated from the others. *Watched* entries cannot be put back by assignment (threads,
file descriptors, child processes, ...): the leak detector reports them, and the code that created
them must close them. Library adapters add their own entries when they are imported.
"""


def guard_table() -> str:
    """One Markdown table row per registry entry: rlrun's in capture order, then each library's, in table order.

    (The registry itself holds library guards in the order adapters happened to be imported.)
    """
    owners = _load_library_guards()
    rows = ["| global | kind | owner | what is covered |", "|---|---|---|---|"]
    for guard in sorted(GUARDS, key=lambda guard: owners.index(guard.owner) if guard.owner in owners else len(owners)):
        kind = "restored" if guard.restored else "watched"
        rows.append(f"| `{guard.name}` | {kind} | {guard.owner} | {guard.doc.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def _load_library_guards() -> list[str]:
    """Import every adapter (which registers its guards); return the owners in table order."""
    from rlrun.libraries import LIBRARIES, load_adapter

    for library in LIBRARIES.values():
        load_adapter(library)
    return ["rlrun", *LIBRARIES]


def page() -> str:
    """The whole page."""
    table = guard_table()
    restored = sum(guard.restored for guard in GUARDS)
    return f"{HEADER}\n{restored} restored, {len(GUARDS) - restored} watched.\n\n{table}"


if __name__ == "__main__":
    print(page(), end="")
