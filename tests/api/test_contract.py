"""The hermetic contract of `rlrun.train` and `rlrun.play`, the hard way.

The caller first puts a non-default value on every guarded global. The call then runs RSL-RL on a
task that, once the runner is built and training has started, changes every guarded global itself
and then succeeds, raises, is interrupted or exits. Afterwards every global is back (the same object
where it is an object), the leak detector (on for the whole suite) reports nothing, and the
exception or exit code reaches the caller unchanged.
"""

from __future__ import annotations

import importlib
import json
import logging
import random
import signal
import sys
import warnings

import numpy as np
import pytest
import torch

import rlrun
from rlrun import api
from rlrun.errors import InvalidArgument
from rlrun.hermetic import census
from support import CONTRACT_CASES, FAILURE_MESSAGE, MEDDLING_TASK, SMALL_RSL_RL, EnvironmentExploded

OUTCOMES = {
    "success": None,
    "exception": EnvironmentExploded,
    "interrupt": KeyboardInterrupt,
    "system_exit": SystemExit,
}
FAILURE_NAMES = {EnvironmentExploded: "RuntimeError", KeyboardInterrupt: "KeyboardInterrupt", SystemExit: "SystemExit"}


def caller_handler(number, frame):
    """The caller's own SIGINT handler."""


