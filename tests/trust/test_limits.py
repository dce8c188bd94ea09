"""Every YAML and JSON file rlrun reads is data of bounded size (`rlrun.trust.limits`).

A crafted file (an alias bomb, deep nesting, a huge file, a tag, bytes that are not UTF-8, broken YAML, a list
where a mapping belongs, env.yaml keys the task does not take, a run.json nested very deep) reaches rlrun
through every surface that reads it: `--agent_config`, a bench spec, a tune spec, a run's `params/agent.yaml`
and `params/env.yaml` (`play`, `export`, `train --resume`), run.json (`play`), results.jsonl (`report`).
Each is refused through `rlrun.main` with exit 2 and one stderr line naming the file, in well under a
second of parsing, with no file or folder made and a clean census (the leak detector is on for the suite:
tests/conftest.py; a user error only gets its findings attached as a note, so the census is compared here).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import time
from pathlib import Path

import pytest

import rlrun
from rlrun.hermetic import census
from rlrun.reports.results import read_results
from rlrun.trust.limits import (
    MAX_DEPTH,
    MAX_JSON_BYTES,
    MAX_NODES,
    MAX_WHOLE,
    MAX_YAML_BYTES,
    UnreadableFile,
    parse_json,
    parse_yaml,
    read_json,
    read_text,
    read_yaml,
    whole_number,
)
from support import SMALL_RSL_RL

PENDULUM = "rlrun/Pendulum-v1"
ERROR_PREFIX = "rlrun: error: "
MARKER = "rlrun-limits-marker"


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """ "Billion laughs": each level lists the one before `width` times; 9 x 9 expands to 9**9 values."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


CRAFTED = {
    # case: (file bytes, what the one line says)
    "alias bomb": (alias_bomb().encode(), "expands to more than"),
    "deep nesting": (b"learning_rate: " + b"[" * 500 + b"]" * 500 + b"\n", "nested deeper than"),
    "alias inside itself": (b"learning_rate: &a [*a]\n", "inside the node it names"),
    "python tag": (
        f"learning_rate: !!python/object/apply:os.system ['touch {MARKER}']\n".encode(),
        "uses the YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'",
    ),
    "local tag": (b"learning_rate: !custom 3\n", "uses the YAML tag '!custom'"),
    "binary tag": (b"learning_rate: !!binary aGVsbG8=\n", "uses the YAML tag"),
    "broken YAML": (b"n_steps: [8,\nbatch_size: {\n", "is not valid YAML"),
    "not UTF-8": (b"learning_rate: \xff\xfe\n", "is not UTF-8 text"),
    "huge file": (b"# " + b"x" * MAX_YAML_BYTES + b"\n", "is larger than 1 MiB"),
}
"""Crafted YAML files, each refused wherever rlrun reads YAML."""


# --- the limits themselves ---------------------------------------------------------------------------------


def test_an_alias_bomb_is_refused_at_once():
    started = time.perf_counter()
    with pytest.raises(UnreadableFile, match=f"expands to more than {MAX_NODES:,} values"):
        parse_yaml(alias_bomb(), "bomb")
    assert time.perf_counter() - started < 2.0
    assert len(alias_bomb()) < 800


def test_aliases_within_the_limit_are_copies_and_plain_values_stay_plain():
    loaded = parse_yaml("a: &a {x: [1, 2]}\nb: *a\nwhen: 2024-01-01\nsteps: !!float 1e6\nname: !!str 3\n", "f")
    assert loaded == {"a": {"x": [1, 2]}, "b": {"x": [1, 2]}, "when": "2024-01-01", "steps": 1e6, "name": "3"}
    assert loaded["a"] is not loaded["b"] and loaded["a"]["x"] is not loaded["b"]["x"]  # no shared parts


def test_aliases_cannot_nest_past_the_depth_limit():
    chain = "x0: &x0 [1]\n" + "".join(f"x{i}: &x{i} [*x{i - 1}]\n" for i in range(1, MAX_DEPTH + 2))
    with pytest.raises(UnreadableFile, match="nested deeper than 64 levels through its aliases"):
        parse_yaml(chain, "chain")


