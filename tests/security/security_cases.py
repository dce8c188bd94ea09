"""The corpus as data: `Case(name, klass, library, build, surfaces, expect)`, one entry per crafted file or folder.

`klass` is the class of attack the file belongs to (1-8; the threat model is docs/security.md):
1 configuration strings are code; 2 a shared study writes best.yaml; 3 SB3 zips unpickle; 4 check, then load
again; 5 symlinks are followed; 6 numbers and names from files are believed; 7 specs steer I/O and the network;
8 tracebacks and hangs instead of one line; 0 marks a control (an untouched genuine run).

`build(workspace, genuine)` writes the case's files into the workspace (see `security_harness`) and returns a
`Built` naming them; `surfaces` are the commands the file reaches (`SURFACES` in `security_surfaces`); `expect`
says what each of them must do:

- `REFUSED`: exit 2, one stderr line `rlrun: error: ...` naming the key, file or path at fault (`Case.names`),
  and nothing in the workspace changed;
- `safe(check)`: exit 0, with `check` (the payload ignored or escaped: see each check) holding;
- `either(check)`: one of the two (both are safe, e.g. a swapped checkpoint is read once: the call goes
  on with the bytes it checked, or it refuses the file);
- `cell_failed(pattern)`: `rlrun bench` exits 1 because the cell failed, its row's error one line that matches
  `pattern` (a crafted file a bench cell reads mid-bench, such as a run folder in `--storage`, fails that cell,
  not the bench: the command line's refusal is for what planning reads).

Whatever the outcome, the test checks that no marker was written (no payload ran), that nothing outside the log
root and out folder changed, that the process is as it was (the leak detector's census), that no module the
payload names was imported, and that no file in the folders the case names `unread` was opened. Adding a case
is one entry in `CASES` (`security_corpus.py`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from security_harness import Workspace

Check = Callable[[Workspace, "Built", str, str], "str | None"]
"""A safe outcome's check: None when it holds, else what is wrong; given the workspace, what the case built, and
the call's stdout and stderr."""


@dataclasses.dataclass(frozen=True)
class Expect:
    refused: bool
    """Exit 2 with one line is the expected outcome (or one of them)."""
    safe: Check | None = None
    """Exit 0 is the expected outcome (or one of them) when this holds."""
    line: Callable[[str], str | None] | None = None
    """A refusal's line must pass this too (None when it does, else what is wrong)."""
    failed: Check | None = None
    """Exit 1 (`rlrun bench`: a cell failed) is the expected outcome when this holds."""
    describe: str = ""

    def __str__(self) -> str:
        return self.describe


REFUSED = Expect(refused=True, describe="refused: exit 2, one line, nothing changed")


def safe(check: Check, what: str) -> Expect:
    return Expect(refused=False, safe=check, describe=f"safe: exit 0, {what}")


def either(check: Check, what: str) -> Expect:
    return Expect(refused=True, safe=check, describe=f"refused, or safe: exit 0, {what}")


