"""The trust boundary, shown with a corpus of crafted files (the classes in `security_cases`).

Every case of `security_corpus.CASES` is built in `tmp_path` (nothing of it is committed but this code) and run
through every command it reaches, in-process through `rlrun.main`. Each run must:

(a) write no marker: no payload in the file ran;
(b) end as the case expects: exit 2 with exactly one stderr line `rlrun: error: ...` that names the key, file or
    path at fault (`Case.names`) and nothing in the workspace changed, or exit 0 with the case's safe outcome
    (see `security_cases`); never a traceback or another exit code;
(c) write nothing outside the log root and the out folder (the inputs, the planted links' targets and the
    working directory are compared entry by entry before and after), and read nothing in the folders the case
    names `unread` (an audit hook sees each file opened and folder listed);
(d) leave the process as it was: the leak detector's census is compared around the call, and no module the
    payload names was imported.

`CONTROLS` run the untouched genuine runs through the same commands and must succeed, so that a refusal in the
corpus is the crafted file's doing, not the harness's. The calls run in-process under a watchdog (a hang or a
memory blow-up fails the case instead of the suite); the two Ray-address cases run in a child process, since
what they do when not refused is wait minutes for a cluster. A case that plants a run folder in a bench's
`--storage` loses each cell's first attempt (`security_harness.lose_first_attempt`, in place of `run_cell`), so
that the retry reads the planted folder as the lost attempt's, through the real `rlrun bench`. With
RLRUN_SECURITY_LOG=<file>, each call's exit code and stderr are appended to that file as JSON lines (to see why
a case passes).
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from security_cases import Case
from security_corpus import CASES, CONTROLS
from security_harness import (
    LIBRARIES,
    RanAway,
    ReadWatch,
    SwapAfterReads,
    Watchdog,
    Workspace,
    changes,
    is_noise,
    leaks_since,
    lose_first_attempt,
    tree,
)
from security_surfaces import SURFACES

import rlrun
from rlrun.hermetic import census
from support import missing_module

ERROR_PREFIX = "rlrun: error: "
SURFACE_REQUIRES = {"tune": ("optuna",), "report": ("matplotlib", "rliable", "scipy")}
"""The optional modules a command needs (rlrun refuses it without them, which is no verdict on a crafted file)."""


def _missing(case: Case, surface: str) -> str | None:
    needed = (*case.requires, *SURFACE_REQUIRES.get(surface, ()))
    absent = [name for name in needed if importlib.util.find_spec(name) is None]
    return missing_module(case.library) or (absent[0] if absent else None)


def _params() -> list[object]:
    params = []
    for case in [*CASES, *CONTROLS]:
        for surface in case.surfaces:
            marks = [pytest.mark.slow] if surface in case.slow else []
            missing = _missing(case, surface)
            if missing is not None:
                marks.append(pytest.mark.skip(reason=f"{missing} is not installed"))
            params.append(pytest.param(case, surface, id=f"{case.name}-{surface}", marks=marks))
    return params


def test_the_corpus_covers_every_class_and_library():
    """At least 60 crafted files, every class of attack and every library path, names unique and surfaces known."""
    assert len(CASES) >= 60
    assert len({case.name for case in CASES}) == len(CASES)
    assert {case.klass for case in CASES} == set(range(1, 9))
    assert {case.library for case in CASES} == set(LIBRARIES)
    for library in LIBRARIES:  # each library's configuration strings and checkpoints are attacked
        assert {case.klass for case in CASES if case.library == library} >= {1, 5}, library
    assert {case.library for case in CONTROLS} == set(LIBRARIES)
    for case in [*CASES, *CONTROLS]:
        assert case.surfaces and set(case.surfaces) <= set(SURFACES), case.name
        assert set(case.slow) <= set(case.surfaces), case.name


def test_the_watchdog_stops_a_runaway_call():
    """The harness itself: a call that runs past its deadline is stopped, so a hang fails and does not hang."""
    with pytest.raises(RanAway, match="deadline"), Watchdog(0.2) as watchdog:
        watchdog.arm()
        while True:
            sum(range(1000))


def test_the_swapper_replaces_a_file_after_it_was_read(tmp_path):
    """The harness itself: the file is replaced right before its third open, which reads the replacement."""
    path, replacement = tmp_path / "file", tmp_path / "replacement"
    path.write_text("genuine")
    replacement.write_text("planted")
    with SwapAfterReads(path, replacement, reads=2) as swap:
        seen = [path.read_text(), path.read_text()]
        assert not swap.swapped.is_set()
        seen.append(path.read_text())
        assert swap.swapped.is_set()
    assert seen == ["genuine", "genuine", "planted"]


@pytest.mark.parametrize(("case", "surface"), _params())
def test_crafted_file(case: Case, surface: str, genuine, tmp_path: Path, capsys, monkeypatch):
    workspace = Workspace(tmp_path).make()
    built = case.build(workspace, genuine)
    argv = SURFACES[surface](workspace, case, built)
    monkeypatch.chdir(workspace.cwd)  # a relative path the call writes would land here and be seen
    if built.stored is not None:
        import rlrun.benching.run

        monkeypatch.setattr(rlrun.benching.run, "run_cell", lose_first_attempt(*built.stored))
    before_tree = tree(workspace.root)
    imported_before = {name for name in case.modules if name in sys.modules}
    capsys.readouterr()

    assert not (case.isolated and (built.unread or built.stored)), "a child process is not watched"
    with ReadWatch(built.unread) as reads:
        if case.isolated:
            code, out, err, shown, leaks = _in_child(argv, workspace, case.deadline)
        else:
            code, out, err, shown, leaks = _in_process(argv, built, case.deadline, capsys)
    _log(case, surface, code, err, shown)

    after_tree = tree(workspace.root)
    changed = changes(before_tree, after_tree)
    report = f"exit {code}\nargv: {argv}\nstderr: {err[-3000:]}\nwarnings: {shown[-1500:]}\nstdout: {out[-1500:]}"

    # (a) no payload ran
    assert not workspace.marker.exists(), f"a payload in the crafted file ran ({case.why})\n{report}"
    # (d) no module the payload names was imported
    imported = {name for name in case.modules if name in sys.modules} - imported_before
    assert not imported, f"the call imported {sorted(imported)}, which the crafted file names\n{report}"
    # (c) nothing written outside the log root and the out folder
    kept = ("logs", "out", *built.writes)
    outside = [line for line in changed if not _under(line.split(" ", 1)[1], kept)]
    assert not outside, f"the call changed files outside the log root and out folder: {outside[:10]}\n{report}"
    assert not reads.reads, f"the call read where it must not: {reads.reads[:10]}\n{report}"
    # (b) the outcome the case expects, in one line or safely
    assert "Traceback" not in err, report
    expect = case.expect
    if code == 2:
        assert expect.refused, f"refused, but the case expects {expect}\n{report}"
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), f"not one error line\n{report}"
        assert len(lines[0]) > len(ERROR_PREFIX) + 10, "the line names nothing"
        missing = [name for name in (*case.names, *built.names) if name.lower() not in lines[0].lower()]
        assert not missing, f"the refusal does not name {missing} (the key, file or path at fault)\n{report}"
        if expect.line is not None:
            problem = expect.line(lines[0])
            assert problem is None, f"{problem}\n{report}"
        if expect.safe is None:  # a plain refusal changes nothing at all (a study's storage may be opened)
            allowed = ("out",) if surface == "tune" else ()
            swapped = {os.path.relpath(path, workspace.root) for path in built.swap[:2]} if built.swap else set()
            left = [line for line in changed if not _under(line.split(" ", 1)[1], allowed)]
            left = [line for line in left if line.split(" ", 1)[1] not in swapped]  # the attacker's own change
            assert not left, f"a refused call changed the workspace: {left[:10]}\n{report}"
    elif code == 0:
        assert expect.safe is not None, f"exit 0, but the case expects {expect}\n{report}"
        problem = expect.safe(workspace, built, out, "\n".join(filter(None, (err, shown))))
        assert problem is None, f"exit 0 and {problem}\n{report}"
    elif code == 1 and expect.failed is not None:  # a bench whose cell failed: the row says why, in one line
        problem = expect.failed(workspace, built, out, "\n".join(filter(None, (err, shown))))
        assert problem is None, f"exit 1 and {problem}\n{report}"
    else:
        pytest.fail(f"the case expects {expect}, and the call ended otherwise\n{report}")
    # (d) the caller's process is as it was
    assert not leaks, f"the call left the process changed: {leaks}\n{report}"


def _under(path: str, folders: tuple[str, ...]) -> bool:
    """Whether the workspace path `path` is one of `folders` or lies under one."""
    return any(path == folder or path.startswith(folder + os.sep) for folder in folders)


def _in_process(argv: list[str], built, deadline: float, capsys) -> tuple[int, str, str, str, list[str]]:
    """`rlrun.main(argv)` under a watchdog (and the case's file swap), with the census compared around it; the
    warnings it showed after the call (on a terminal: stderr lines) are returned apart, as text."""
    swap = SwapAfterReads(*built.swap) if built.swap else contextlib.nullcontext()
    with Watchdog(deadline) as watchdog, swap, warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        before = census.snapshot()
        code, out, err = _main(argv, watchdog, capsys)
        if code == 1 and is_noise(err):  # onnxruntime's telemetry, nothing of the call's
            shown.clear()
            code, out, err = _main(argv, watchdog, capsys)
        if code != 2:  # a call that crashed may leave reference cycles: finalise them now, blamed on this call
            gc.collect()
        leaks = leaks_since(before)
    return code, out, err, "\n".join(str(item.message) for item in shown), leaks


def _main(argv: list[str], watchdog: Watchdog, capsys) -> tuple[int, str, str]:
    watchdog.arm()
    try:
        code = rlrun.main(argv)
    except RanAway as stop:
        captured = capsys.readouterr()
        pytest.fail(f"{stop} (a hang, where one line was due)\nargv: {argv}\nstderr: {captured.err[-2000:]}")
    finally:
        watchdog.disarm()
    captured = capsys.readouterr()
    return code, captured.out, captured.err


CHILD = "import sys, rlrun; sys.exit(rlrun.main(sys.argv[1:]))"


def _in_child(argv: list[str], workspace: Workspace, deadline: float) -> tuple[int, str, str, str, list[str]]:
    """`rlrun.main(argv)` in a child process with the leak detector on (for a case whose current behaviour may
    block for minutes): the caller's process cannot be changed by it, so there is no census to compare."""
    environment = {**os.environ, "RLRUN_CHECK_LEAKS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, *argv],
            cwd=workspace.cwd,
            env=environment,
            capture_output=True,
            text=True,
            timeout=deadline,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(
            f"the call ran past its {deadline:.0f} s deadline (a hang, where one line was due)\n{expired.stderr!r}"
        )
    return done.returncode, done.stdout, done.stderr, "", []


def _log(case: Case, surface: str, code: int, err: str, shown: str) -> None:
    """With RLRUN_SECURITY_LOG=<file>, append what each call did (a JSON line): to read why a case passes."""
    path = os.environ.get("RLRUN_SECURITY_LOG")
    if path:
        row = {"case": case.name, "surface": surface, "exit": code, "stderr": err[-600:], "warnings": shown[-400:]}
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(row) + "\n")
