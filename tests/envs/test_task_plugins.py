"""Tasks from anywhere: Gymnasium's `module:id` form, and installed packages' `rlrun.tasks` entry points.

The package is made in the test: its modules and a dist-info with entry points on a temporary `sys.path`
entry, as pip would install it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import gymnasium
import pytest

import rlrun
from rlrun.envs import NATIVE_TASKS, make_env, resolve_task
from rlrun.envs import tasks as plugins
from rlrun.errors import MissingDependency, UnknownTask

PACKAGE = "rlrun_test_taskpkg"
DISTRIBUTION = "rlrun-test-taskpkg"
POINT_MASS = "rlrun_test/PluginPointMass-v0"
FAR_POINT_MASS = "rlrun_test/PluginFarPointMass-v0"
GYM_TASK = "RlrunTestShortPendulum-v0"

FILES = {
    "__init__.py": "",
    "point_mass.py": '''
        import numpy as np
        import torch
        from gymnasium import spaces

        from rlrun.envs import BatchedVectorEnv


        class PointMassVectorEnv(BatchedVectorEnv):
            """A unit mass on a line pushed towards 0; reward -|position|."""

            state_size = 2

            def __init__(self, num_envs, max_episode_steps=20, device="cpu", render_mode=None, start=1.0):
                self.start = start
                super().__init__(
                    num_envs,
                    max_episode_steps=max_episode_steps,
                    device=device,
                    render_mode=render_mode,
                    single_observation_space=spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32),
                    single_action_space=spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32),
                )

            def initial_state(self, n, options):
                position = torch.rand(n, generator=self.generator, dtype=torch.float64, device=self.device)
                return torch.stack(((2 * position - 1) * self.start, torch.zeros_like(position)))

            def advance(self, actions):
                position, velocity = self.components
                velocity += actions[:, 0].to(torch.float64).clamp(-1.0, 1.0) * 0.1
                position += velocity * 0.1
                return -position.abs().to(torch.float32), position.abs() < 0.05

            def observe(self, components):
                return components.T.to(torch.float32, memory_format=torch.contiguous_format)
    ''',
    "tasks.py": f'''
        from rlrun.envs import NativeTask

        POINT_MASS = NativeTask(
            "{POINT_MASS}", "{PACKAGE}.point_mass:PointMassVectorEnv", max_episode_steps=20, default_library="rsl_rl"
        )
        TASKS = (
            NativeTask(
                "{FAR_POINT_MASS}",
                "{PACKAGE}.point_mass:PointMassVectorEnv",
                max_episode_steps=40,
                default_library="rsl_rl",
                kwargs={{"start": 3.0}},
            ),
        )
        NOT_A_TASK = "rlrun_test/NotATask-v0"
        TAKEN = NativeTask("rlrun/Pendulum-v1", "{PACKAGE}.point_mass:PointMassVectorEnv", 20, "rsl_rl")
    ''',
    "gym_envs.py": f'''
        import gymnasium

        gymnasium.register(
            "{GYM_TASK}", entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv", max_episode_steps=16
        )
    ''',
    "needs_missing.py": "import rlrun_test_no_such_dependency\n",
}
ENTRY_POINTS = f"""
[rlrun.tasks]
point_mass = {PACKAGE}.tasks:POINT_MASS
far = {PACKAGE}.tasks:TASKS
missing_module = {PACKAGE}.no_such_module:TASKS
not_a_task = {PACKAGE}.tasks:NOT_A_TASK
taken = {PACKAGE}.tasks:TAKEN
"""


def forget_package() -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]
    gymnasium.registry.pop(GYM_TASK, None)


@pytest.fixture
def task_package(tmp_path, monkeypatch):
    """The package installed on a temporary `sys.path` entry, its entry points read; all gone afterwards."""
    root = tmp_path / "site"
    (root / PACKAGE).mkdir(parents=True)
    for name, text in FILES.items():
        (root / PACKAGE / name).write_text(textwrap.dedent(text), encoding="utf-8")
    info = root / f"{PACKAGE}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))
    plugins.load_task_plugins(reload=True)
    yield root
    monkeypatch.undo()
    forget_package()
    plugins.load_task_plugins(reload=True)
    assert POINT_MASS not in NATIVE_TASKS and POINT_MASS not in gymnasium.registry


# --- entry points -------------------------------------------------------------------------------------------


def test_an_installed_packages_tasks_are_registered_with_their_package(task_package):
    assert NATIVE_TASKS[POINT_MASS].max_episode_steps == 20 and NATIVE_TASKS[FAR_POINT_MASS].kwargs == {"start": 3.0}
    assert plugins.provider(NATIVE_TASKS[POINT_MASS]) == DISTRIBUTION
    assert plugins.provider(NATIVE_TASKS["rlrun/Pendulum-v1"]) == "rlrun"
    assert resolve_task(FAR_POINT_MASS) == FAR_POINT_MASS
    env = make_env(FAR_POINT_MASS, 2)
    assert env.start == 3.0 and env.max_episode_steps == 40
    env.close()


def test_broken_task_plugins_are_left_out_one_line_each_and_the_others_load(task_package):
    assert set(plugins.BROKEN) == {f"{name} ({DISTRIBUTION})" for name in ("missing_module", "not_a_task", "taken")}
    assert "ModuleNotFoundError" in plugins.BROKEN[f"missing_module ({DISTRIBUTION})"]
    assert "not a rlrun.envs.NativeTask" in plugins.BROKEN[f"not_a_task ({DISTRIBUTION})"]
    assert "'rlrun/Pendulum-v1' is already registered" in plugins.BROKEN[f"taken ({DISTRIBUTION})"]
    assert NATIVE_TASKS["rlrun/Pendulum-v1"].vector_entry_point == "rlrun.envs.pendulum:PendulumVectorEnv"
    assert all("\n" not in reason for reason in plugins.BROKEN.values())
    with pytest.raises(UnknownTask, match="Task plugins that failed to load: missing_module"):
        resolve_task("rlrun_test/NoSuchTask-v0")


def test_rlrun_list_shows_plugin_tasks_with_their_package_and_the_broken_ones(task_package, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert rlrun.main(["list", "tasks"]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if POINT_MASS in line]
    assert DISTRIBUTION in row and "rsl_rl" in row and "20" in row
    assert f"task plugin taken ({DISTRIBUTION}) left out: ValueError" in out


def test_a_plugin_task_trains_and_plays_like_rlruns_own(task_package, log_root):
    pytest.importorskip("rsl_rl")
    trained = rlrun.train(
        rlrun.TrainRequest(
            task=POINT_MASS,
            num_envs=4,
            max_iterations=1,
            device="cpu",
            log_root=str(log_root),
            overrides=("agent.num_steps_per_env=8", "env.max_episode_steps=8"),
        )
    )
    assert trained.library == "rsl_rl" and trained.episodes > 0  # the task's default library
    played = rlrun.play(rlrun.PlayRequest(task=POINT_MASS, num_episodes=4, device="cpu", log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint and len(played.returns) >= 4


def test_entry_points_are_not_read_when_rlrun_is_imported():
    code = "import json, sys, rlrun, rlrun.envs, rlrun.libraries; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    modules = json.loads(done.stdout)
    assert "rlrun.envs.plugins" not in modules and "rlrun.libraries.plugins" not in modules


# --- Gymnasium's module:id ----------------------------------------------------------------------------------


def test_module_colon_id_imports_the_module_in_the_plan_and_its_registration_stays(task_package, tmp_path):
    task = f"{PACKAGE}.gym_envs:{GYM_TASK}"
    for _ in range(2):  # the second call finds the module imported and the id registered
        result = rlrun.random_agent(rlrun.AgentRequest(task=task, num_envs=2, num_episodes=2, seed=0))
        assert result.task == GYM_TASK and all(length == 16 for length in result.lengths)
    assert GYM_TASK in gymnasium.registry  # an import effect: it belongs to the import, not the call


def test_module_colon_id_trains_with_a_library(task_package, log_root):
    pytest.importorskip("rsl_rl")
    result = rlrun.train(
        rlrun.TrainRequest(
            task=f"{PACKAGE}.gym_envs:{GYM_TASK}",
            library="rsl_rl",
            num_envs=2,
            max_iterations=1,
            device="cpu",
            log_root=str(log_root),
            overrides=("agent.num_steps_per_env=16",),
        )
    )
    assert result.task == GYM_TASK and result.episodes == 2
    assert json.loads((result.run_dir / "run.json").read_text())["task"] == GYM_TASK


def test_a_missing_module_is_one_line_naming_it_and_exit_code_2(capsys):
    assert rlrun.main(["random", "--task", "rlrun_test_no_such_package.envs:MyTask-v0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'rlrun_test_no_such_package.envs'" in err
    assert "no module named 'rlrun_test_no_such_package'" in err
    with pytest.raises(UnknownTask, match=r"there is no module 'rlrun_test_no_such_package\.envs'"):
        resolve_task("rlrun_test_no_such_package.envs:MyTask-v0")


def test_a_module_that_lacks_a_dependency_or_the_id_says_so(task_package):
    with pytest.raises(MissingDependency, match="imports 'rlrun_test_no_such_dependency', which is not installed"):
        rlrun.random_agent(rlrun.AgentRequest(task=f"{PACKAGE}.needs_missing:{GYM_TASK}", num_episodes=1))
    with pytest.raises(UnknownTask, match=f"module '{PACKAGE}.tasks' registers no such id"):
        rlrun.random_agent(rlrun.AgentRequest(task=f"{PACKAGE}.tasks:RlrunTestNothing-v0", num_episodes=1))


def test_a_registered_module_colon_id_is_found_as_it_is(task_package):
    assert resolve_task(f"{PACKAGE}.gym_envs:{GYM_TASK}") == GYM_TASK
    assert resolve_task(GYM_TASK) == GYM_TASK  # once imported, the plain id works too


def test_a_bench_over_a_module_colon_id_task_is_census_clean(task_package, tmp_path):
    """The bench resolves `module:id` through the call's imports too: the registration is the import's, and the
    leak detector (on in tests) sees no change to Gymnasium's registry."""
    pytest.importorskip("rsl_rl")
    result = rlrun.bench(
        rlrun.BenchRequest(
            tasks=(f"{PACKAGE}.gym_envs:{GYM_TASK}",),
            runs=("rsl_rl",),
            seeds=(0,),
            iterations=1,
            num_envs=2,
            overrides=("agent.num_steps_per_env=16",),
            out=str(tmp_path / "bench"),
            report=False,
        )
    )
    assert (result.completed, result.failed) == (1, 0)
    assert GYM_TASK in gymnasium.registry
