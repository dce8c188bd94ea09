"""A bench is planned whole before anything runs: a bad spec is one user error, and no folder."""

from __future__ import annotations

import pytest

import rlrun
from rlrun.api.planning import plan_train
from rlrun.benching.planning import plan_bench
from rlrun.benching.request import BenchRequest, BenchRun, load_spec
from rlrun.errors import InvalidArgument, UserError
from rlrun.hermetic import hermetic_call
from rlrun.sweep import parse_seeds

pytest.importorskip("rsl_rl")
pytest.importorskip("stable_baselines3")  # the libraries its cases train with

BASE = {"tasks": ("rlrun/CartPole-v1",), "runs": ("sb3",), "iterations": 1}


def plan(tmp_path, **fields):
    request = BenchRequest(**{**BASE, "out": str(tmp_path / "out"), **fields})
    with hermetic_call() as call:
        return plan_bench(call, request)


def test_cells_are_the_product_of_tasks_runs_and_seeds_with_skips_noted(tmp_path):
    planned = plan(
        tmp_path,
        tasks=("rlrun/CartPole-v1", "rlrun/Pendulum-v1"),
        runs=("sb3", "rsl_rl", "sb3:sac"),
        seeds="0-1",
    )
    cells = {(cell.request.task, cell.run, cell.request.seed) for cell in planned.cells}
    assert ("rlrun/CartPole-v1", "sb3/ppo", 0) in cells and ("rlrun/Pendulum-v1", "sb3/sac", 1) in cells
    assert len(cells) == len(planned.cells) == 1 * 2 + 3 * 2  # on CartPole (Discrete), sb3/ppo alone acts
    notes = {row["note"] for row in planned.skipped}
    assert notes == {
        "rsl_rl/ppo cannot act in rlrun/CartPole-v1's Discrete action space",
        "sb3/sac cannot act in rlrun/CartPole-v1's Discrete action space",
    }
    assert len({cell.key for cell in planned.cells}) == len(planned.cells)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("env_steps", [3 * 16384, 3 * 16384 + 1])
def test_an_env_step_budget_is_the_same_for_every_library(tmp_path, env_steps):
    """Each cell gets the fewest whole iterations of its own library's size that cover the budget: one
    iteration less would not (the libraries' iterations differ: sb3's PPO is 4096 env steps, rsl_rl's 16384)."""
    planned = plan(tmp_path, tasks=("rlrun/Pendulum-v1",), runs=("sb3", "rsl_rl"), iterations=None, env_steps=env_steps)
    sizes = {}
    with hermetic_call() as call:
        for cell in planned.cells:
            trained = plan_train(call, cell.request)
            sizes[cell.run] = trained.adapter.env_steps_per_iteration(trained.library_config, trained.num_envs)
            assert sizes[cell.run] == trained.env_steps_per_iteration
    assert set(sizes) == {"sb3/ppo", "rsl_rl/ppo"} and len(set(sizes.values())) == 2
    for cell in planned.cells:
        iterations, size = cell.request.max_iterations, sizes[cell.run]
        assert iterations * size >= env_steps, f"{cell.run}: {iterations} x {size} falls short of {env_steps}"
        assert (iterations - 1) * size < env_steps, f"{cell.run}: {iterations} is one iteration too many"


def test_the_key_depends_on_everything_that_decides_the_outcome_and_nothing_else(tmp_path):
    first = plan(tmp_path, seeds=(0, 1)).cells
    again = plan(tmp_path, seeds=(0, 1), out=str(tmp_path / "elsewhere")).cells
    assert [cell.key for cell in first] == [cell.key for cell in again]
    assert first[0].key != first[1].key
    other = plan(tmp_path, seeds=(0,), overrides=("agent.learning_rate=0.001",)).cells[0]
    assert other.key != first[0].key


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"tasks": ()}, "--tasks is empty"),
        ({"runs": ()}, "--libraries is empty"),
        ({"tasks": ("CartPol-v1",)}, "'CartPole-v1'"),
        ({"runs": ("sb4",)}, "'sb4'"),
        ({"runs": ("sb3:sacc",)}, "Choose from"),
        ({"runs": ("sb3:ppo:jax",)}, "--ml_framework 'jax'"),
        ({"runs": ("sb3::",)}, "library[:algorithm[:framework]]"),
        ({"runs": ("sb3", "sb3")}, "appears twice"),
        ({"seeds": "a-b"}, "not a seed list"),
        ({"seeds": "4-1"}, "empty or too long"),
        ({"seeds": ()}, "--seeds is empty"),
        ({"iterations": None}, "exactly one budget"),
        ({"env_steps": 100}, "exactly one budget"),
        ({"iterations": 0}, "--iterations 0 must be a positive"),
        ({"iterations": None, "seconds": float("nan")}, "must be a positive"),
        ({"iterations": None, "env_steps": 1.5}, "must be an integer"),
        ({"executor": "threads"}, "--executor 'threads'"),
        ({"workers": 0}, "--workers 0"),
        ({"eval_episodes": -1}, "--eval_episodes -1"),
        ({"overrides": ("agent.no_such_key=1",)}, "no_such_key"),
        ({"runs": ("rsl_rl",)}, "no cell to run"),
        ({"runs": (BenchRun("sb3", overrides=("agent.learning_rate=0.001",)),)}, "no variant name"),
        ({"tasks": (), "suite": "mujcoo"}, "suite 'mujcoo' is unknown. Did you mean 'mujoco'?"),
        ({"tasks": (), "suite": 5}, "suite '5' is unknown"),
        ({"suite": "classic"}, "give --suite or --tasks, not both"),
        ({"tasks": (), "iterations": None}, "--tasks is empty"),
    ],
)
def test_a_bad_bench_is_one_user_error_before_anything_exists(tmp_path, fields, fragment):
    with pytest.raises(UserError) as caught:
        plan(tmp_path, **fields)
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_spec_file_gives_the_same_request_as_its_fields(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "tasks: [rlrun/CartPole-v1]\n"
        "runs:\n"
        "  - sb3\n"
        "  - {library: sb3, variant: fast, overrides: [agent.learning_rate=0.001]}\n"
        "seeds: 0-2\n"
        "iterations: 2\n",
        encoding="utf-8",
    )
    request = load_spec(spec, out=str(tmp_path / "out"))
    assert request.tasks == ("rlrun/CartPole-v1",)
    assert request.runs == ("sb3", BenchRun("sb3", variant="fast", overrides=("agent.learning_rate=0.001",)))
    assert parse_seeds(request.seeds) == (0, 1, 2)
    with hermetic_call() as call:
        planned = plan_bench(call, request)
    assert {cell.run for cell in planned.cells} == {"sb3/ppo", "sb3/ppo[fast]"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("tasks: [a]\nlibraries: [sb3]\n", "bench spec key 'libraries' is unknown"),
        ("tasks: [a]\nruns: [{library: sb3, lr: 1}]\n", "bench run key 'lr' is unknown"),
        ("- a\n", "must be a mapping"),
        ("tasks: [a\n", "not valid YAML"),
        ("tasks: 3\n", "must be a list"),
    ],
)
def test_a_bad_spec_file_names_the_key(tmp_path, text, fragment):
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidArgument, match=fragment):
        load_spec(spec)