def cell_failed(pattern: str, what: str) -> Expect:
    """`rlrun bench` exits 1: its one cell failed, and the row's error is one line that matches `pattern`."""

    def check(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
        row = _json(stdout)
        if row is None:
            return f"no JSON row on stdout: {stdout[-300:]!r}"
        error = row.get("error")
        if row.get("status") != "failed" or not isinstance(error, str):
            return f"the cell did not fail: {row.get('status')!r}, {error!r}"
        if "\n" in error or "Traceback" in error:
            return f"the cell's error is not one line: {error!r}"
        if not re.search(pattern, error):
            return f"the cell's error does not match {pattern!r}: {error!r}"
        if built.stored is not None:  # a folder from --storage that was refused left no part of it below
            copied = sorted(path.name for path in workspace.out.rglob("2099-*"))
            if copied:
                return f"the refused stored folder was left below the log root: {copied}"
        return None

    return Expect(refused=False, failed=check, describe=f"the cell failed: exit 1, {what}")


def refused_naming(pattern: str, forbidden: str, what: str) -> Expect:
    """Refused, with a line that matches `pattern` and does not hold `forbidden`."""

    def line(text: str) -> str | None:
        if forbidden.lower() in text.lower():
            return f"the line holds {forbidden!r}"
        if not re.search(pattern, text):
            return f"the line does not name {pattern!r}"
        return None

    return Expect(refused=True, line=line, describe=f"refused: exit 2, one line {what}")


@dataclasses.dataclass(frozen=True)
class Built:
    """What a case's build made, for its surfaces."""

    run: Path | None = None
    """The run folder the case planted under the log root (play, export and resume find it)."""
    checkpoint: Path | None = None
    """A checkpoint given with --checkpoint (a lone file)."""
    agent_config: Path | None = None
    """An --agent_config file (default: the planted run's params/agent.yaml)."""
    overrides: tuple[str, ...] = ()
    """Trailing agent./env. words."""
    spec: Path | None = None
    """A bench or tune spec."""
    spec_owns_out: bool = False
    """The spec's own `out` is the attack: --out is not given on the command line."""
    report: Path | None = None
    """A bench folder for `rlrun report`."""
    argv: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """More words per surface (`--checkpoint best`, `--storage ...`)."""
    json: bool = True
    """Ask for --json output (off where what a terminal shows is the point)."""
    swap: tuple[Path, Path, int] | None = None
    """(file, replacement, reads): the file is replaced by the replacement once it has been read that often."""
    planted: str | None = None
    """The name of a planted run folder that the call must not take, and must name (for an earlier bench row: the
    run folder that row names, which a bench run again must not reuse)."""
    payload: str | None = None
    """Text of the payload that must not reach an output (best.yaml), or that a report must show."""
    names: tuple[str, ...] = ()
    """What a refusal's line must name besides the case's `names` (a path only the build knows)."""
    writes: tuple[str, ...] = ()
    """Workspace paths besides the log root and out folder that the call may write (export of a lone checkpoint
    writes exported/ beside the file the command line named; a bench's `--storage`)."""
    stored: tuple[Path, Path] | None = None
    """(a crafted run folder, the `--storage` folder) for `bench --retries`: each cell's first attempt is lost with
    its node, and meanwhile the folder appears in the storage as one that attempt sent; the retry reads it
    (`security_harness.lose_first_attempt`)."""
    unread: tuple[Path, ...] = ()
    """Folders the call must not open a file in or list, links followed (`security_harness.ReadWatch`): where a
    planted link points, a run folder outside the log root."""


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    klass: int
    library: str
    """A key of `security_harness.LIBRARIES` (`skrl_jax`: SKRL on JAX)."""
    build: Callable[[Workspace, Any], Built]
    surfaces: tuple[str, ...]
    expect: Expect
    modules: tuple[str, ...] = ()
    """Modules the payload names that the call must not import."""
    names: tuple[str, ...] = ()
    """What a refusal's line must name (the key, file or path at fault; compared without case)."""
    deadline: float = 120.0
    """Seconds a call may run before it counts as hung."""
    requires: tuple[str, ...] = ()
    """Modules the case needs besides its library's (it is skipped without them)."""
    isolated: bool = False
    """Run the call in a child process (a case whose current behaviour could block for minutes: a Ray address)."""
    slow: tuple[str, ...] = ()
    """Surfaces of this case that belong to the slow suite."""
    why: str = ""
    """What the file does to rlrun as it is, in a few words."""

    def __str__(self) -> str:
        return self.name


# --- checks of safe outcomes --------------------------------------------------------------------------------


def _json(stdout: str) -> dict[str, Any] | None:
    try:
        value = json.loads(stdout)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def genuine_taken(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
    """The call took the genuine run's checkpoint, not the planted run's, and said it left the planted one out."""
    result = _json(stdout)
    if result is None or not isinstance(result.get("checkpoint"), str):
        return f"no JSON result with a checkpoint on stdout: {stdout[-300:]!r}"
    assert built.planted is not None
    if built.planted in result["checkpoint"]:
        return f"it took the planted run's checkpoint {result['checkpoint']!r}"
    if built.planted not in stdout + stderr:
        return f"it did not say that it left the planted run {built.planted!r} out (stderr: {stderr[-300:]!r})"
    return None


def no_terminal_controls(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
    """Nothing printed holds a control character a terminal obeys (ESC, BEL, CSI)."""
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        found = sorted(
            {hex(ord(char)) for char in text if (ord(char) < 32 and char not in "\n\t") or ord(char) in (127, 0x9B)}
        )
        if found:
            return f"{name} holds raw control characters {', '.join(found)}: {text[-300:]!r}"
    return None


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_RAW_HTML = re.compile(
    r"<\s*/?\s*(?:script|img|iframe|svg|object|embed|style|link|meta)\b|<a\s|<(?:https?|javascript|data):",
    re.IGNORECASE,
)
_LINK_TARGET = re.compile(r"(?<!\\)\]\(\s*<?\s*(?:https?:|javascript:|data:|//)", re.IGNORECASE)


def report_inert(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
    """report.md shows the results file's strings and renders none of them: outside code spans there is no raw
    HTML tag, no Markdown link or image to a remote or `javascript:` target, and no control character."""
    assert built.report is not None
    path = built.report / "report.md"
    if not path.is_file():
        return "no report.md was written"
    text = path.read_text(encoding="utf-8")
    if "\x1b" in text or "\x07" in text:
        return "report.md holds raw control characters"
    prose = "\n".join(_CODE_SPAN.sub("", line) for line in text.splitlines())
    for pattern, what in ((_RAW_HTML, "a raw HTML tag"), (_LINK_TARGET, "a live link or image")):
        match = pattern.search(prose)
        if match:
            start = max(0, match.start() - 60)
            return f"report.md holds {what}: {prose[start : match.end() + 60]!r}"
    if built.payload and built.payload not in text and not _shown(built.payload, text):
        return f"report.md does not show the row's text {built.payload!r} at all"
    return None


def _shown(payload: str, text: str) -> bool:
    """Whether `payload`'s words appear in `text` in some escaped form."""
    words = [word for word in re.findall(r"[A-Za-z]{4,}", payload)]
    return all(word in text for word in words)


def best_clean(
    payload: str | None = None, value_above: float | None = None, keys_in: dict[str, tuple[float, float]] | None = None
) -> Check:
    """The study's best trial is not the planted one: best.yaml (if written) holds no `payload`, its value is not
    above `value_above`, and each of `keys_in` (a dotted key of best.yaml) lies in its range."""

    def check(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
        result = _json(stdout) or {}
        value = result.get("best_value")
        if value_above is not None and isinstance(value, int | float) and value > value_above:
            return f"the planted trial's value {value!r} was taken as the best"
        best = workspace.out / "best.yaml"
        if best.is_file():
            text = best.read_text(encoding="utf-8")
            if payload and payload in text:
                return "best.yaml holds the planted trial's payload"
            import yaml

            config = yaml.safe_load(text)
            for key, (low, high) in (keys_in or {}).items():
                found: Any = config
                for part in key.split("."):
                    found = found.get(part) if isinstance(found, dict) else None
                if isinstance(found, int | float) and not low <= found <= high:
                    return f"best.yaml has {key}: {found!r}, outside the search space [{low}, {high}]"
        return None

    return check


def trained_again(reason: str | None, what: str) -> Expect:
    """A bench run again over an earlier row of its cell did not reuse that row: the cell trained again, its row a
    new completed training in a run folder under the log root (`<out>/runs`), not the one the planted row names;
    with `reason`, a warning said why the row was not reused."""

    def check(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
        row = _json(stdout)
        if row is None:
            return f"no JSON row on stdout: {stdout[-300:]!r}"
        run_dir = row.get("run_dir")
        if row.get("status") != "completed" or not isinstance(run_dir, str):
            return f"the cell did not train again: {row.get('status')!r}, {row.get('error')!r}"
        if run_dir == built.planted:
            return f"the planted row was reused: {stdout[-300:]!r}"
        if not Path(run_dir).is_relative_to(workspace.out / "runs"):
            return f"the row names a run folder outside the log root: {run_dir!r}"
        steps, final = row.get("env_steps"), row.get("final_return")
        if type(steps) is not int or not (final is None or (isinstance(final, float) and math.isfinite(final))):
            return f"the row holds the planted numbers: env_steps {steps!r}, final_return {final!r}"
        if reason is not None and not re.search(reason, stderr):
            return f"no warning says why the row was not reused ({reason!r}): {stderr[-300:]!r}"
        return None

    return safe(check, what)


def reused(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
    """The bench reused the earlier row of its cell as it was: no training, the row names the planted run folder."""
    row = _json(stdout)
    if row is None:
        return f"no JSON row on stdout: {stdout[-300:]!r}"
    if row.get("run_dir") != built.planted or row.get("status") != "completed":
        return f"the earlier row was not reused: {stdout[-300:]!r} (warnings: {stderr[-300:]!r})"
    return None


def started_over(attempts: int, what: str) -> Expect:
    """A retry that was to go on from the folder planted in `--storage` ignored it: the cell's row is a training
    completed on attempt `attempts`, from the start (its note names no run it resumed from)."""

    def check(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
        row = _json(stdout)
        if row is None:
            return f"no JSON row on stdout: {stdout[-300:]!r}"
        note = str(row.get("note"))
        if row.get("status") != "completed" or row.get("attempts") != attempts:
            return f"not completed on attempt {attempts}: {row.get('status')!r}, {row.get('error')!r}, {note!r}"
        if "resumed from" in note or "resuming from --storage" in note:
            return f"the retry went on from the planted folder, or tried to: {note!r}"
        return None

    return safe(check, what)


def resumed_from_storage(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
    """The retry went on from the run folder in `--storage` (copied below the log root), at its listed iteration."""
    row = _json(stdout)
    if row is None:
        return f"no JSON row on stdout: {stdout[-300:]!r}"
    note = str(row.get("note"))
    if row.get("status") != "completed" or row.get("attempts") != 2:
        return f"not completed on attempt 2: {row.get('status')!r}, {row.get('error')!r}, {note!r}"
    if not re.search(r"resumed from \S+/2099-01-01_00-00-\d\d_\w+ at iteration 1\b", note):
        return f"the retry did not go on from the stored folder: {note!r}"
    return None


def nothing_more(workspace: Workspace, built: Built, stdout: str, stderr: str) -> str | None:
    """No further condition: no payload ran and nothing left its place (checked for every case)."""
    return None
