"""More than a hundred bad inputs, command line and API, as one table.

Every row must be refused the same way: `rlrun.main` returns 2 and prints exactly one stderr line starting
`rlrun: error: ` (the API raises a `UserError` subclass with a one-line message and prints nothing), no
traceback, nothing new under `tmp_path` (every row's `--log_root` / `--out` / files live there, and the
working directory is `tmp_path` too), and a clean census: the leak detector is on for the whole suite, and
the row also compares `rlrun.hermetic.census` snapshots taken around the call, since a user error only
gets the detector's findings attached as a note, which the command line does not print.

Rows that do not behave yet are kept in the table as strict xfails naming what they do instead; remove the
mark when the defect is fixed. Case variants (`--algorithm PPO`, `--ml_framework TORCH`) are not bad inputs:
`test_case_variants_are_accepted` checks that they work.

Words in a row's argv may name the workspace each row gets (`workspace`): `{tmp}` (tmp_path), `{logs}` (a
log root that does not exist), `{runs}` (a copy of a log root with one tiny RSL-RL and one tiny SB3 run of
`rlrun/Pendulum-v1`), `{rsl_rl}` and `{sb3}` (those runs' checkpoints).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib.util
import random
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import rlrun
from rlrun.errors import UnknownField, UserError
from rlrun.hermetic import census, hermetic_call
from support import SMALL_RSL_RL

pytest.importorskip("rsl_rl")
pytest.importorskip("stable_baselines3")
pytest.importorskip("rl_games")
pytest.importorskip("skrl")  # the libraries its cases train with

PENDULUM = "rlrun/Pendulum-v1"
CARTPOLE_CONTINUOUS = "rlrun/CartPoleContinuous-v1"
SMALL_SB3 = ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")
LONG_NAME = "x" * 300
ERROR_PREFIX = "rlrun: error: "

SPECS = {  # bench spec files written into every workspace
    "spec_unknown_key.yaml": f"tasks: [{PENDULUM}]\nruns: [rsl_rl]\niterations: 1\nbogus: 1\n",
    "spec_list.yaml": "- tasks\n- runs\n",
    "spec_empty.yaml": "",
    "spec_broken.yaml": "tasks: [a\nruns: {{\n",
    "spec_run_key.yaml": f"tasks: [{PENDULUM}]\nruns: [{{library: rsl_rl, algo: ppo}}]\niterations: 1\n",
    "spec_run_no_library.yaml": f"tasks: [{PENDULUM}]\nruns: [{{algorithm: ppo}}]\niterations: 1\n",
    "spec_tasks_number.yaml": "tasks: 3\nruns: [rsl_rl]\niterations: 1\n",
    "spec_seeds_mapping.yaml": f"tasks: [{PENDULUM}]\nruns: [rsl_rl]\niterations: 1\nseeds: {{a: 1}}\n",
    # tune specs: rlrun/CartPole-v1 with sb3, one searched key unless the row is about the space
    **{
        f"tune_{name}.yaml": f"task: rlrun/CartPole-v1\nlibrary: sb3\niterations: 1\n{body}\n"
        for name, body in {
            "unknown_key": "search_space: {agent.learning_rate: 'loguniform(1e-5, 1e-2)'}\nn_trial: 3",
            "config_key": "search_space: {agent.lr: 'loguniform(1e-5, 1e-2)'}",
            "env_key": "search_space: {env.bogus: 'uniform(0, 1)'}",
            "distribution": "search_space: {agent.learning_rate: 'lognormal(1e-5, 1e-2)'}",
            "reversed": "search_space: {agent.gamma: 'uniform(0.99, 0.9)'}",
            "log_zero": "search_space: {agent.learning_rate: 'loguniform(0, 1e-2)'}",
            "int_float": "search_space: {agent.n_epochs: 'int(1.5, 4)'}",
            "choice_type": 'search_space: {agent.n_epochs: \'choice(["a", "b"])\'}',
            "empty_space": "search_space: {}",
            "not_literal": "search_space: {agent.gamma: 'uniform(a, b)'}",
            "enqueue_outside": "search_space: {agent.gamma: 'uniform(0.9, 0.99)'}\nenqueue: [{agent.gamma: 2.0}]",
            "enqueue_unsearched": "search_space: {agent.gamma: 'uniform(0.9, 0.99)'}\nenqueue: [{agent.n_epochs: 3}]",
            "ok": "search_space: {agent.gamma: 'uniform(0.9, 0.99)'}",
            # a spec reaches beyond its folder ({tmp}) or this machine only with the person's word
            "out_outside": "search_space: {agent.gamma: 'uniform(0.9, 0.99)'}\nout: ../tune_elsewhere",
            "storage_outside": "search_space: {agent.gamma: 'uniform(0.9, 0.99)'}\nstorage: sqlite:///../study.db",
            "storage_server": "search_space: {agent.gamma: 'uniform(0.9, 0.99)'}\nstorage: postgresql://u@db.test/s",
            "address": "search_space: {agent.gamma: 'uniform(0.9, 0.99)'}\nexecutor: ray\naddress: 10.0.0.1:6379",
        }.items()
    },
    "tune_module_task.yaml": "task: 'os:Evil-v0'\nlibrary: sb3\niterations: 1\n"
    "search_space: {agent.gamma: 'uniform(0, 1)'}\n",
    # files past a limit of rlrun.trust.limits
    "spec_alias_bomb.yaml": "".join(
        f"l{level}: &l{level} [{', '.join([f'*l{level - 1}' if level else 'lol'] * 9)}]\n" for level in range(9)
    ),
    "spec_deep.yaml": f"tasks: [{PENDULUM}]\nruns: [rsl_rl]\niterations: 1\nseeds: {'[' * 200}{']' * 200}\n",
    "spec_tag.yaml": "tasks: !!python/object/apply:os.system ['touch marker']\nruns: [rsl_rl]\n",
    "spec_not_utf8.yaml": b"tasks: [caf\xe9]\n",
    # a spec that reaches beyond its folder ({tmp}) or this machine
    "spec_suite_typo.yaml": "suite: clasic\nruns: [sb3]\n",
    "spec_out_outside.yaml": f"tasks: [{PENDULUM}]\nruns: [rsl_rl]\niterations: 1\nout: ../bench_elsewhere\n",
    "spec_log_root_outside.yaml": f"tasks: [{PENDULUM}]\nruns: [rsl_rl]\niterations: 1\nlog_root: /tmp/../elsewhere\n",
    "spec_address.yaml": f"tasks: [{PENDULUM}]\nruns: [rsl_rl]\niterations: 1\nexecutor: ray\naddress: ray://10.0.0.1:10001\n",
    "spec_module_task.yaml": "tasks: ['os:Evil-v0']\nruns: [rsl_rl]\niterations: 1\n",
}
AGENT_CONFIGS = {  # --agent_config files written into every workspace
    "agent_broken.yaml": "n_steps: [8,\nbatch_size: {\n",
    "agent_list.yaml": "- n_steps\n- 8\n",
    "agent_negative_lr.yaml": "learning_rate: -0.001\n",
    "agent_no_params.yaml": "config:\n  horizon_length: 8\n",
    "agent_alias_bomb.yaml": "".join(
        f"l{level}: &l{level} [{', '.join([f'*l{level - 1}' if level else 'lol'] * 9)}]\n" for level in range(9)
    ),
    "agent_deep.yaml": "policy_kwargs: " + "{a: " * 100 + "1" + "}" * 100 + "\n",
    "agent_tag.yaml": "learning_rate: !!python/object/apply:os.system ['touch marker']\n",
    "agent_local_tag.yaml": "learning_rate: !custom 3\n",
    "agent_not_utf8.yaml": b"learning_rate: \xff\n",
}


# --- the workspace every row runs in ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Trained:
    """A log root with one tiny run per library the table needs, and their checkpoints (relative to it)."""

    root: Path
    checkpoints: dict[str, Path]


@dataclasses.dataclass(frozen=True)
class Workspace:
    """What a row may point at, all under `tmp`."""

    tmp: Path
    logs: Path
    runs: Path
    checkpoints: dict[str, Path]

    def word(self, text: str) -> str:
        for name, path in (
            ("{logs}", self.logs),
            ("{runs}", self.runs),
            ("{tmp}", self.tmp),
            *((f"{{{library}}}", path) for library, path in self.checkpoints.items()),
        ):
            text = text.replace(name, str(path))
        return text


def warm_up() -> None:
    """Import, once, everything a row's call may import, through a call's import phase.

    Import effects (SKRL's logger, rl_games' print options, onnxruntime's files, Ray's sys.path entry) belong
    to the import, not to a call (see `rlrun.hermetic.scope`), and the calls re-baseline their own detector
    after importing; the table's census snapshot is taken before the call, so it needs them done already.
    """
    from rlrun.api import imports
    from rlrun.libraries import LIBRARIES, load_adapter
    from rlrun.reports import HEAVY_MODULES
    from rlrun.reports.tune import HEAVY_MODULES as TUNE_HEAVY_MODULES

    names = [*imports.CORE_IMPORTS, *imports.VIDEO_IMPORTS, *imports.EXPORT_IMPORTS, *HEAVY_MODULES]
    names += ["onnxruntime", "ray", "rlrun.executors", "sqlalchemy.engine", "sqlalchemy.exc", "rlrun.tuning.worker"]
    names += ["ale_py"]  # registers Gymnasium's Atari ids: an Atari row's call imports it
    names += list(TUNE_HEAVY_MODULES) if imports.has("optuna") else []
    for library in LIBRARIES.values():
        if library.installed:
            names += load_adapter(library).IMPORTS["torch"]
    with hermetic_call(name="bad inputs warm-up") as call:
        call.import_modules([name for name in names if imports.has(name.partition(".")[0])])


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    root = tmp_path_factory.mktemp("bad_inputs") / "runs"
    checkpoints = {}
    for library, overrides in (("rsl_rl", SMALL_RSL_RL), ("sb3", SMALL_SB3)):
        request = rlrun.TrainRequest(
            task=PENDULUM, library=library, num_envs=2, max_iterations=1, log_root=str(root), overrides=overrides
        )
        checkpoint = rlrun.train(request).checkpoint
        assert checkpoint is not None
        checkpoints[library] = checkpoint.relative_to(root)
    warm_up()
    return Trained(root, checkpoints)


@pytest.fixture
def workspace(tmp_path, trained, monkeypatch) -> Workspace:
    monkeypatch.chdir(tmp_path)  # a relative path a row creates would land here and be seen
    monkeypatch.delenv("MUJOCO_GL", raising=False)  # MuJoCo video must be refused for want of a GL backend
    monkeypatch.delenv("DISPLAY", raising=False)
    runs = tmp_path / "runs"
    shutil.copytree(trained.root, runs)
    rsl_rl = runs / trained.checkpoints["rsl_rl"]
    sb3 = runs / trained.checkpoints["sb3"]
    data = rsl_rl.read_bytes()
    (tmp_path / "afile").write_text("a file, not a folder\n")
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "random.pt").write_bytes(random.Random(10).randbytes(4096))
    (tmp_path / "truncated.pt").write_bytes(data[: len(data) // 2])
    torch.save({"weights": torch.zeros(3)}, tmp_path / "not_a_checkpoint.pt")
    shutil.copy(rsl_rl, tmp_path / "rsl_rl_alone.pt")  # no run.json beside them: only the format tells
    shutil.copy(sb3, tmp_path / "sb3_alone.zip")
    for name, text in {**SPECS, **AGENT_CONFIGS}.items():
        (tmp_path / name).write_bytes(text) if isinstance(text, bytes) else (tmp_path / name).write_text(text)
    return Workspace(tmp=tmp_path, logs=tmp_path / "logs", runs=runs, checkpoints={"rsl_rl": rsl_rl, "sb3": sb3})


def listing(root: Path) -> list[str]:
    """Every file and folder under `root`, recursively."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


