"""The README's snippets run as written: the Python ones in order, in a fresh interpreter (each builds on the ones
before, as a reader typing them into one session would); the `rlrun` command lines of its bash blocks in a fresh
folder (the long bench planned, not run)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def snippets() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_readme_has_python_snippets():
    assert len(snippets()) >= 3 and snippets()[0].startswith("import rlrun")


@pytest.mark.slow
def test_the_readmes_python_snippets_run_verbatim(tmp_path):
    pytest.importorskip("rsl_rl")
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("onnxruntime")
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(snippets())], cwd=tmp_path, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "logs").is_dir()


RLRUN = str(Path(sys.executable).with_name("rlrun"))


def commands() -> list[list[str]]:
    """The `rlrun ...` command lines of the README's bash blocks, split as the shell splits them (continuation
    lines joined, comments dropped); `pip install` lines are the reader's to run."""
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)
    lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
    return [words for words in (shlex.split(line, comments=True) for line in lines) if words[:1] == ["rlrun"]]


def test_the_readme_has_these_commands():
    assert [words[:2] for words in commands()] == [
        ["rlrun", "train"], ["rlrun", "play"], ["rlrun", "list"], ["rlrun", "bench"], ["rlrun", "report"]
    ]  # fmt: skip


def test_the_readmes_first_commands_run_verbatim_and_the_policy_learns(tmp_path):
    pytest.importorskip("rsl_rl")
    for words in commands()[:3]:
        done = subprocess.run([RLRUN, *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (words, done.stderr[-3000:])
        if words[1] == "play":
            returns = re.search(r"mean return ([-\d.]+)", done.stdout)
            assert returns is not None and float(returns.group(1)) >= 400.0, done.stdout  # solved: 500
        if words[1] == "list":
            assert "rsl_rl" in done.stdout
    assert (tmp_path / "logs" / "rsl_rl").is_dir()


def test_the_readmes_bench_command_plans_as_written_and_its_report_command_runs(tmp_path, monkeypatch):
    """The bench itself (40 cells of 200,000 env steps) is too long for a test: its command line is parsed and
    planned as `rlrun bench` plans it, every name and number checked; `rlrun report` runs verbatim on a bench of
    one cell written to the same folder."""
    pytest.importorskip("rsl_rl")
    pytest.importorskip("matplotlib")
    from rlrun.benching import SPEC_KEYS, BenchRequest
    from rlrun.benching.planning import plan_bench
    from rlrun.cli.parser import parse
    from rlrun.hermetic import hermetic_call

    bench, report = commands()[3:]
    args = parse(bench[1:])
    given = {key: value for key, value in vars(args).items() if key in SPEC_KEYS and value is not None}
    monkeypatch.chdir(tmp_path)
    with hermetic_call() as call:
        plan = plan_bench(call, BenchRequest(**given))
    assert {cell.request.library for cell in plan.cells} == {"rsl_rl", "skrl", "sb3", "rl_games"}
    assert len(plan.cells) + len(plan.skipped) == 2 * 4 * 5  # tasks x libraries x seeds, a pair that cannot run noted
    assert {cell.request.seed for cell in plan.cells} == {0, 1, 2, 3, 4}
    assert not (tmp_path / "bench").exists(), "planning makes no folder"
    small = [RLRUN, "bench", "--tasks", "rlrun/Pendulum-v1", "--libraries", "rsl_rl", "--seeds", "0"]
    done = subprocess.run(
        [*small, "--iterations", "2", "--num_envs", "4", "--out", "bench/classic", "--no_report"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([RLRUN, *report[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "bench" / "classic" / "report.md").is_file()
