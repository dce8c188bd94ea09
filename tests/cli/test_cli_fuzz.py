"""Property-based fuzzing of the command line with hostile values.

Command lines are built from the parser's own commands and flags (`rlrun.cli.build_parser()`: every
subcommand, every option string, every positional), each given a hostile value: negative, zero, huge,
non-numeric, unicode, empty, path-like (`../`), regex metacharacters, flag-like, override-like, or no value
at all; flags repeat, and trailing `agent.`/`env.` override words are added. Every command line must exit 0
or 2 (2: exactly one line, `rlrun: error: ...`, nothing new on disk), never print a traceback, and leave
the census clean.

Successful runs are kept tiny: each command starts from small settings that the generated flags may
override (`--max_iterations 1 --num_envs 2` for train, a one-iteration inline bench without report), the
flags whose valid values cost time (budgets, episode and step counts, `--num_envs`) get invalid values or
tiny valid ones only, and `--task` is mostly one of rlrun's native tasks. Every example runs in a fresh
folder that is also its working directory, with a copy of one tiny trained run (`runs`) and a file
(`afile`), so relative hostile paths land there.

The CI test runs 25 examples; `test_cli_fuzz_slow` (marked `slow`) runs 300 with the same generator.
Profiles, not environment variables, set the budgets.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import rlrun
from rlrun.cli import build_parser
from rlrun.hermetic import census
from support import SMALL_RSL_RL
from test_bad_inputs import is_noise, leaks_since, listing, warm_up

PENDULUM = "rlrun/Pendulum-v1"

settings.register_profile(
    "rlrun-cli-fuzz",
    max_examples=25,
    deadline=None,
    database=None,  # no example database in the working tree: a failure prints its reproduction blob instead
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("rlrun-cli-fuzz-slow", settings.get_profile("rlrun-cli-fuzz"), max_examples=300)

KNOWN_DEFECTS = (
    # (row of tests/test_bad_inputs.py where the defect is an xfail, a pattern its stderr matches).
    # A command line that exits 1 with one of these is accepted and counted (`event`); delete the entry
    # when the row's xfail is removed. Any other exit 1 fails the test.
)


# --- the parser's own commands, flags and positionals ------------------------------------------------------


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (subparsers,) = (action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return dict(subparsers.choices)


COMMANDS = _commands()


def _options(command: str) -> list[argparse.Action]:
    """Every flag of the command but `--help` (which ends the parse before anything is checked)."""
    return [
        action
        for action in COMMANDS[command]._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]


def _positionals(command: str) -> list[argparse.Action]:
    return [action for action in COMMANDS[command]._actions if not action.option_strings]


# --- hostile values ---------------------------------------------------------------------------------------

# fmt: off
TEXT = st.text(
    # any unicode but NUL, which no real command line can carry (see the report on `--log_root` with NUL)
    st.characters(codec="utf-8", exclude_characters="\x00"),
    max_size=12,
)
PATHS = st.sampled_from(
    ["", " ", ".", "..", "../", "../x", "../../y", "a/../../b", "./", "~", "afile", "afile/sub", "runs",
     "nested/dir", "x" * 300, "café/ü", "dir with space"]
)
REGEX = st.sampled_from(["[", "(", "*", ".*", "a|b", "\\", "^$", "(?P<", "+", "?", "{1,", "[a-z]+", "(a)(?(1)b|c"])
FLAG_LIKE = st.sampled_from(["-", "--", "-x", "--task", "--num_envs", "-1e3", "--=", "---"])
ODD_NUMBERS = st.sampled_from(  # not integers, or integers in spellings int() takes (Arabic-Indic 3, fullwidth 1)
    ["", " ", "abc", "1.5", "1e3", "1e309", "nan", "inf", "-inf", "0x10", "1_0", "\u0663", "\uff11", "+", "-0"]
)
INVALID_COUNTS = st.integers(max_value=0).map(str) | ODD_NUMBERS
ANY_INTEGER = st.integers(min_value=-(2**70), max_value=2**70).map(str)
HOSTILE = st.one_of(TEXT, PATHS, REGEX, FLAG_LIKE, ODD_NUMBERS, ANY_INTEGER)

TINY_VALID = {
    # flags whose large valid values make a run long: invalid values, or these small valid ones
    "num_envs": ["1", "2", "3"],
    "max_iterations": ["1"],
    "iterations": ["1"],
    "env_steps": ["1", "64"],
    "seconds": ["0.01", "1e-300"],
    "num_episodes": ["1", "2"],
    "max_steps": ["1", "7"],
    "video_length": ["1", "3"],
    "validation_steps": ["1", "2"],
    "eval_episodes": ["0", "1"],
}
VALID = {
    # a few valid (and case-variant) values for the other flags, so that some command lines get far
    "task": [PENDULUM, PENDULUM, PENDULUM, "rlrun/CartPoleContinuous-v1", "rlrun/pendulum-v1", "Pendulum-v1",
             "CartPol-v1", "LunarLander-v3", "HalfCheetah-v5", "rlrun/", "rlrun_test/Meddling-v0"],
    "tasks": [PENDULUM, f"{PENDULUM},{PENDULUM}", "rlrun/CartPole-v1", ",", "LunarLander-v3"],
    "runs": ["rsl_rl", "RSL_RL", "rsl_rl:ppo", "rsl_rl:PPO:torch", "sb4", "rsl_rl:ppo:jax", "rsl_rl,rsl_rl", ":"],
    "library": ["rsl_rl", "RSL_RL", "rsl-rl", "sb4", "skrll"],
    "algorithm": ["ppo", "PPO", "sac", "ppp"],
    "ml_framework": ["torch", "TORCH", "jax", "JAX", "tf"],
    "device": ["cpu", "CPU", "cuda", "cuda:0", "cuda:-1", "gpu", "mps"],
    "vectorization": ["sync", "async", "ASYNC", "threads"],
    "format": ["onnx", "torchscript", "both", "ONNX", "onxx"],
    "checkpoint": ["latest", "best", "LATEST", "model_0.pt", "afile", "runs"],
    "load_run": [".*", ".", "2", "nosuch"],
    "seeds": ["0", "1", "0,1", "1-0", "0-999999", "-1"],
    "executor": ["inline", "INLINE", "inlin", "process ", "threads"],
    "experiment": ["ok", "ok.name+1", "..", "a/b"],
    "run_name": ["ok", "ok.name+1", "..", "a/b"],
    "name": ["ok", "..", "a/b"],
    "what": ["tasks", "libraries", "all", "taks"],
    "seed": ["0", "-1", str(2**32 - 1), str(2**32)],
}
AGENT_KEYS = ["algorithm.learning_rate", "actor.hidden_dims", "num_steps_per_env", "seed", "num_envs",
              "max_iterations", "algorithm.gamma", "clip_param", "", ".", "..x", "a" * 80, "ü", "[0]"]
ENV_KEYS = ["max_episode_steps", "max_episode_step", "g", "", "x.y"]
OVERRIDE_VALUES = st.one_of(
    # no huge numbers (see `small`): a valid key with a huge count (agent.max_iterations=10**9) runs for long
    st.sampled_from(["", "abc", "[1,", "[]", "{a: 1}", "null", "~", "'", '"', "!!python/object:os.system", "-1", "0",
                     "1e-3", "true", "[16, 16]", "${oc.env:HOME}", "%", "=", "a=b"]),
    TEXT,
)
# fmt: on


def small(text: str) -> bool:
    """Whether `text` is not a number, or not a large positive one (a large budget or count makes a run long)."""
    try:
        number = float(text)
    except ValueError:
        return True
    return not math.isfinite(number) or number <= 10


def _values(action: argparse.Action) -> st.SearchStrategy[str]:
    """Hostile values for one flag or positional (plus a few valid ones, tiny where size costs time)."""
    dest = action.dest
    numeric = action.type in (int, float)
    if dest in TINY_VALID:
        return st.one_of(INVALID_COUNTS, st.sampled_from(TINY_VALID[dest]), TEXT, FLAG_LIKE).filter(small)
    strategies = [HOSTILE]
    if numeric:
        strategies += [ANY_INTEGER, ODD_NUMBERS]
    if dest in VALID:
        strategies.append(st.sampled_from(VALID[dest]))
    if dest in ("log_root", "out", "spec", "checkpoint"):
        strategies.append(PATHS)
    return st.one_of(strategies)


@st.composite
def _override(draw: st.DrawFn) -> str:
    scope = draw(st.sampled_from(["agent", "agent", "env", "env", "", "foo", "AGENT"]))
    key = draw(st.sampled_from(ENV_KEYS if scope == "env" else AGENT_KEYS) | TEXT.filter(lambda text: "=" not in text))
    value = draw(OVERRIDE_VALUES.filter(small))  # agent.num_steps_per_env=99999 would run for long
    return f"{scope}.{key}={value}" if scope else f"{key}={value}"


def _base(command: str, draw: st.DrawFn) -> list[str]:
    """Small settings each command starts from; the generated flags come after them and win."""
    task = draw(st.sampled_from(VALID["task"][:5]))
    if command == "train":
        return ["--task", task, "--log_root", "logs", "--max_iterations", "1", "--num_envs", "2"]
    if command in ("play", "export"):
        return ["--task", task, "--log_root", "runs"]
    if command in ("zero", "random"):
        return ["--task", task, "--log_root", "logs"]
    if command == "bench":
        bench = ["--tasks", PENDULUM, "--libraries", "rsl_rl", "--iterations", "1", "--num_envs", "2"]
        return [*bench, "--no_report", "--out", "bench"]
    return []


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    items: list[list[str]] = []
    options = _options(command)
    for _ in range(draw(st.integers(min_value=0, max_value=6)) if options else 0):
        action = draw(st.sampled_from(options))
        flag = draw(st.sampled_from(action.option_strings))
        shape = draw(st.sampled_from(["value"] * 8 + ["no value", "extra word"]))
        if action.nargs == 0:  # a switch; "extra word": given a value anyway
            items.append([flag, draw(HOSTILE)] if shape == "extra word" else [flag])
        elif shape == "no value":
            items.append([flag])
        else:
            items.append([flag, draw(_values(action))])
    for action in _positionals(command):
        if draw(st.booleans()):
            items.append([draw(_values(action))])
    if command not in ("report", "list") or draw(st.booleans()):
        items += [[word] for word in draw(st.lists(_override(), max_size=2))]
    if items and draw(st.booleans()):
        items.append(list(draw(st.sampled_from(items))))  # a duplicated flag (the last one wins)
    items = draw(st.permutations(items))
    return [command, *_base(command, draw), *(word for item in items for word in item)]


# --- the property -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory) -> Iterator[tuple[Path, Path]]:
    """A folder for the examples, and a log root with one tiny RSL-RL run of the pendulum (for play, export,
    --resume); everything a generated call may import is imported first (import effects are not a call's).
    No display and no MUJOCO_GL, as in CI: MuJoCo video is refused, never attempted."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MUJOCO_GL", raising=False)
        patch.delenv("DISPLAY", raising=False)
        yield _home(tmp_path_factory.mktemp("cli_fuzz"))