@pytest.fixture
def caller_globals(monkeypatch, tmp_path):
    """Put a non-default value on every guarded global, as a caller might have; undo it after the test."""
    monkeypatch.setattr(sys, "argv", ["caller", "--caller-flag"])
    monkeypatch.setenv("RLRUN_TEST_SENTINEL", "caller")
    monkeypatch.setenv("RLRUN_TEST_DELETED", "caller")
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    warnings.filterwarnings("ignore", message="a caller's own filter")
    previous_handler = signal.signal(signal.SIGINT, caller_handler)
    rng_states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    random.seed(7)
    np.random.seed(7)
    torch.manual_seed(7)
    torch_state = (
        torch.get_float32_matmul_precision(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
        torch.get_num_threads(),
    )
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.set_num_threads(1)
    torch.set_printoptions(precision=6)
    logging.getLogger("rlrun_test.caller").setLevel(logging.WARNING)
    yield
    torch.set_printoptions(profile="default")
    torch.set_float32_matmul_precision(torch_state[0])
    for backend in (torch.backends.cuda.matmul, torch.backends.mkldnn.matmul):
        backend.fp32_precision = "none"
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = torch_state[1:3]
    torch.set_num_threads(torch_state[3])
    random.setstate(rng_states[0])
    np.random.set_state(rng_states[1])
    torch.set_rng_state(rng_states[2])
    signal.signal(signal.SIGINT, previous_handler)


@pytest.fixture(scope="module", params=list(CONTRACT_CASES))
def case(request, tmp_path_factory):
    """A library case, with a log root holding one short run of the meddling task (for `play`)."""
    arguments, fail_at = CONTRACT_CASES[request.param]
    root = tmp_path_factory.mktemp(f"trained-{request.param}") / "logs"
    rlrun.train(rlrun.TrainRequest(task=MEDDLING_TASK, log_root=str(root), **arguments))
    return arguments, fail_at, root


def call(kind, case, log_root, overrides=()):
    arguments, fail_at, trained_root = case
    if kind == "train":
        meddling = (*arguments["overrides"], "env.meddle_at=3", *overrides)
        return rlrun.train(
            rlrun.TrainRequest(
                task=MEDDLING_TASK, seed=0, log_root=str(log_root), **{**arguments, "overrides": meddling}
            )
        )
    if kind == "export":
        if arguments.get("ml_framework", "torch") != "torch":
            pytest.skip("rlrun exports PyTorch policies only")
        request = rlrun.ExportRequest(
            task=MEDDLING_TASK,
            library=arguments["library"],
            num_envs=2,
            validation_steps=fail_at + 4,
            log_root=str(trained_root),
            overrides=("env.meddle_at=3", *overrides),
        )
        return rlrun.export(request)
    request = rlrun.PlayRequest(
        task=MEDDLING_TASK,
        library=arguments["library"],
        num_envs=2,
        num_episodes=2,
        log_root=str(trained_root),
        overrides=("env.meddle_at=3", *overrides),
    )
    return rlrun.play(request)


def import_what_calls_import():
    """Import effects belong to the first import, not to a call (rlrun imports before it captures);
    tests that compare the whole process before and after a call import the same modules first."""
    for name in (*api.CORE_IMPORTS, *api.EXPORT_IMPORTS, "onnxruntime"):
        importlib.import_module(name)


def assert_caller_globals_intact(before, argv, filters):
    after = census.snapshot()
    assert census.compare(before, after) == []
    assert sys.argv is argv and sys.argv == ["caller", "--caller-flag"]
    assert warnings.filters is filters
    assert signal.getsignal(signal.SIGINT) is caller_handler
    assert torch.get_float32_matmul_precision() == "medium"
    assert torch.backends.cudnn.benchmark is True and torch.backends.cudnn.deterministic is True
    assert torch.get_num_threads() == 1
    assert torch.get_default_dtype() is torch.float32 and torch.is_grad_enabled()


@pytest.mark.usefixtures("caller_globals")
@pytest.mark.parametrize("kind", ["train", "play", "export"])
@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_call_leaves_every_global_as_the_caller_set_it(kind, outcome, case, log_root):
    failure = OUTCOMES[outcome]
    overrides = () if failure is None else (f"env.fail_at={case[1]}", f"env.failure={FAILURE_NAMES[failure]}")
    argv, filters = sys.argv, warnings.filters
    expected_draws = _next_draws()
    import_what_calls_import()
    before = census.snapshot()

    if failure is None:
        result = call(kind, case, log_root, overrides)
        assert result.task == MEDDLING_TASK
    else:
        with pytest.raises(failure) as raised:
            call(kind, case, log_root, overrides)
        error = raised.value
        assert type(error) is failure
        assert (error.code == 3) if failure is SystemExit else (str(error) == FAILURE_MESSAGE)
        assert not [note for note in getattr(error, "__notes__", []) if "rlrun" in note]

    assert_caller_globals_intact(before, argv, filters)
    assert _next_draws() == expected_draws  # the caller's RNG streams continue as if nothing happened
    if kind == "train":
        (manifest_path,) = log_root.glob("*/*/*/run.json")
        status = {None: "completed", KeyboardInterrupt: "interrupted"}.get(failure, "failed")
        assert json.loads(manifest_path.read_text())["status"] == status


def _next_draws():
    """The caller's next draws from each global generator, without consuming them."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    draws = random.random(), float(np.random.random()), float(torch.rand(1))
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])
    return draws


@pytest.mark.usefixtures("caller_globals")
@pytest.mark.parametrize("kind", ["train", "play"])
def test_main_returns_the_exit_code_of_a_library_exit_and_restores(kind, case, log_root, capsys):
    arguments, fail_at, trained_root = case
    argv, filters = sys.argv, warnings.filters
    before = census.snapshot()
    words = [kind, "--task", MEDDLING_TASK, "--library", arguments["library"], "--num_envs", "2"]
    if arguments.get("ml_framework"):
        words += ["--ml_framework", arguments["ml_framework"]]
    if arguments.get("algorithm"):
        words += ["--algorithm", arguments["algorithm"]]
    if kind == "train":
        words += [
            "--log_root",
            str(log_root),
            "--max_iterations",
            str(arguments["max_iterations"]),
            *arguments["overrides"],
        ]
    else:
        words += ["--log_root", str(trained_root), "--num_episodes", "2"]
    fail = f"env.fail_at={fail_at}"
    assert rlrun.main([*words, fail, "env.failure=SystemExit"]) == 3
    assert rlrun.main([*words, fail, "env.failure=KeyboardInterrupt"]) == 130
    assert rlrun.main([*words, fail]) == 1
    assert_caller_globals_intact(before, argv, filters)
    assert "rlrun: interrupted" in capsys.readouterr().err


@pytest.mark.usefixtures("caller_globals")
@pytest.mark.parametrize("kind", ["train", "play"])
def test_help_and_rejected_arguments_change_nothing(kind, log_root, capsys):
    """Argument parsing and validation happen before anything changes, whatever the library."""
    argv, filters = sys.argv, warnings.filters
    before = census.snapshot()
    assert rlrun.main([kind, "--help"]) == 0
    assert "--num_envs" in capsys.readouterr().out
    assert rlrun.main([kind, "--task", MEDDLING_TASK, "--num_envs", "-4", "--log_root", str(log_root)]) == 2
    request_type = rlrun.TrainRequest if kind == "train" else rlrun.PlayRequest
    with pytest.raises(InvalidArgument, match="--num_envs -4"):
        getattr(rlrun, kind)(request_type(task=MEDDLING_TASK, num_envs=-4, log_root=str(log_root)))
    assert_caller_globals_intact(before, argv, filters)
    assert not log_root.exists()


def test_results_describe_the_run(log_root):
    result = rlrun.train(
        rlrun.TrainRequest(
            task=MEDDLING_TASK, num_envs=4, max_iterations=2, seed=5, log_root=str(log_root), overrides=SMALL_RSL_RL
        )
    )
    assert result.library == "rsl_rl"  # the task's default library
    assert result.iterations == 2 and result.env_steps == 2 * 8 * 4 and result.seed == 5
    assert result.checkpoint == result.run_dir / "model_1.pt" and result.checkpoint.is_file()
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["status"] == "completed" and manifest["seed"] == 5 and manifest["task"] == MEDDLING_TASK
    assert manifest["versions"]["rsl-rl-lib"] and manifest["versions"]["rlrun"]
    assert [entry["file"] for entry in manifest["checkpoints"]] == ["model_0.pt", "model_1.pt"]
    assert (result.run_dir / "params" / "agent.yaml").is_file() and (result.run_dir / "params" / "env.yaml").is_file()
    assert "Actor Model" in (result.run_dir / "console.log").read_text()  # RSL-RL's printout, not the terminal's

    played = rlrun.play(rlrun.PlayRequest(task=MEDDLING_TASK, num_episodes=3, num_envs=2, log_root=str(log_root)))
    assert played.checkpoint == result.checkpoint and played.run_dir == result.run_dir
    assert len(played.returns) == len(played.lengths) == 3 and set(played.lengths) == {200}
    assert played.mean_return == pytest.approx(np.mean(played.returns))


@pytest.mark.usefixtures("caller_globals")
@pytest.mark.parametrize("agent", ["zero_agent", "random_agent"])
@pytest.mark.parametrize("outcome", ["success", "exception", "interrupt"])
def test_zero_and_random_agents_leave_every_global_as_the_caller_set_it(agent, outcome):
    failure = OUTCOMES[outcome]
    overrides = ("env.meddle_at=3",) + (
        () if failure is None else ("env.fail_at=12", f"env.failure={FAILURE_NAMES[failure]}")
    )
    argv, filters = sys.argv, warnings.filters
    expected_draws = _next_draws()
    before = census.snapshot()
    request = rlrun.AgentRequest(task=MEDDLING_TASK, num_envs=2, max_steps=20, overrides=overrides)
    if failure is None:
        result = getattr(rlrun, agent)(request)
        assert result.env_steps == 40 and result.checkpoint is None
    else:
        with pytest.raises(failure, match=FAILURE_MESSAGE):
            getattr(rlrun, agent)(request)
    assert_caller_globals_intact(before, argv, filters)
    assert _next_draws() == expected_draws
