"""The command line: bad input gives exit code 2 and one actionable line, and leaves nothing behind."""

from __future__ import annotations

import json
import random
import shutil

import pytest
import torch

import rlrun
from rlrun.libraries import LIBRARIES, Library
from support import MEDDLING_TASK, SMALL_RSL_RL

PENDULUM = "rlrun/Pendulum-v1"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A log root with one small RSL-RL run of the meddling task, and its checkpoint."""
    root = tmp_path_factory.mktemp("cli") / "logs"
    result = rlrun.train(
        rlrun.TrainRequest(task=MEDDLING_TASK, num_envs=2, max_iterations=1, log_root=str(root), overrides=SMALL_RSL_RL)
    )
    return root, result.checkpoint


def directories(root):
    return sorted(path for path in root.rglob("*") if path.is_dir()) if root.exists() else []


def assert_user_error(capsys, argv, *fragments, root=None):
    before = directories(root) if root is not None else None
    code = rlrun.main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlrun: error: "), captured.err
    assert "Traceback" not in captured.err
    for fragment in fragments:
        assert fragment in lines[0]
    if root is not None:
        assert directories(root) == before, "a rejected call left a directory behind"
    return lines[0]


def test_unknown_task_suggests_the_nearest_id(capsys, log_root):
    assert_user_error(capsys, ["train", "--task", "CartPol-v1", "--log_root", str(log_root)], "'CartPole-v1'")
    assert not log_root.exists()


def test_unknown_library_lists_the_libraries(capsys, log_root):
    assert_user_error(
        capsys, ["train", "--task", PENDULUM, "--library", "sb4", "--log_root", str(log_root)], "'sb4'", "rsl_rl"
    )
    assert not log_root.exists()


def test_a_library_that_is_not_installed_names_the_pip_extra(capsys, log_root, monkeypatch):
    fake = Library("fakelib", "rlrun.libraries.rsl_rl", "rlrun_no_such_library", "fakelib", "fakelib", "")
    monkeypatch.setitem(LIBRARIES, "fakelib", fake)
    assert_user_error(
        capsys,
        ["train", "--task", PENDULUM, "--library", "fakelib", "--log_root", str(log_root)],
        "pip install 'rlrun[fakelib]'",
    )
    assert not log_root.exists()


def test_a_discrete_task_for_rsl_rl_is_refused_before_any_directory_is_made(capsys, log_root):
    assert_user_error(
        capsys,
        ["train", "--task", "rlrun/CartPole-v1", "--library", "rsl_rl", "--log_root", str(log_root)],
        "Discrete action space",
        "supports Box",
    )
    assert not log_root.exists()


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--num_envs", "-4"], "--num_envs -4"),
        (["--num_envs", "0"], "--num_envs 0"),
        (["--max_iterations", "0"], "--max_iterations 0"),
        (["--seed", "-2"], "--seed -2"),
        (["--num_env", "3"], "Did you mean '--num_envs'?"),
        (["--num_envs", "many"], "invalid int value: 'many'"),
        (["--device", "gpu"], "'gpu' is not a device"),
        (["--vectorization", "threads"], "'threads'"),
        (["agent.algorithm.learning_rat=1"], "Did you mean 'agent.algorithm.learning_rate'"),
        (["env.max_episode_step=5"], "Did you mean 'env.max_episode_steps'"),
        (["learning_rate=1"], "agent.<key>=<value>"),
        (["--run_name", "../x"], "not a valid directory name"),
        (["--checkpoint", "latest"], "--resume"),
        (["--algorithm", "sac"], "Choose from: ppo"),
        (["--ml_framework", "jax"], "use torch"),
    ],
)
def test_bad_train_arguments(capsys, log_root, flags, fragment):
    assert_user_error(capsys, ["train", "--task", PENDULUM, "--log_root", str(log_root), *flags], fragment)
    assert not log_root.exists()


def test_a_missing_task_flag_is_one_line_too(capsys):
    assert_user_error(capsys, ["train"], "--task")


def test_a_missing_checkpoint(capsys, trained):
    root, _ = trained
    assert_user_error(capsys, ["play", "--task", PENDULUM, "--log_root", str(root)], "no rsl_rl checkpoint", root=root)
    assert_user_error(
        capsys,
        ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--checkpoint", "gone.pt"],
        "gone.pt",
        root=root,
    )


@pytest.mark.parametrize("damage", ["empty", "truncated", "random bytes", "not an RSL-RL checkpoint"])
def test_a_corrupt_checkpoint_is_reported_with_its_path(capsys, trained, tmp_path, damage):
    root, checkpoint = trained
    bad = tmp_path / "model_7.pt"
    data = checkpoint.read_bytes()
    if damage == "empty":
        bad.write_bytes(b"")
    elif damage == "truncated":
        bad.write_bytes(data[: len(data) // 2])
    elif damage == "random bytes":
        bad.write_bytes(random.Random(damage).randbytes(4096))
    else:
        torch.save({"weights": torch.zeros(3)}, bad)
    line = assert_user_error(
        capsys,
        ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--checkpoint", str(bad)],
        str(bad),
        root=root,
    )
    assert ("missing" in line) if damage == "not an RSL-RL checkpoint" else ("cannot be read" in line)


def test_a_checkpoint_of_another_task_is_refused(capsys, trained, tmp_path):
    root, checkpoint = trained
    copy = tmp_path / "run"
    shutil.copytree(checkpoint.parent, copy)
    assert_user_error(
        capsys,
        ["play", "--task", PENDULUM, "--log_root", str(root), "--checkpoint", str(copy / checkpoint.name)],
        f"trained on task '{MEDDLING_TASK}'",
        root=root,
    )


def test_play_prints_a_summary_and_json(capsys, trained):
    root, checkpoint = trained
    words = ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--num_episodes", "2", "--num_envs", "2"]
    assert rlrun.main(words) == 0
    assert "played 2 episodes" in capsys.readouterr().out
    assert rlrun.main([*words, "--json"]) == 0
    played = json.loads(capsys.readouterr().out)
    assert played["checkpoint"] == str(checkpoint) and len(played["returns"]) == 2
    assert played["checkpoint_saved"]["file"] == checkpoint.name


def test_play_says_what_best_chose_the_checkpoint_by(capsys, trained):
    root, checkpoint = trained
    words = ["play", "--task", MEDDLING_TASK, "--log_root", str(root), "--num_episodes", "1", "--num_envs", "2"]
    assert rlrun.main([*words, "--checkpoint", "best", "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)["checkpoint_saved"]
    assert rlrun.main([*words, "--checkpoint", "best"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    score = saved["mean_return"]
    why = f", training mean return {score:.1f} when saved" if score is not None else ""
    assert line.endswith(f"{checkpoint.name} (iteration {saved['iteration']}{why})"), line


def test_list_shows_tasks_libraries_and_how_to_install(capsys, monkeypatch):
    fake = Library("fakelib", "rlrun.libraries.rsl_rl", "rlrun_no_such_library", "fakelib", "fakelib", "")
    monkeypatch.setitem(LIBRARIES, "fakelib", fake)
    assert rlrun.main(["list"]) == 0
    out = capsys.readouterr().out
    for fragment in ("rsl_rl", "rlrun/CartPoleContinuous-v1", "rlrun/Pendulum-v1", "pip install 'rlrun[fakelib]'"):
        assert fragment in out
    assert rlrun.main(["list", "tasks", "--gymnasium"]) == 0
    assert "HalfCheetah-v5" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["train", "--help"], ["bench", "-h"], ["list"]], ids=["train", "bench", "list"])
def test_flag_help_is_read_from_source_only_when_help_is_asked_for(argv, capsys, monkeypatch):
    import rlrun.cli.parser

    reads = []
    monkeypatch.setattr(
        rlrun.cli.parser,
        "field_docs",
        lambda request: reads.append(request) or dict.fromkeys(("seed", "seeds"), "SEED-DOC-TEXT"),
    )
    assert rlrun.main(argv) == 0
    out = capsys.readouterr().out
    asked = argv[-1] in ("-h", "--help")
    assert bool(reads) == asked
    assert ("SEED-DOC-TEXT" in out) == asked


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        (["train", "--task", "rlrun/CartPole-v1"], set()),
        (["play", "--task", "rlrun/CartPole-v1"], set()),
        (["bench", "--tasks", "rlrun/CartPole-v1"], {"rlrun.benching"}),
        (["tune", "spec.yaml"], {"rlrun.tuning"}),
    ],
    ids=["train", "play", "bench", "tune"],
)
def test_parsing_a_command_imports_only_the_packages_its_flags_come_from(argv, loaded):
    """`rlrun train ...` answers a user error sooner when parsing it does not import the bench and the tune."""
    import subprocess
    import sys

    code = (
        "import sys; from rlrun.cli import parse; "
        f"args = parse({argv!r}); assert args.command == {argv[0]!r}; "
        "print(sorted(name for name in ('rlrun.benching', 'rlrun.tuning') if name in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == repr(sorted(loaded))


def test_every_command_is_named_in_the_error_whichever_command_is_parsed(capsys):
    assert rlrun.main(["trian", "--task", "rlrun/CartPole-v1"]) == 2
    error = capsys.readouterr().err
    for command in ("train", "play", "export", "zero", "random", "bench", "tune", "report", "list"):
        assert f"'{command}'" in error


@pytest.mark.parametrize(
    ("words", "fix"),
    [
        (["--seeds", "0", "1"], "'1' after --seeds '0' is not a spec file: --seeds takes one comma-separated list; "
         "use --seeds 0,1."),
        (["--seeds", "0", "1", "2", "--iterations", "1"], "use --seeds 0,1,2."),
        (["--tasks", "rlrun/CartPole-v1", "rlrun/Pendulum-v1"], "use --tasks rlrun/CartPole-v1,rlrun/Pendulum-v1."),
    ],
    ids=["seeds", "three-seeds", "tasks"],
)  # fmt: skip
def test_words_after_a_list_flags_value_are_answered_with_the_list_joined(capsys, tmp_path, words, fix):
    """argparse reads `--seeds 0 1`'s `1` as the spec file; the answer names the flag and the list it meant."""
    argv = ["bench", "--libraries", "rsl_rl", "--tasks", "rlrun/CartPole-v1", *words, "--out", str(tmp_path / "b")]
    assert rlrun.main(argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.rstrip().endswith(fix), error
    assert not (tmp_path / "b").exists()


def test_a_spec_file_is_still_a_spec_after_a_list_flag(capsys, tmp_path):
    spec = tmp_path / "bench"  # a spec file without a YAML suffix, after a list flag's value: read as the spec
    spec.write_text("tasks: [rlrun/CartPole-v1]\nruns: [rsl_rl]\nseeds: [0]\niterations: 0\n")
    assert rlrun.main(["bench", "--seeds", "0", str(spec)]) == 2
    assert "iterations" in capsys.readouterr().err  # the spec was read: its own bad value is the answer


def test_a_checkpoint_of_another_library_is_named(capsys, trained, tmp_path):
    root, checkpoint = trained
    others = [name for name, library in LIBRARIES.items() if name != "rsl_rl" and library.installed]
    if not others:
        pytest.skip("needs a second library adapter")
    alone = tmp_path / "model.pt"  # no run.json beside it: only the file's format can tell
    shutil.copy(checkpoint, alone)
    assert_user_error(
        capsys,
        ["play", "--task", MEDDLING_TASK, "--library", others[0], "--log_root", str(root), "--checkpoint", str(alone)],
        f"is a rsl_rl checkpoint, not a {others[0]} one; pass --library rsl_rl",
        root=root,
    )


def test_export_says_each_step_on_stderr_and_nothing_with_json(capsys, trained, tmp_path):
    root, checkpoint = trained
    words = ["export", "--task", MEDDLING_TASK, "--log_root", str(root), "--checkpoint", str(checkpoint)]
    assert rlrun.main(words) == 0
    captured = capsys.readouterr()
    steps = captured.err.strip().splitlines()
    assert [line.split(":")[0] for line in steps] == ["export"] * 4, captured.err
    assert f"from {checkpoint.name}" in steps[0] and "exported/policy.onnx" in steps[2] and steps[-1].endswith(" s]")
    assert "exported the rsl_rl policy" in captured.out
    assert rlrun.main([*words, "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_rlrun_report_says_each_step_with_the_time_since_it_began(capsys, tmp_path):
    out = tmp_path / "bench"
    rlrun.bench(
        rlrun.BenchRequest(
            tasks=(MEDDLING_TASK,),
            runs=("rsl_rl",),
            iterations=1,
            num_envs=2,
            overrides=SMALL_RSL_RL,
            out=str(out),
            report=False,
        )
    )
    capsys.readouterr()
    assert rlrun.main(["report", str(out)]) == 0
    captured = capsys.readouterr()
    steps = captured.err.strip().splitlines()
    assert len(steps) == 3 and all(line.startswith("report: ") and line.endswith(" s]") for line in steps)
    assert "1 cell over 1 task" in steps[0] and "drawing" in steps[2]
    assert captured.out.strip().endswith("report.md")


def test_a_failure_of_a_service_is_one_line_and_exit_code_1(capsys, monkeypatch):
    from rlrun.cli import commands
    from rlrun.tuning.proxy import ProxyFailed

    def failing(args):
        raise ProxyFailed("the gRPC proxy ended at start: 'database is locked'; fix what that line says")

    monkeypatch.setattr(commands, "listing", failing)
    code = rlrun.main(["list"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.strip().splitlines() == [
        "rlrun: error: the gRPC proxy ended at start: 'database is locked'; fix what that line says"
    ]