@pytest.mark.parametrize(
    "tag", ["!!set {a: null}", "!!timestamp 2024-01-01", "!!omap [{a: 1}]", "!!python/name:os.system ''"]
)
def test_every_tag_that_names_no_plain_value_is_refused(tag):
    with pytest.raises(UnreadableFile, match="uses the YAML tag"):
        parse_yaml(f"value: {tag}\n", "tags")


def test_a_json_document_is_depth_checked_before_it_is_parsed():
    brackets = "[" * 100 + "{" * 100
    assert parse_json(json.dumps({"a": brackets, "b": [[1]]}), "j") == {
        "a": brackets,
        "b": [[1]],
    }  # strings do not nest
    with pytest.raises(UnreadableFile, match="nested deeper than 64 levels"):
        parse_json("[" * 100_000, "j")
    with pytest.raises(UnreadableFile, match="does not parse as JSON"):
        parse_json("[1, 2", "j")


def test_a_file_is_read_bounded_and_as_utf8(tmp_path):
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(MAX_JSON_BYTES + 1)  # sparse: nothing is written
    with pytest.raises(UnreadableFile, match="is larger than 16 MiB"):
        read_json(big, "run.json")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"a: caf\xe9\n")
    with pytest.raises(UnreadableFile, match=r"is not UTF-8 text \(byte 0xe9 at offset 6\); save it as UTF-8"):
        read_yaml(latin, "spec")
    marked = tmp_path / "bom.yaml"
    marked.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_yaml(marked, "spec") == {"a": 1}


def test_a_count_read_from_a_file_is_a_whole_number_an_int64_holds():
    assert whole_number(0) and whole_number(MAX_WHOLE) and whole_number(5, minimum=5)
    for value in (True, 1.0, "3", -1, MAX_WHOLE + 1, 10**400, None):
        assert not whole_number(value), value
    assert not whole_number(4, minimum=5)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    started = time.perf_counter()
    with pytest.raises(UnreadableFile, match="is not a regular file"):
        read_text(fifo, "spec", max_bytes=MAX_YAML_BYTES)
    assert time.perf_counter() - started < 1.0