# --- a census that background noise does not fool ------------------------------------------------------------

FILES = "open file descriptors"
TRANSIENT = ("anon_inode:[eventfd]", "socket:[")
"""Descriptors that onnxruntime's telemetry uploader (1.29 and later, on Linux) opens and closes within a
fraction of a second, every few seconds, on its own native threads once onnxruntime is imported, whatever the
process does (the suite imports it: tests/api/test_exporting.py). A census that catches one blames the call."""


_ENTRY = r"\(\d+, '(?:anon_inode:\[eventfd\]|socket:\[\d+\])'\)"
_CUT = r"(?:\(\d*(?:, '?(?:[as][^\n\]]*)?)?)?\.\.\."  # an entry the report cut short, if it may be one of them
_LIST = rf"\[(?:{_ENTRY}(?:, {_ENTRY})*\]|(?:{_ENTRY}, )*{_CUT})"
_REPORT = re.compile(
    rf"open file descriptors was modified by the call: (?:added|removed) {_LIST}(?:, removed {_LIST})?"
)


def is_noise(stderr: str) -> bool:
    """Whether rlrun's own leak detector (exit 1) reported that noise alone: one report, of such descriptors."""
    reports = [line for line in stderr.splitlines() if " was modified by the call: " in line]
    return (
        "rlrun: the call left global state changed:" in stderr
        and len(reports) == 1
        and bool(_REPORT.fullmatch(reports[0].strip()))
    )


