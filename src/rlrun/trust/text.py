"""Text read from files, made safe where rlrun shows it: on a terminal (`terminal`) and in report.md
(`markdown`, `code`).

A run folder's name, a task or key read from run.json, an error or run label in results.jsonl, a study's
parameter: any of them may hold characters a terminal obeys (ESC starts a control sequence that can move the
cursor, rewrite what is on the screen or set the window title) or Markdown and HTML that a viewer renders (a
`<script>`, an `<img onerror>`, a remote image that tells its server who opened the report, a `javascript:`
link). These functions turn such text into text that shows what it holds and does nothing else.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["code", "markdown", "terminal"]

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories a terminal acts on or shows as nothing: control characters (ESC, CR, BEL, DEL, C1),
format characters (bidirectional overrides, zero-width ones), lone surrogates (a file name's bytes that are
not UTF-8) and line and paragraph separators."""

_MARKDOWN = re.compile(r"([\\`\[\]()!])")
"""What starts or closes a Markdown link, image or code span, and the backslash that would undo an escape."""


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, as `os.fsdecode` keeps it
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal(text: object) -> str:
    """`text` with every control, format and separator character written as its escape (ESC as `\\x1b`, a
    newline as `\\x0a`, U+202E as `\\u202e`), so that printing it shows it and changes nothing on the screen."""
    value = str(text)
    if value.isprintable():
        return value
    return "".join(_escaped(char) if unicodedata.category(char) in _HIDDEN else char for char in value)


def markdown(text: object, *, table: bool = False) -> str:
    """`text` as plain text in Markdown: one line; `&`, `<` and `>` as HTML entities; the characters of links,
    images and code spans (`[`, `]`, `(`, `)`, `!`, backticks) and the backslash escaped; `|` escaped too in a
    table cell (`table`); control characters as in `terminal`. No tag, link or image can start in it."""
    flat = " ".join(str(text).split())
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    flat = terminal(_MARKDOWN.sub(r"\\\1", flat))
    return flat.replace("|", "\\|") if table else flat


def code(text: object, *, table: bool = False) -> str:
    """`text` as one Markdown code span: one line, control characters as in `terminal`, fenced with one backtick
    more than its longest run of backticks (so it cannot close the span early), `|` escaped in a table cell
    (`table`; GFM reads that escape inside a span too). HTML, links and images are shown, never rendered, in a
    code span."""
    flat = terminal(" ".join(str(text).split()))
    if table:
        flat = flat.replace("|", "\\|")
    if not flat:
        return "` `"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat[0] in "` " or flat[-1] in "` " else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