def test_a_results_line_nested_too_deep_is_skipped_and_counted(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text("[" * 10_000 + "\n" + '{"key": ' + "[" * 10_000 + "\n", encoding="utf-8")
    read = read_results(results, curves=False)
    assert read.cells == () and read.unreadable_lines == (1, 2)


# --- through the command line ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A log root with one tiny RSL-RL run of the pendulum."""
    root = tmp_path_factory.mktemp("limits") / "runs"
    request = rlrun.TrainRequest(
        task=PENDULUM, library="rsl_rl", num_envs=2, max_iterations=1, log_root=str(root), overrides=SMALL_RSL_RL
    )
    assert rlrun.train(request).checkpoint is not None
    return root


@pytest.fixture(scope="module", autouse=True)
def warm_up() -> None:
    """Import, once and through a call's import phase, what the calls here import: import effects (a logger,
    an exit hook) belong to the import, and the census each test takes around its call would blame them on it."""
    from rlrun.api import imports
    from rlrun.hermetic import hermetic_call
    from rlrun.libraries import LIBRARIES, load_adapter
    from rlrun.reports import HEAVY_MODULES

    names = [*imports.CORE_IMPORTS, *[*imports.EXPORT_IMPORTS, "onnxruntime", "matplotlib", *HEAVY_MODULES]]
    for name in ("rsl_rl", "sb3"):
        if LIBRARIES[name].installed:
            names += load_adapter(LIBRARIES[name]).IMPORTS["torch"]
    with hermetic_call(name="trust tests warm-up") as call:
        call.import_modules([name for name in names if importlib.util.find_spec(name.partition(".")[0])])


def listing(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def refused(argv: list[str], root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Run `rlrun.main(argv)`; assert exit 2, one stderr line, nothing new under `root`, a clean census and no
    marker file; return the line."""
    files = listing(root)
    capsys.readouterr()
    before = census.snapshot()
    code = rlrun.main(argv)
    leaks = census.compare(before, census.settle(before))
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), err
    assert listing(root) == files, "a refused call left files or folders behind"
    assert not leaks, leaks
    assert not list(root.rglob(MARKER)) and not Path(MARKER).exists()
    return lines[0]


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)  # a relative path a call creates lands here, and is seen
    return tmp_path


@pytest.mark.parametrize("case", list(CRAFTED))
def test_an_agent_config_file(case, workspace, capsys):
    data, says = CRAFTED[case]
    (workspace / "agent.yaml").write_bytes(data)
    argv = ["train", "--task", PENDULUM, "--library", "rsl_rl", "--log_root", str(workspace / "logs")]
    line = refused([*argv, "--agent_config", str(workspace / "agent.yaml")], workspace, capsys)
    assert says in line and str(workspace / "agent.yaml") in line


@pytest.mark.parametrize("command", ["bench", "tune"])
@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_spec_file(case, command, workspace, capsys):
    data, says = CRAFTED[case]
    (workspace / "spec.yaml").write_bytes(data)
    line = refused([command, str(workspace / "spec.yaml")], workspace, capsys)
    assert says in line and f"{command} spec {str(workspace / 'spec.yaml')!r}" in line


RUN_FILES = {
    **{f"agent.yaml {case}": ("agent.yaml", data, says) for case, (data, says) in CRAFTED.items()},
    **{f"env.yaml {case}": ("env.yaml", data, says) for case, (data, says) in CRAFTED.items()},
    "agent.yaml a list": ("agent.yaml", b"- algorithm\n- policy\n", "holds a list, not a mapping of keys"),
    "agent.yaml empty": ("agent.yaml", b"", "holds nothing, not a mapping of keys"),
    "env.yaml a number": ("env.yaml", b"3\n", "holds a number, not a mapping of keys"),
    "env.yaml unknown key": (
        "env.yaml",
        f"max_episode_steps: 200\ng: 10.0\n__class__: {MARKER}\n".encode(),
        "sets '__class__', which the task does not take",
    ),
    "env.yaml key typo": ("env.yaml", b"max_episode_step: 200\n", "Did you mean 'max_episode_steps'?"),
    "env.yaml value of the wrong type": ("env.yaml", b"max_episode_steps: [1, 2]\n", "'env.max_episode_steps"),
}
"""A run's `params/*.yaml` replaced by a crafted file: (file, bytes, what the one line says)."""

SURFACES = {
    "play": ["play", "--task", PENDULUM, "--library", "rsl_rl", "--checkpoint", "latest"],
    "export": ["export", "--task", PENDULUM, "--library", "rsl_rl", "--checkpoint", "latest"],
    "train --resume": ["train", "--task", PENDULUM, "--library", "rsl_rl", "--resume", "--max_iterations", "2"],
}


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("case", list(RUN_FILES))
def test_a_run_file(case, surface, trained, workspace, capsys):
    name, data, says = RUN_FILES[case]
    runs = workspace / "runs"
    shutil.copytree(trained, runs)
    (params,) = runs.glob(f"rsl_rl/*/*/params/{name}")
    params.write_bytes(data)
    line = refused([*SURFACES[surface], "--log_root", str(runs)], workspace, capsys)
    assert says in line and str(params) in line


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("case", "says"),
    [("nested deep", "is nested deeper than 64 levels"), ("huge", "is larger than 16 MiB")],
)
def test_a_run_json(case, says, trained, workspace, capsys):
    runs = workspace / "runs"
    shutil.copytree(trained, runs)
    (manifest,) = runs.glob("rsl_rl/*/*/run.json")
    if case == "huge":
        with manifest.open("r+b") as handle:
            handle.truncate(MAX_JSON_BYTES + 1)
    else:
        manifest.write_text(json.dumps({"library": "rsl_rl", "task": PENDULUM})[:-1] + f', "x": {DEEP}}}')
    line = refused([*SURFACES["play"], "--log_root", str(runs)], workspace, capsys)
    assert says in line and str(manifest.parent) in line


def test_a_results_file_too_large_for_a_report(workspace, capsys):
    out = workspace / "bench"
    out.mkdir()
    with (out / "results.jsonl").open("wb") as handle:
        handle.truncate((256 << 20) + 1)  # sparse
    line = refused(["report", str(out)], workspace, capsys)
    assert "is larger than 256 MiB" in line