def test_the_command_line_refuses_a_bad_bench_with_one_line_and_no_folder(tmp_path, capsys):
    out = tmp_path / "out"
    code = rlrun.main(["bench", "--tasks", "rlrun/CartPole-v1", "--libraries", "sb3", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "exactly one budget" in err
    assert not out.exists()


def _iteration_sizes(planned) -> dict[tuple[str, str], int]:
    sizes = {}
    with hermetic_call() as call:
        for cell in planned.cells:
            trained = plan_train(call, cell.request)
            sizes[cell.request.task, cell.run] = trained.env_steps_per_iteration
    return sizes


@pytest.mark.filterwarnings("ignore:RL Zoo's ppo entry")  # RL Zoo entries rlrun refuses, with a note
def test_a_suite_fills_the_tasks_and_each_tasks_env_step_budget(tmp_path):
    from rlrun.benching.suites import installed
    from rlrun.reports.references import suite

    planned = plan(tmp_path, tasks=(), suite="classic", runs=("sb3",), iterations=None)
    budgets = {t.task: t.env_steps for t in suite("classic").tasks if not t.optional or installed(t.module)}
    assert [cell.request.task for cell in planned.cells] == list(budgets)
    assert list(budgets)[:4] == ["CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCarContinuous-v0"]
    sizes = _iteration_sizes(planned)
    for cell in planned.cells:
        budget, size = budgets[cell.request.task], sizes[cell.request.task, cell.run]
        assert cell.request.max_iterations == -(-budget // size), cell.request.task  # the fewest that cover it
    assert not (tmp_path / "out").exists()


@pytest.mark.filterwarnings("ignore:RL Zoo's ppo entry")  # RL Zoo entries rlrun refuses, with a note
def test_a_budget_given_beside_a_suite_applies_to_every_task(tmp_path):
    planned = plan(tmp_path, tasks=(), suite="classic", runs=("sb3",), iterations=2)
    assert {cell.request.max_iterations for cell in planned.cells} == {2}


def test_a_run_without_an_image_policy_is_skipped_on_an_atari_task_with_a_note(tmp_path):
    pytest.importorskip("ale_py")
    planned = plan(tmp_path, tasks=("ALE/Breakout-v5", "rlrun/Pendulum-v1"), runs=("sb3", "rsl_rl"), seeds="0")
    assert {(cell.request.task, cell.run) for cell in planned.cells} == {
        ("ALE/Breakout-v5", "sb3/ppo"),
        ("rlrun/Pendulum-v1", "sb3/ppo"),
        ("rlrun/Pendulum-v1", "rsl_rl/ppo"),
    }
    (row,) = planned.skipped
    assert row["status"] == "skipped" and row["task"] == "ALE/Breakout-v5" and row["library"] == "rsl_rl"
    assert row["note"] == "rsl_rl has no policy for ALE/Breakout-v5's image observations"
    assert not (tmp_path / "out").exists()


def test_a_suite_whose_envs_are_not_installed_is_one_line_naming_the_install(tmp_path, monkeypatch):
    from rlrun.benching import suites

    installed = suites.installed
    monkeypatch.setattr(suites, "installed", lambda module: module != "ale_py" and installed(module))
    with pytest.raises(InvalidArgument) as caught:
        plan(tmp_path, tasks=(), suite="atari-5", iterations=None)
    message = str(caught.value)
    assert "\n" not in message and "suite 'atari-5' needs ale_py" in message
    assert "pip install 'rlrun[atari]'" in message and "ALE/BattleZone-v5" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.filterwarnings("ignore:RL Zoo's ppo entry")  # RL Zoo entries rlrun refuses, with a note
def test_a_spec_file_takes_a_suite(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("suite: classic\nruns: [sb3]\nseeds: 0-1\n", encoding="utf-8")
    request = load_spec(spec, out=str(tmp_path / "out"))
    assert request.suite == "classic" and request.tasks == ()
    with hermetic_call() as call:
        planned = plan_bench(call, request)
    assert {cell.request.task for cell in planned.cells} >= {"CartPole-v1", "Pendulum-v1"}
    assert len(planned.cells) == 2 * len({cell.request.task for cell in planned.cells})