def main_through_noise(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`rlrun.main(argv)` and its stderr, run once more if the leak detector reported only that noise."""
    code = rlrun.main(argv)
    err = capsys.readouterr().err
    if code == 1 and is_noise(err):
        code = rlrun.main(argv)
        err = capsys.readouterr().err
    return code, err


def leaks_since(before: census.Snapshot, timeout: float = 3.0) -> list[str]:
    """`census.compare(before, now)`, except for that noise: a difference made only of descriptors of those
    kinds is waited out while some are new (one a call leaks stays open, and is reported), and ignored when
    all it has left are ones that were open before and have closed."""
    after = census.settle(before)
    deadline = time.monotonic() + timeout
    while _transient_only(before, after) and _added(before, after) and time.monotonic() < deadline:
        time.sleep(0.02)
        after = census.snapshot()
    if _transient_only(before, after) and not _added(before, after):
        return []
    return census.compare(before, after)


def _added(before: census.Snapshot, after: census.Snapshot) -> set[tuple[int, str]]:
    return set(after.get(FILES, ())) - set(before.get(FILES, ()))


def _transient_only(before: census.Snapshot, after: census.Snapshot) -> bool:
    changed = {name for name in before if name in after and before[name] != after[name]}
    difference = set(before.get(FILES, ())) ^ set(after.get(FILES, ()))
    return changed == {FILES} and all(target.startswith(TRANSIENT) for _, target in difference)


@contextlib.contextmanager
def another_call_running(space: Workspace) -> Iterator[None]:
    """A call held open in another thread (it waits on an Event) for the row's duration."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with hermetic_call(name="the other thread's call"):
            entered.set()
            release.wait(60)

    thread = threading.Thread(target=hold, name="rlrun-bad-inputs-holder")
    thread.start()
    try:
        assert entered.wait(60), "the other thread's call did not start"
        yield
    finally:
        release.set()
        thread.join(60)


@contextlib.contextmanager
def without_ale_py(space: Workspace) -> Iterator[None]:
    """Around a row: ale-py (Gymnasium's Atari ids) looks uninstalled to the suite planner."""
    from rlrun.benching import suites

    installed = suites.installed
    suites.installed = lambda module: module != "ale_py" and installed(module)
    try:
        yield
    finally:
        suites.installed = installed


@contextlib.contextmanager
def without_envpool(space: Workspace) -> Iterator[None]:
    """Around a row: EnvPool looks uninstalled (what `--vectorization envpool` looks for)."""
    from rlrun.envs import envpool

    installed = envpool.envpool_installed
    envpool.envpool_installed = lambda: False
    try:
        yield
    finally:
        envpool.envpool_installed = installed


def tampered(name: str, text: str) -> Callable[[Workspace], contextlib.AbstractContextManager[None]]:
    """Around a row: the file `name` of the tiny RSL-RL run (`params/agent.yaml`, `run.json`, ...) holds `text`."""

    @contextlib.contextmanager
    def around(space: Workspace) -> Iterator[None]:
        (space.checkpoints["rsl_rl"].parent / name).write_text(text, encoding="utf-8")
        yield

    return around


# --- the table ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    argv: tuple[str, ...] = ()
    """A command line (`rlrun.main`), with workspace names (`{logs}`, ...)."""
    api: Callable[[Workspace], Any] | None = None
    """Or an API call, which must raise `error`."""
    error: type[UserError] = UserError
    around: Callable[[Workspace], contextlib.AbstractContextManager[None]] | None = None


def cli(case_id: str, *argv: str, xfail: str = "", around: Any = None, marks: tuple[Any, ...] = ()) -> Any:
    marks = (*marks, *([pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []))
    return pytest.param(Case(argv=argv, around=around), id=case_id, marks=marks)


def api(
    case_id: str, call: Callable[[Workspace], Any], error: type[UserError] = UserError, xfail: str = "", around=None
) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(Case(api=call, error=error, around=around), id=case_id, marks=marks)


def untyped(value: Any) -> Any:
    """A value of the wrong type, passed on as the API's caller would (the table's point is the mistake)."""
    return value


def build(request: Any, **fields: Any) -> Any:
    """Build a request with fields it may not have."""
    return request(**fields)


def train(*words: str) -> tuple[str, ...]:
    return ("train", "--task", PENDULUM, "--log_root", "{logs}", *words)


def tiny(*words: str) -> tuple[str, ...]:
    """A training that is over in a moment, should the row's mistake be accepted."""
    return train("--max_iterations", "1", "--num_envs", "2", *words)


def resume(*words: str) -> tuple[str, ...]:
    return ("train", "--task", PENDULUM, "--log_root", "{runs}", "--resume", *words)


def play(*words: str) -> tuple[str, ...]:
    return ("play", "--task", PENDULUM, "--log_root", "{runs}", *words)


def export(*words: str) -> tuple[str, ...]:
    return ("export", "--task", PENDULUM, "--log_root", "{runs}", *words)


def agent(kind: str, *words: str, task: str = PENDULUM) -> tuple[str, ...]:
    return (kind, "--task", task, "--log_root", "{logs}", *words)


def bench(*words: str, budget: tuple[str, ...] = ("--iterations", "1")) -> tuple[str, ...]:
    return ("bench", "--tasks", PENDULUM, "--libraries", "rsl_rl", "--out", "{tmp}/bench", *budget, *words)


no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here, so --device cuda is valid")

LONG_PATH = "{tmp}/" + LONG_NAME

ROWS = [
    # -- the command itself
    cli("no command"),
    cli("command typo trian", "trian", "--task", PENDULUM),
    cli("train without --task", "train", "--log_root", "{logs}"),
    cli("play without --task", "play", "--log_root", "{runs}"),
    cli("zero without --task", "zero", "--log_root", "{logs}"),
    cli("report without folder", "report"),
    cli("bench without spec or flags", "bench", "--out", "{tmp}/bench"),
    cli("list unknown topic", "list", "taks"),
    cli("list with an override", "list", "tasks", "agent.x=1"),
    cli("list unknown flag typo", "list", "--gymnasum"),
    cli("list --json", "list", "--json"),
    # -- train: numbers
    cli("train --num_envs negative", *train("--num_envs", "-4")),
    cli("train --num_envs zero", *train("--num_envs", "0")),
    cli("train --num_envs huge", *train("--num_envs", "99999999999")),
    cli("train --num_envs just over the cap", *train("--num_envs", str(2**20 + 1))),
    cli("train --num_envs non-numeric", *train("--num_envs", "many")),
    cli("train --num_envs float", *train("--num_envs", "1.5")),
    cli("train --num_envs empty", *train("--num_envs", "")),
    cli("train --num_envs without value", *train("--num_envs")),
    cli("train --max_iterations zero", *train("--max_iterations", "0")),
    cli("train --max_iterations negative", *train("--max_iterations", "-1")),
    cli("train --max_iterations scientific", *train("--max_iterations", "1e3")),
    cli("train --seed negative", *train("--seed", "-2")),
    cli("train --seed huge", *train("--seed", str(2**32))),
    cli("train --seed non-numeric", *train("--seed", "x")),
    cli("train --video_length zero", *train("--video", "--video_length", "0")),
    cli("train --video_interval zero", *train("--video", "--video_interval", "0")),
    cli("train --video_interval negative", *train("--video", "--video_interval", "-5")),
    cli("train agent.num_envs zero", *train("agent.num_envs=0")),
    cli("train agent.num_envs non-numeric", *train("agent.num_envs=abc")),
    cli("train agent.seed non-numeric", *train("agent.seed=abc")),
    cli(
        "train agent.seed negative",
        *train("agent.seed=-2"),
    ),
    cli(
        "train agent.max_iterations zero",
        *train("agent.max_iterations=0"),
    ),
    # -- train: override values a library rejects (each row is short should it be accepted)
    cli("train rsl_rl gamma not a number", *tiny("agent.algorithm.gamma=abc")),
    cli("train sb3 learning rate negative", *tiny("--library", "sb3", "agent.learning_rate=-1")),
    cli("train sb3 net_arch not a list", *tiny("--library", "sb3", "agent.policy_kwargs.net_arch=abc")),
    cli("train skrl learning rate negative", *tiny("--library", "skrl", "agent.agent.learning_rate=-1")),
    cli(
        "train rl_games learning rate negative", *tiny("--library", "rl_games", "agent.params.config.learning_rate=-1")
    ),
    cli(
        "train rsl_rl rollout length zero",
        *tiny("agent.num_steps_per_env=0"),
    ),
    cli(
        "train rsl_rl learning epochs zero",
        *tiny(*SMALL_RSL_RL, "agent.algorithm.num_learning_epochs=0"),
    ),
    cli(
        "train sb3 rollout length zero",
        *tiny("--library", "sb3", "agent.n_steps=0"),
    ),
    cli(
        "train skrl rollout length zero",
        *tiny("--library", "skrl", "agent.agent.rollouts=0"),
    ),
    cli(
        "train rl_games rollout length zero",
        *tiny("--library", "rl_games", "agent.params.config.horizon_length=0"),
    ),
    # -- train: --agent_config files (a value the library rejects, each short should it be accepted)
    cli("train --agent_config missing file", *tiny("--library", "sb3", "--agent_config", "{tmp}/nope.yaml")),
    cli("train --agent_config not YAML", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_broken.yaml")),
    cli("train --agent_config not a mapping", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_list.yaml")),
    cli("train --agent_config bad value", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_negative_lr.yaml")),
    cli(
        "train --agent_config no params", *tiny("--library", "rl_games", "--agent_config", "{tmp}/agent_no_params.yaml")
    ),
    cli("train --agent_config a folder", *tiny("--library", "sb3", "--agent_config", "{tmp}")),
    cli("train --agent_config alias bomb", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_alias_bomb.yaml")),
    cli("train --agent_config nested deep", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_deep.yaml")),
    cli("train --agent_config python tag", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_tag.yaml")),
    cli("train --agent_config local tag", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_local_tag.yaml")),
    cli("train --agent_config not UTF-8", *tiny("--library", "sb3", "--agent_config", "{tmp}/agent_not_utf8.yaml")),
    # -- train: names and choices
    cli("train --task typo", "train", "--task", "CartPol-v1", "--log_root", "{logs}"),
    cli("train --task native typo", "train", "--task", "rlrun/Pendulm-v1", "--log_root", "{logs}"),
    cli("train --task empty", "train", "--task", "", "--log_root", "{logs}"),
    cli("train --task without value", "train", "--log_root", "{logs}", "--task"),
    cli("train --task missing dependency", "train", "--task", "LunarLander-v3", "--log_root", "{logs}"),
    cli(
        "train --task discrete for rsl_rl",
        "train",
        "--task",
        "rlrun/CartPole-v1",
        "--library",
        "rsl_rl",
        "--log_root",
        "{logs}",
    ),
    cli("train --library typo", *train("--library", "sb4")),
    cli("train --rl_library typo", *train("--rl_library", "skrll")),
    cli("train --library empty", *train("--library", "")),
    cli("train --algorithm typo", *train("--algorithm", "ppp")),
    cli("train --algorithm of another library", *train("--algorithm", "sac")),
    cli("train sb3 --algorithm typo", *train("--library", "sb3", "--algorithm", "pp0")),
    cli("train --ml_framework jax for rsl_rl", *train("--ml_framework", "jax")),
    cli("train --ml_framework typo", *train("--library", "skrl", "--ml_framework", "torhc")),
    cli("train --ml_framework unknown", *train("--ml_framework", "tensorflow")),
    cli("train --vectorization unknown", *train("--vectorization", "threads")),
    cli("train --vectorization typo", *train("--vectorization", "synch")),
    cli("train --device gpu", *train("--device", "gpu")),
    cli("train --device cuda without CUDA", *train("--device", "cuda"), marks=(no_cuda,)),
    cli("train --device cuda index out of range", *train("--device", "cuda:4096")),
    cli("train --device empty", *train("--device", "")),
    cli("train --experiment_name with slash", *train("--experiment_name", "a/b")),
    cli("train --experiment_name dotdot", *train("--experiment_name", "..")),
    cli("train --experiment_name empty", *train("--experiment_name", "")),
    cli(
        "train --experiment_name 300 chars",
        *train("--experiment_name", LONG_NAME),
    ),
    cli("train --run_name with slash", *train("--run_name", "a/b")),
    cli("train --run_name dotdot", *train("--run_name", "..")),
    cli("train --run_name parent path", *train("--run_name", "../x")),
    cli("train --run_name empty", *train("--run_name", "")),
    cli(
        "train --run_name 300 chars",
        *train("--run_name", LONG_NAME),
    ),
    cli(
        "train --log_root is a file",
        "train",
        "--task",
        PENDULUM,
        "--log_root",
        "{tmp}/afile",
    ),
    cli(
        "train --log_root with a NUL byte",
        "train",
        "--task",
        PENDULUM,
        "--log_root",
        "{logs}\x00x",
    ),
    cli("train unknown flag typo", *train("--num_env", "3")),
    cli("train unknown flag", *train("--foo")),
    cli("train switch given a value", *train("--deterministic", "yes")),
    cli("train export flag", *train("--format", "onnx")),
    # -- train: resuming
    cli("train --checkpoint without --resume", *train("--checkpoint", "latest")),
    cli("train --load_run without --resume", *train("--load_run", "x")),
    cli("train --resume with nothing to resume", *train("--resume")),
    cli("train --resume --load_run invalid regex", *resume("--load_run", "[")),
    cli("train --resume --load_run no such run", *resume("--load_run", "nosuch")),
    cli("train --resume --checkpoint missing file", *resume("--checkpoint", "{tmp}/gone.pt")),
    cli("train --resume --checkpoint a directory", *resume("--checkpoint", "{tmp}")),
    cli("train --resume --checkpoint empty file", *resume("--checkpoint", "{tmp}/empty.pt")),
    cli("train --resume --checkpoint random bytes", *resume("--checkpoint", "{tmp}/random.pt")),
    cli("train --resume --checkpoint of another library", *resume("--checkpoint", "{tmp}/sb3_alone.zip")),
    cli(
        "train --resume --checkpoint in another library's run", *resume("--library", "sb3", "--checkpoint", "{rsl_rl}")
    ),
    # -- train: overrides
    cli("train override unknown key", *train("agent.algorithm.learning_rat=1")),
    cli("train override unknown env key", *train("env.max_episode_step=5")),
    cli("train override without scope", *train("learning_rate=1")),
    cli("train override unknown scope", *train("foo.bar=1")),
    cli("train override agent. without key", *train("agent.=1")),
    cli("train override env. without key", *train("env.=1")),
    cli("train override without key", *train("=1")),
    cli("train override without =", *train("agent.x")),
    cli("train override empty path segment", *train("agent..x=1")),
    cli("train override wrong type", *train("env.max_episode_steps=abc")),
    cli(
        "train env.kernel not a mode",
        "train",
        "--task",
        CARTPOLE_CONTINUOUS,
        "--log_root",
        "{logs}",
        "env.kernel=compile",
    ),
    cli(
        "train override list for a number",
        *train("agent.actor.hidden_dims=abc"),
    ),
    cli(
        "train override negative learning rate",
        *train("agent.algorithm.learning_rate=-1"),
    ),
    cli(
        "train override unparsable YAML list",
        *train("agent.actor.hidden_dims=[16,"),
    ),
    cli(
        "train overrides that set a key inside a list another one set",
        *train("agent.algorithm.gamma=[2]", "agent.algorithm.gamma.a=1"),
    ),
    # -- play
    cli("play nothing trained", "play", "--task", PENDULUM, "--log_root", "{logs}"),
    cli(
        "play --checkpoint best nothing trained",
        "play",
        "--task",
        PENDULUM,
        "--log_root",
        "{logs}",
        "--checkpoint",
        "best",
    ),
    cli("play --log_root is a file", "play", "--task", PENDULUM, "--log_root", "{tmp}/afile"),
    cli("play --checkpoint missing file", *play("--checkpoint", "{tmp}/gone.pt")),
    cli("play --checkpoint a directory", *play("--checkpoint", "{tmp}")),
    cli("play --checkpoint empty file", *play("--checkpoint", "{tmp}/empty.pt")),
    cli("play --checkpoint random bytes", *play("--checkpoint", "{tmp}/random.pt")),
    cli("play --checkpoint truncated", *play("--checkpoint", "{tmp}/truncated.pt")),
    cli("play --checkpoint not a checkpoint", *play("--checkpoint", "{tmp}/not_a_checkpoint.pt")),
    cli("play rsl_rl checkpoint as sb3", *play("--library", "sb3", "--checkpoint", "{tmp}/rsl_rl_alone.pt")),
    cli("play rsl_rl checkpoint as skrl", *play("--library", "skrl", "--checkpoint", "{tmp}/rsl_rl_alone.pt")),
    cli("play rsl_rl checkpoint as rl_games", *play("--library", "rl_games", "--checkpoint", "{tmp}/rsl_rl_alone.pt")),
    cli("play sb3 checkpoint as rsl_rl", *play("--library", "rsl_rl", "--checkpoint", "{tmp}/sb3_alone.zip")),
    cli(
        "play checkpoint of another task",
        "play",
        "--task",
        CARTPOLE_CONTINUOUS,
        "--log_root",
        "{runs}",
        "--checkpoint",
        "{rsl_rl}",
    ),
    cli(
        "play discrete task for rsl_rl",
        "play",
        "--task",
        "rlrun/CartPole-v1",
        "--library",
        "rsl_rl",
        "--log_root",
        "{runs}",
    ),
    cli("play --load_run invalid regex", *play("--load_run", "(")),
    cli("play --load_run no such run", *play("--load_run", "nosuch")),
    cli("play --num_episodes zero", *play("--num_episodes", "0")),
    cli("play --num_episodes negative", *play("--num_episodes", "-3")),
    cli("play --num_episodes non-numeric", *play("--num_episodes", "ten")),
    cli("play --max_steps zero", *play("--max_steps", "0")),
    cli("play --num_envs zero", *play("--num_envs", "0")),
    cli("play --seed negative", *play("--seed", "-7")),
    cli("play --algorithm not of the library", *play("--algorithm", "sac")),
    cli("play --ml_framework jax for rsl_rl", *play("--ml_framework", "jax")),
    cli("play --stochastic given a value", *play("--stochastic", "yes")),
    cli("play --video MuJoCo without MUJOCO_GL", "play", "--task", "HalfCheetah-v5", "--log_root", "{runs}", "--video"),
    cli("play --video_length zero", *play("--video", "--video_length", "0")),
    cli("play override unknown agent key", *play("agent.bogus=1")),
    cli("play override unknown env key", *play("env.bogus=1")),
    cli("play train flag", *play("--max_iterations", "3")),
    cli("play --experiment_name with slash", *play("--experiment_name", "../runs")),
    cli(
        "play run agent.yaml with a tag",
        *play("--checkpoint", "{rsl_rl}"),
        around=tampered("params/agent.yaml", "algorithm: !!python/object/apply:os.system ['touch marker']\n"),
    ),
    cli("play run agent.yaml a list", *play("--checkpoint", "{rsl_rl}"), around=tampered("params/agent.yaml", "- a\n")),
    cli(
        "play run agent.yaml broken", *play("--checkpoint", "{rsl_rl}"), around=tampered("params/agent.yaml", "a: [\n")
    ),
    cli(
        "play run env.yaml unknown key",
        *play("--checkpoint", "{rsl_rl}"),
        around=tampered("params/env.yaml", "max_episode_steps: 200\ng: 10.0\nbogus: 1\n"),
    ),
    cli(
        "play run.json nested deep",
        *play("--library", "rsl_rl"),
        around=tampered(
            "run.json", '{"library": "rsl_rl", "task": "rlrun/Pendulum-v1", "x": ' + "[" * 5000 + "]" * 5000 + "}"
        ),
    ),
    # -- export
    cli("export --format typo", *export("--format", "onxx")),
    cli("export --format unknown", *export("--format", "pdf")),
    cli("export --format empty", *export("--format", "")),
    cli("export --validation_steps zero", *export("--validation_steps", "0")),
    cli("export --validation_steps negative", *export("--validation_steps", "-1")),
    cli("export --ml_framework jax", *export("--library", "skrl", "--ml_framework", "jax")),
    cli("export nothing trained", "export", "--task", PENDULUM, "--log_root", "{logs}"),
    cli("export --checkpoint empty file", *export("--checkpoint", "{tmp}/empty.pt")),
    cli("export --checkpoint of another library", *export("--library", "sb3", "--checkpoint", "{tmp}/rsl_rl_alone.pt")),
    cli("export --load_run invalid regex", *export("--load_run", "*")),
    cli("export --num_envs zero", *export("--num_envs", "0")),
    cli("export --device gpu", *export("--device", "gpu")),
    cli("export train flag", *export("--max_iterations", "3")),
    cli(
        "export run env.yaml a list",
        *export("--checkpoint", "{rsl_rl}"),
        around=tampered("params/env.yaml", "- max_episode_steps\n"),
    ),
    cli(
        "train --resume run agent.yaml alias bomb",
        *resume("--checkpoint", "{rsl_rl}"),
        around=tampered("params/agent.yaml", SPECS["spec_alias_bomb.yaml"]),
    ),
    # -- zero and random
    cli("zero --num_episodes zero", *agent("zero", "--num_episodes", "0")),
    cli("zero --max_steps negative", *agent("zero", "--max_steps", "-1")),
    cli("random with --num_episodes and --max_steps", *agent("random", "--num_episodes", "2", "--max_steps", "5")),
    cli("train --log_root empty", "train", "--task", PENDULUM, "--log_root", "", "--max_iterations", "1"),
    cli("zero --num_envs zero", *agent("zero", "--num_envs", "0")),
    cli("zero --num_envs huge", *agent("zero", "--num_envs", "10" * 10)),
    cli("zero env override that does not exist", *agent("zero", "env.nonexistent=1")),
    cli("zero env override typo", *agent("zero", "env.max_episode_step=5")),
    cli("zero env. without key", *agent("zero", "env.=1")),
    cli("zero agent override", *agent("zero", "agent.x=1")),
    cli("zero --vectorization unknown", *agent("zero", "--vectorization", "threads")),
    cli("zero --vectorization envpool native task", *agent("zero", "--vectorization", "envpool")),
    cli("zero --vectorization envpool uncovered id", *agent("zero", "--vectorization", "envpool", task="Hopper-v4")),
    cli(
        "zero --vectorization envpool env key it lacks",
        *agent("zero", "--vectorization", "envpool", "env.healthy_z_range=[0.5,2.0]", task="Hopper-v5"),
    ),
    cli(
        "zero --vectorization envpool not installed",
        *agent("zero", "--vectorization", "envpool", task="Hopper-v5"),
        around=without_envpool,
    ),
    cli("train --vectorization envpool uncovered id", *tiny("--vectorization", "envpool")),
    cli("zero Atari id env key the preprocessing fixes", *agent("zero", "env.obs_type=ram", task="ALE/Breakout-v5")),
    cli(
        "zero Atari id on envpool, a game EnvPool lacks",
        *agent("zero", "--vectorization", "envpool", task="ALE/TicTacToe3D-v5"),
    ),
    cli(
        "train Atari id with a library without an image policy",
        *agent("train", "--library", "rsl_rl", task="ALE/Breakout-v5"),
    ),
    cli("zero --video MuJoCo without MUJOCO_GL", *agent("zero", "--video", task="HalfCheetah-v5")),
    cli(
        "zero --task missing dependency",
        *agent("zero", task="LunarLander-v3"),
    ),
    cli("zero library flag", *agent("zero", "--library", "sb3")),
    cli("random agent override", *agent("random", "agent.algorithm.learning_rate=1")),
    cli("random --task typo", *agent("random", task="Pendulum-v9")),
    cli(
        "random --task missing dependency",
        *agent("random", task="LunarLander-v3"),
    ),
    cli("random --video MuJoCo without MUJOCO_GL", *agent("random", "--video", task="HalfCheetah-v5")),
    cli("random --video_length zero", *agent("random", "--video", "--video_length", "0")),
    cli("random --device cuda index out of range", *agent("random", "--device", "cuda:4096")),
    cli("random --device cuda without CUDA", *agent("random", "--device", "cuda"), marks=(no_cuda,)),
    cli("random --seed negative", *agent("random", "--seed", "-5")),
    cli("random --num_episodes non-numeric", *agent("random", "--num_episodes", "all")),
    # -- tune
    cli("tune spec missing", "tune", "{tmp}/no_such_spec.yaml"),
    cli("tune spec a list", "tune", "{tmp}/spec_list.yaml"),
    cli("tune spec without task", "tune", "{tmp}/spec_empty.yaml", "--out", "{tmp}/tune"),
    cli("tune without spec", "tune", "--out", "{tmp}/tune"),
    *(
        cli(f"tune spec {name}", "tune", f"{{tmp}}/tune_{name}.yaml", "--out", "{tmp}/tune")
        for name in (
            "unknown_key",
            "config_key",
            "env_key",
            "distribution",
            "reversed",
            "log_zero",
            "int_float",
            "choice_type",
            "empty_space",
            "not_literal",
            "enqueue_outside",
            "enqueue_unsearched",
        )
    ),
    cli("tune --pruner typo", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--pruner", "medain"),
    cli("tune --n_trials zero", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--n_trials", "0"),
    cli("tune --retries negative", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--retries", "-1"),
    cli("tune --retries above the most", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--retries", "1000"),
    cli("tune two budgets", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--env_steps", "100"),
    cli("tune --storage not a URL", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--storage", "study.db"),
    cli("tune --grace_s below heartbeat", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--grace_s", "5"),
    cli("tune searched key overridden", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "agent.gamma=0.9"),
    cli("tune spec out outside its folder", "tune", "{tmp}/tune_out_outside.yaml"),
    cli("tune spec storage file outside its folder", "tune", "{tmp}/tune_storage_outside.yaml", "--out", "{tmp}/tune"),
    cli("tune spec storage on a server", "tune", "{tmp}/tune_storage_server.yaml", "--out", "{tmp}/tune"),
    cli("tune spec Ray address", "tune", "{tmp}/tune_address.yaml", "--out", "{tmp}/tune"),
    cli("tune spec module task", "tune", "{tmp}/tune_module_task.yaml", "--out", "{tmp}/tune"),
    cli("tune --storage unknown database", "tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--storage", "foo://x"),
    cli(
        "tune --storage driver not installed",
        *("tune", "{tmp}/tune_ok.yaml", "--out", "{tmp}/tune", "--storage", "postgresql+psycopg2://u@db.test/s"),
        marks=(pytest.mark.skipif(importlib.util.find_spec("psycopg2") is not None, reason="psycopg2 is installed"),),
    ),
    # -- bench
    cli("bench spec missing", "bench", "{tmp}/no_such_spec.yaml"),
    cli("bench spec not YAML", "bench", "{tmp}/random.pt"),
    cli("bench spec broken YAML", "bench", "{tmp}/spec_broken.yaml"),
    cli("bench spec a list", "bench", "{tmp}/spec_list.yaml"),
    cli("bench spec empty", "bench", "{tmp}/spec_empty.yaml"),
    cli("bench spec unknown key", "bench", "{tmp}/spec_unknown_key.yaml", "--out", "{tmp}/bench"),
    cli("bench spec run unknown key", "bench", "{tmp}/spec_run_key.yaml", "--out", "{tmp}/bench"),
    cli("bench spec run without library", "bench", "{tmp}/spec_run_no_library.yaml", "--out", "{tmp}/bench"),
    cli("bench spec tasks a number", "bench", "{tmp}/spec_tasks_number.yaml", "--out", "{tmp}/bench"),
    cli("bench spec seeds a mapping", "bench", "{tmp}/spec_seeds_mapping.yaml", "--out", "{tmp}/bench"),
    cli("bench spec alias bomb", "bench", "{tmp}/spec_alias_bomb.yaml", "--out", "{tmp}/bench"),
    cli("bench spec nested deep", "bench", "{tmp}/spec_deep.yaml", "--out", "{tmp}/bench"),
    cli("bench spec python tag", "bench", "{tmp}/spec_tag.yaml", "--out", "{tmp}/bench"),
    cli("bench spec not UTF-8", "bench", "{tmp}/spec_not_utf8.yaml", "--out", "{tmp}/bench"),
    cli("bench spec out outside its folder", "bench", "{tmp}/spec_out_outside.yaml"),
    cli("bench spec log_root outside its folder", "bench", "{tmp}/spec_log_root_outside.yaml", "--out", "{tmp}/bench"),
    cli("bench spec Ray address", "bench", "{tmp}/spec_address.yaml", "--out", "{tmp}/bench"),
    cli("bench spec module task", "bench", "{tmp}/spec_module_task.yaml", "--out", "{tmp}/bench"),
    cli("bench spec suite mistyped", "bench", "{tmp}/spec_suite_typo.yaml", "--out", "{tmp}/bench"),
    cli("bench no budget", *bench(budget=())),
    cli("bench two budgets", *bench("--env_steps", "100")),
    cli("bench --env_steps zero", *bench(budget=("--env_steps", "0"))),
    cli("bench --env_steps negative", *bench(budget=("--env_steps", "-100"))),
    cli("bench --env_steps scientific", *bench(budget=("--env_steps", "1e5"))),
    cli("bench --iterations zero", *bench(budget=("--iterations", "0"))),
    cli("bench --seconds negative", *bench(budget=("--seconds", "-1"))),
    cli("bench --seconds nan", *bench(budget=("--seconds", "nan"))),
    cli("bench --seconds inf", *bench(budget=("--seconds", "inf"))),
    cli("bench --seeds empty range", *bench("--seeds", "5-2")),
    cli("bench --seeds non-numeric", *bench("--seeds", "x")),
    cli("bench --seeds empty", *bench("--seeds", "")),
    cli("bench --seeds too many", *bench("--seeds", "0-999999")),
    cli("bench --seeds huge", *bench("--seeds", str(2**32))),
    cli("bench --seeds two words apart", *bench("--seeds", "0", "1")),
    cli("bench --seeds three words apart", *bench("--seeds", "0", "1", "2")),
    cli("bench --tasks two words apart", *bench("--tasks", PENDULUM, "rlrun/CartPole-v1")),
    cli("bench --seeds then a path 300 chars", *bench("--seeds", "0", LONG_PATH)),
    cli("bench --suite mistyped", "bench", "--suite", "mujcoo", "--libraries", "sb3", "--out", "{tmp}/bench"),
    cli("bench --suite and --tasks", *bench("--suite", "classic", budget=())),
    cli(
        "bench --suite atari-5 without ale_py",
        "bench",
        "--suite",
        "atari-5",
        "--libraries",
        "sb3",
        "--out",
        "{tmp}/bench",
        around=without_ale_py,
    ),
    cli(
        "bench empty product",
        "bench",
        "--tasks",
        "rlrun/CartPole-v1",
        "--libraries",
        "rsl_rl",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --tasks empty",
        "bench",
        "--tasks",
        "",
        "--libraries",
        "rsl_rl",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --libraries only commas",
        "bench",
        "--tasks",
        PENDULUM,
        "--libraries",
        ",",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli("bench --tasks without --libraries", "bench", "--tasks", PENDULUM, "--iterations", "1", "--out", "{tmp}/bench"),
    cli(
        "bench --tasks typo",
        "bench",
        "--tasks",
        "CartPol-v1",
        "--libraries",
        "sb3",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --tasks missing dependency",
        "bench",
        "--tasks",
        "LunarLander-v3",
        "--libraries",
        "sb3",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --libraries typo",
        "bench",
        "--tasks",
        PENDULUM,
        "--libraries",
        "sb4",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --libraries too many parts",
        "bench",
        "--tasks",
        PENDULUM,
        "--libraries",
        "sb3:ppo:jax:x",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --libraries empty parts",
        "bench",
        "--tasks",
        PENDULUM,
        "--libraries",
        "sb3::",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --libraries twice",
        "bench",
        "--tasks",
        PENDULUM,
        "--libraries",
        "rsl_rl,rsl_rl",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli(
        "bench --libraries algorithm typo",
        "bench",
        "--tasks",
        PENDULUM,
        "--libraries",
        "sb3:sacc",
        "--iterations",
        "1",
        "--out",
        "{tmp}/bench",
    ),
    cli("bench --executor typo", *bench("--executor", "inlin")),
    cli("bench --executor unknown", *bench("--executor", "threads")),
    cli("bench --workers zero", *bench("--executor", "process", "--workers", "0")),
    cli("bench --retries negative", *bench("--retries", "-1")),
    cli("bench --storage unknown protocol", *bench("--storage", "foo://bucket/x")),
    cli("bench --storage protocol without its package", *bench("--storage", "s3://bucket/x")),
    cli("bench --retries above the most", *bench("--retries", "101")),
    cli("bench --retries non-numeric", *bench("--retries", "twice")),
    cli("bench --address without ray", *bench("--address", "127.0.0.1:6379")),
    cli("bench --eval_episodes negative", *bench("--eval_episodes", "-1")),
    cli("bench --num_envs zero", *bench("--num_envs", "0")),
    cli("bench --num_cpus non-numeric", *bench("--num_cpus", "abc")),
    cli("bench --device gpu", *bench("--device", "gpu")),
    cli(
        "bench --out is a file",
        "bench",
        "--tasks",
        PENDULUM,
        "--libraries",
        "rsl_rl",
        "--iterations",
        "1",
        "--out",
        "{tmp}/afile",
    ),
    cli("bench --name with slash", *bench("--name", "a/b")),
    cli("bench override unknown key", *bench("agent.bogus=1")),
    cli(
        "bench --log_root is a file",
        *bench("--log_root", "{tmp}/afile"),
    ),
    cli(
        "bench ray --num_gpus negative",
        *bench("--executor", "ray", "--num_gpus", "-1"),
    ),
    # -- paths with a component longer than the filesystem allows (NAME_MAX, 255 bytes)
    cli("train --log_root 300 chars", "train", "--task", PENDULUM, "--log_root", LONG_PATH),
    cli("train --resume --checkpoint 300 chars", *resume("--checkpoint", LONG_PATH)),
    cli("train --resume --load_run 300 chars", *resume("--load_run", LONG_NAME)),
    cli("play --log_root 300 chars", "play", "--task", PENDULUM, "--log_root", LONG_PATH),
    cli("play --checkpoint 300 chars", *play("--checkpoint", LONG_PATH)),
    cli("play --checkpoint with a 300-char folder", *play("--checkpoint", "{tmp}/a/" + LONG_NAME + "/b.pt")),
    cli("export --checkpoint 300 chars", *export("--checkpoint", LONG_PATH)),
    cli("zero --video --log_root 300 chars", *agent("zero", "--video", "--log_root", LONG_PATH)),
    cli("bench spec path 300 chars", "bench", LONG_PATH),
    cli("bench --out 300 chars", *bench("--out", LONG_PATH)),
    cli("bench --log_root 300 chars", *bench("--log_root", LONG_PATH)),
    cli("bench --name 300 chars", *bench("--name", LONG_NAME)),
    cli("report folder 300 chars", "report", LONG_PATH),
    # -- report
    cli("report missing folder", "report", "{tmp}/no_such_bench"),
    cli("report a file", "report", "{tmp}/afile"),
    cli("report folder without results", "report", "{runs}"),
    # -- concurrency
    cli("main while another thread's call runs", *train("--max_iterations", "1"), around=another_call_running),
    api(
        "train while another thread's call runs",
        lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, log_root=str(w.logs), max_iterations=1)),
        around=another_call_running,
    ),
    # -- the API: wrong request types
    api("train(PlayRequest)", lambda w: rlrun.train(rlrun.PlayRequest(task=PENDULUM, log_root=str(w.logs)))),
    api("play(TrainRequest)", lambda w: rlrun.play(rlrun.TrainRequest(task=PENDULUM, log_root=str(w.runs)))),
    api("export(PlayRequest)", lambda w: rlrun.export(rlrun.PlayRequest(task=PENDULUM, log_root=str(w.runs)))),
    api("zero_agent(TrainRequest)", lambda w: rlrun.zero_agent(rlrun.TrainRequest(task=PENDULUM))),
    api("random_agent(PlayRequest)", lambda w: rlrun.random_agent(rlrun.PlayRequest(task=PENDULUM))),
    api("bench(TrainRequest)", lambda w: rlrun.bench(rlrun.TrainRequest(task=PENDULUM))),
    api("train(dict)", lambda w: rlrun.train(untyped({"task": PENDULUM, "log_root": str(w.logs)}))),
    # -- the API: unknown fields and missing tasks, refused when the request is built
    api("TrainRequest unknown field", lambda w: build(rlrun.TrainRequest, task=PENDULUM, num_env=3), UnknownField),
    api("PlayRequest unknown field", lambda w: build(rlrun.PlayRequest, tsk=PENDULUM), UnknownField),
    api("AgentRequest library field", lambda w: build(rlrun.AgentRequest, task=PENDULUM, library="sb3"), UnknownField),
    api(
        "ExportRequest unknown field", lambda w: build(rlrun.ExportRequest, task=PENDULUM, formats="onnx"), UnknownField
    ),
    api("TrainRequest without task", lambda w: build(rlrun.TrainRequest, library="rsl_rl"), UnknownField),
    api("AgentRequest without task", lambda w: build(rlrun.AgentRequest, num_envs=2), UnknownField),
    api(
        "BenchRequest unknown field",
        lambda w: build(rlrun.BenchRequest, tasks=(PENDULUM,), runs=("rsl_rl",), bogus=1),
        UnknownField,
    ),
    api(  # tasks may be left out for a suite: the bench refuses it, before anything exists
        "bench without tasks or suite",
        lambda w: rlrun.bench(rlrun.BenchRequest(runs=("rsl_rl",), iterations=1, out=str(w.tmp / "bench"))),
    ),
    api(
        "bench suite mistyped",
        lambda w: rlrun.bench(rlrun.BenchRequest(suite="atari5", runs=("sb3",), out=str(w.tmp / "bench"))),
    ),
    api(
        "BenchRun unknown field",
        lambda w: build(rlrun.BenchRun, library="sb3", algo="ppo"),
        UnknownField,
    ),
    api(
        "bench retries as bool",
        lambda w: rlrun.bench(
            rlrun.BenchRequest(tasks=(PENDULUM,), runs=("rsl_rl",), iterations=1, retries=True, out=str(w.tmp / "b"))
        ),
    ),
    # -- the API: values of the wrong type
    api("train num_envs as text", lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, num_envs=untyped("4")))),
    api("train num_envs as bool", lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, num_envs=True))),
    api("train seed as float", lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, seed=untyped(1.5)))),
    api("train task None", lambda w: rlrun.train(rlrun.TrainRequest(task=untyped(None)))),
    api(
        "train overrides one string",
        lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, overrides=untyped("agent.x=1"))),
    ),
    api(
        "train overrides not strings",
        lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, overrides=untyped((1,)))),
    ),
    api(
        "train library not a string",
        lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, library=untyped(3))),
    ),
    api(
        "train device not a string",
        lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, device=untyped(3))),
    ),
    api(
        "train log_root None",
        lambda w: rlrun.train(rlrun.TrainRequest(task=PENDULUM, log_root=untyped(None))),
    ),
    api(
        "play num_episodes zero",
        lambda w: rlrun.play(rlrun.PlayRequest(task=PENDULUM, num_episodes=0, log_root=str(w.runs))),
    ),
    api(
        "export format unknown",
        lambda w: rlrun.export(rlrun.ExportRequest(task=PENDULUM, format="pdf", log_root=str(w.runs))),
    ),
    api(
        "random_agent num_episodes negative",
        lambda w: rlrun.random_agent(rlrun.AgentRequest(task=PENDULUM, num_episodes=-1, log_root=str(w.logs))),
    ),
    api(
        "bench runs not runs",
        lambda w: rlrun.bench(
            rlrun.BenchRequest(tasks=(PENDULUM,), runs=untyped((3,)), iterations=1, out=str(w.tmp / "bench"))
        ),
    ),
    api(
        "bench iterations float",
        lambda w: rlrun.bench(
            rlrun.BenchRequest(tasks=(PENDULUM,), runs=("rsl_rl",), iterations=untyped(1.5), out=str(w.tmp / "bench"))
        ),
    ),
    api(
        "bench run overrides without variant",
        lambda w: rlrun.bench(
            rlrun.BenchRequest(
                tasks=(PENDULUM,),
                runs=(rlrun.BenchRun("rsl_rl", overrides=("agent.x=1",)),),
                iterations=1,
                out=str(w.tmp / "bench"),
            )
        ),
    ),
]


def test_the_noise_filter_still_reports_a_descriptor_a_call_keeps_open():
    before = census.snapshot()
    kept = socket.socketpair()
    try:
        assert any(line.startswith(FILES) for line in leaks_since(before, timeout=0.1))
    finally:
        for end in kept:
            end.close()
    assert leaks_since(before, timeout=0.1) == []


def test_the_noise_pattern_matches_only_that_noise():
    header = "rlrun: the call left global state changed:\nopen file descriptors was modified by the call: "
    assert is_noise(header + "removed [(15, 'anon_inode:[eventfd]'), (16, 'anon_inode:[eventfd]')]\n")
    assert is_noise(header + "added [(6, 'socket:[171441]'), (7, 'anon_inode:[eventfd]')], removed [(9, 'so...\n")
    assert is_noise(header + "added [(6, 'socket:[1]')]\nsb3.py:3: UserWarning: a warning shown after\n")
    assert not is_noise(header + "added [(6, '/dev/shm/pym-1-x (deleted)')]\n")
    assert not is_noise(header + "added [(6, 'socket:[1]')]\nthreads was modified by the call: added [x]\n")


def test_the_table_is_large_and_its_ids_unique():
    ids = [row.id for row in ROWS]
    assert len(ids) >= 100 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", ROWS)
def test_bad_input_is_one_line_and_leaves_nothing(case: Case, workspace: Workspace, capsys):
    files = listing(workspace.tmp)
    capsys.readouterr()
    before = census.snapshot()
    with case.around(workspace) if case.around else contextlib.nullcontext():
        if case.api is None:
            code = rlrun.main([workspace.word(word) for word in case.argv])
            refused = code == 2
        else:
            with pytest.raises(BaseException) as raised:
                case.api(workspace)
            refused = isinstance(raised.value, UserError)
        if not refused:  # a call that crashed may leave reference cycles (a library's subprocess handles):
            gc.collect()  # finalise them now, so that what they warn is blamed on this row, not a later one
        captured = capsys.readouterr()
    leaks = leaks_since(before)

    assert "Traceback" not in captured.err, captured.err
    if case.api is None:
        assert code == 2, captured.err
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), captured.err
        assert len(lines[0]) > len(ERROR_PREFIX) + 10, "the line names nothing"
    else:
        error = raised.value
        assert isinstance(error, case.error), repr(error)
        assert str(error).strip() and "\n" not in str(error), repr(str(error))
        notes = [  # the leak detector attaches what it finds to a failed call's error
            note
            for note in getattr(error, "__notes__", [])
            if not _REPORT.fullmatch(note.removeprefix("rlrun leak detector: ").strip())  # (but the noise)
        ]
        assert not notes, notes
        assert captured.err == "", captured.err
    assert listing(workspace.tmp) == files, "a rejected call left files or folders behind"
    assert not leaks, leaks


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(tiny("--algorithm", "PPO", "--ml_framework", "TORCH", *SMALL_RSL_RL), id="train PPO TORCH"),
        pytest.param(agent("zero", "--vectorization", "SYNC", "--max_steps", "2"), id="zero SYNC"),
        pytest.param(export("--library", "RSL_RL", "--format", "TORCHSCRIPT"), id="export RSL_RL TORCHSCRIPT"),
    ],
)
def test_case_variants_are_accepted(argv: tuple[str, ...], workspace: Workspace, capsys):
    """Not bad inputs: names are compared without regard to case."""
    code, err = main_through_noise([workspace.word(word) for word in argv], capsys)
    assert code == 0, err