def _home(home: Path) -> tuple[Path, Path]:
    runs = home / "trained"
    rlrun.train(
        rlrun.TrainRequest(task=PENDULUM, num_envs=2, max_iterations=1, log_root=str(runs), overrides=SMALL_RSL_RL)
    )
    warm_up()
    return home, runs


def _known_defect(err: str) -> str | None:
    return next((row for row, pattern in KNOWN_DEFECTS if re.search(pattern, err)), None)


def check_command_line(home: Path, runs: Path, argv: list[str]) -> None:
    example = Path(tempfile.mkdtemp(dir=home, prefix="example-"))
    cwd = example / "work" / "deeper" / "still"  # `../../y` and `a/../../b` stay inside the example
    cwd.mkdir(parents=True)
    shutil.copytree(runs, cwd / "runs")
    (cwd / "afile").write_text("a file, not a folder\n")
    files = listing(example)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        before = census.snapshot()
        code = rlrun.main(argv)
        leaks = leaks_since(before)
    stderr = err.getvalue()
    note(f"exit {code}; stderr:\n{stderr[-3000:]}")
    event(f"exit {code}")

    if code == 1 and (defect := _known_defect(stderr)):
        event(f"known defect: {defect}")
        return
    if code == 1 and is_noise(stderr):  # onnxruntime's telemetry fell inside the call (test_bad_inputs.TRANSIENT)
        event("onnxruntime telemetry noise")
        return
    assert not leaks, leaks
    assert code in (0, 2), f"exit {code}: {stderr[-3000:]}"
    assert "Traceback" not in stderr, stderr
    if code == 2:
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("rlrun: error: "), stderr
        assert listing(example) == files, "a rejected command line left files or folders behind"
    shutil.rmtree(example)


@settings(settings.get_profile("rlrun-cli-fuzz"))
@given(argv=command_lines())
def test_cli_fuzz(fuzz_home, argv):
    check_command_line(*fuzz_home, argv)


@pytest.mark.slow
@settings(settings.get_profile("rlrun-cli-fuzz-slow"))
@given(argv=command_lines())
def test_cli_fuzz_slow(fuzz_home, argv):
    check_command_line(*fuzz_home, argv)
