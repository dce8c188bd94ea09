"""The rl_games adapter: it learns, plays back, leaves nothing behind over many calls, and is order independent."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import rlrun
from rlrun import configs
from rlrun.api.planning import pick_threads
from rlrun.envs import EpisodeStatistics, make_env
from rlrun.errors import CorruptCheckpoint, InvalidArgument
from rlrun.hermetic import GUARDS, census, hermetic_call
from rlrun.libraries import rl_games, rl_games_checkpoints
from rlrun.libraries.base import TrainJob
from support import assert_bitwise_equal, assert_order_independent

pytest.importorskip("rl_games")

SMALL = (
    "agent.params.config.horizon_length=8",
    "agent.params.config.minibatch_size=32",
    "agent.params.network.mlp.units=[16,16]",
)
"""With 4 envs: one epoch is 32 env steps and two mini-batches, so a few epochs keep a test short."""


def small_train(log_root, task="rlrun/Pendulum-v1", progress=None, **fields):
    fields = {"num_envs": 4, "max_iterations": 2, "seed": 3, **fields}
    fields["overrides"] = (*SMALL, *fields.get("overrides", ()))
    request = rlrun.TrainRequest(task=task, library="rl_games", log_root=str(log_root), **fields)
    return rlrun.train(request, progress=progress)


def model_weights(checkpoint):
    return rl_games_checkpoints.read_checkpoint(Path(checkpoint))["model"]


# --- learning -----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_learns_cartpole_and_plays_it_back(log_root):
    task = "rlrun/CartPole-v1"
    trained = rlrun.train(rlrun.TrainRequest(task=task, library="rl_games", seed=1, log_root=str(log_root)))
    assert trained.iterations == 45 and trained.num_envs == 128  # the tuned configuration
    assert trained.mean_return >= 400, f"mean return {trained.mean_return} after {trained.env_steps} steps"

    played = rlrun.play(rlrun.PlayRequest(task=task, library="rl_games", num_episodes=20, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint
    assert played.mean_return >= 400, f"played returns {played.returns}"


class ReturnRecorder:
    """A progress display that keeps every mean return it is shown."""

    def start(self, label, total_env_steps, env_steps_per_iteration):
        self.returns = []

    def update(self, env_steps, mean_return):
        if mean_return is not None:
            self.returns.append(mean_return)

    def stop(self):
        pass


@pytest.mark.slow
def test_improves_clearly_on_pendulum(log_root):
    recorder = ReturnRecorder()
    request = rlrun.TrainRequest(
        task="rlrun/Pendulum-v1", library="rl_games", seed=1, max_iterations=25, log_root=str(log_root)
    )
    trained = rlrun.train(request, progress=recorder)
    first, last = recorder.returns[0], trained.mean_return
    assert first < -900, f"the first episodes already returned {first}"  # a swing-up starts far below -200
    assert last >= -500 and last - first >= 400, f"mean return {first} -> {last} after {trained.env_steps} steps"


# --- many calls, order ------------------------------------------------------------------------------------------


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def open_paths():
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor listdir itself used
            continue
    return paths


def test_five_calls_in_one_process_leave_no_thread_fd_or_exit_hook_behind(log_root):
    small_train(log_root, max_iterations=1)  # the first call in the process imports rl_games
    before, threads, fds = census.snapshot(), threading.active_count(), open_fds()
    small_train(log_root)
    small_train(log_root, task="rlrun/CartPole-v1")
    for task in ("rlrun/Pendulum-v1", "rlrun/CartPole-v1"):
        rlrun.play(rlrun.PlayRequest(task=task, library="rl_games", num_envs=2, num_episodes=2, log_root=str(log_root)))
    small_train(log_root, resume=True)
    assert threading.active_count() == threads and open_fds() == fds
    assert census.compare(before, census.snapshot()) == []  # threads, fds, child processes, exit hooks, guards


A = {"task": "rlrun/CartPole-v1", "seed": 1, "num_envs": 16, "max_iterations": 4}
B = {"task": "rlrun/Pendulum-v1", "seed": 2, "num_envs": 8, "max_iterations": 3}
OVERRIDES = (
    "agent.params.config.horizon_length=16",
    "agent.params.config.minibatch_size=128",
    "agent.params.network.mlp.units=[32,32]",
)


@pytest.mark.slow
def test_a_run_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path):
    spec = {"library": "rl_games", "overrides": OVERRIDES}
    assert_order_independent(tmp_path, {**spec, **A}, {**spec, **B}, model_weights)


# --- adapter specifics ----------------------------------------------------------------------------------------


def test_seed_0_seeds_like_any_other_seed(log_root, monkeypatch):
    """rl_games seeds only `if self.seed:`; rlrun must seed 0 too, whatever the RNGs hold at that point."""
    from rl_games.torch_runner import Runner

    plain = small_train(log_root / "plain", seed=0)
    load_config = Runner.load_config

    def scrambled_load_config(self, params):
        random.seed(99)
        np.random.seed(99)
        torch.manual_seed(99)
        return load_config(self, params)

    monkeypatch.setattr(Runner, "load_config", scrambled_load_config)
    scrambled = small_train(log_root / "scrambled", seed=0)
    assert_bitwise_equal(model_weights(plain.checkpoint), model_weights(scrambled.checkpoint))
    other = model_weights(small_train(log_root / "other", seed=1).checkpoint)
    assert not all(torch.equal(value, other[key]) for key, value in model_weights(plain.checkpoint).items())


def test_nothing_is_written_outside_the_run_directory(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    result = small_train(tmp_path / "logs")
    assert list(cwd.iterdir()) == []
    assert list((tmp_path / "logs" / "rl_games").glob("*/*")) == [result.run_dir]
    written = {path.name for path in result.run_dir.iterdir() if not path.name.startswith("events.out.tfevents.")}
    assert written == {"console.log", "metrics.csv", "nn", "params", "run.json", "summaries"}
    assert len(list(result.run_dir.glob("events.out.tfevents.*.rlrun"))) == 1  # rlrun's own curves
    assert list((result.run_dir / "summaries").glob("events.out.tfevents.*"))


def test_checkpoints_are_rl_games_files_recorded_in_the_manifest(log_root):
    saves = ("agent.params.config.save_frequency=1", "agent.params.config.save_best_after=1")
    result = small_train(log_root, task="rlrun/CartPole-v1", max_iterations=5, overrides=saves)
    manifest = json.loads((result.run_dir / "run.json").read_text())
    files = [entry["file"] for entry in manifest["checkpoints"]]
    assert all(name.startswith("nn/") and name.endswith(".pth") for name in files)
    assert files[-1] == result.checkpoint.relative_to(result.run_dir).as_posix() and "_ep_5_" in files[-1]
    assert manifest["checkpoints"][-1]["iteration"] == 5
    assert {path.name for path in (result.run_dir / "nn").iterdir()} == {Path(name).name for name in files}
    best = result.run_dir / "nn" / "cartpole.pth"  # rl_games' best-so-far file holds a NumPy scalar
    assert isinstance(rl_games_checkpoints.read_checkpoint(best)["last_mean_rewards"], np.floating)
    request = rlrun.PlayRequest(task="rlrun/CartPole-v1", library="rl_games", checkpoint="best", log_root=str(log_root))
    assert rlrun.play(request).checkpoint.relative_to(result.run_dir).as_posix() in files


def test_resume_continues_for_max_iterations_more_epochs(log_root):
    first = small_train(log_root, max_iterations=2)
    resumed = small_train(log_root, max_iterations=2, resume=True)
    assert resumed.iterations == 4 and "_ep_4_" in resumed.checkpoint.name
    assert json.loads((resumed.run_dir / "run.json").read_text())["parent"]["checkpoint"] == str(first.checkpoint)


def torch_settings():
    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.benchmark,
        torch.get_num_threads(),
    )


class SettingsRecorder(ReturnRecorder):
    """A progress display that notes torch's process settings at every step of the training."""

    def start(self, *args):
        self.seen = set()

    def update(self, env_steps, mean_return):
        self.seen.add(torch_settings())


def test_rl_games_settings_hold_during_the_call_and_the_callers_return_after(log_root):
    caller = torch_settings()
    recorder = SettingsRecorder()
    result = small_train(log_root, max_iterations=1, progress=recorder)
    # TF32 and autotuning on; the threads are the call's own (rl_games' torch_threads: 0 leaves them alone)
    assert recorder.seen == {("high", True, True, pick_threads(None, 4))}
    assert torch_settings() == caller
    assert "torch.compile: Disabled" in (result.run_dir / "console.log").read_text()

    wanted = 1 if caller[3] != 1 else 2
    small_train(log_root, max_iterations=1, overrides=(f"agent.params.torch_threads={wanted}",), progress=recorder)
    assert {seen[3] for seen in recorder.seen} == {wanted} and torch_settings() == caller


def test_deterministic_turns_tf32_and_autotuning_off(log_root):
    recorder = SettingsRecorder()
    small_train(log_root, max_iterations=1, deterministic=True, progress=recorder)
    assert {seen[:3] for seen in recorder.seen} == {("highest", False, False)}


def test_the_adapter_closes_the_writer_itself(tmp_path):
    """Not left to tensorboardX's exit hook (which the scope would run at the end of the call)."""
    config = configs.apply_overrides(
        configs.load_agent_config("rl_games", "ppo", "rlrun/Pendulum-v1"),
        [item.removeprefix("agent.") for item in SMALL],
        scope="agent",
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with hermetic_call() as call:
        call.import_modules(rl_games.IMPORTS["torch"])
        env = EpisodeStatistics(make_env("rlrun/Pendulum-v1", 4))
        job = TrainJob(
            env=env,
            stats=env,
            config=configs.library_config(config),
            max_iterations=1,
            seed=0,
            device="cpu",
            run_dir=run_dir,
            save_checkpoint=lambda name, write, iteration: write(str(run_dir / name)) or run_dir / name,
        )
        with call.guarded():
            try:
                rl_games.train(job)
            finally:
                env.close()
            writers = [thread for thread in threading.enumerate() if type(thread).__name__ == "_EventLoggerThread"]
            assert writers == [] and not [path for path in open_paths() if "tfevents" in path]


def test_an_agent_that_cannot_act_in_the_action_space_is_refused(log_root):
    with pytest.raises(InvalidArgument, match="'a2c_continuous' is not rl_games' PPO agent for Discrete actions"):
        small_train(log_root, task="rlrun/CartPole-v1", overrides=("agent.params.algo.name=a2c_continuous",))


def test_the_vec_env_reports_time_outs_apart_from_terminations():
    env = make_env("rlrun/CartPole-v1", 3, env_kwargs={"max_episode_steps": 2})
    vec_env = rl_games.RlGamesVecEnv(env, seed=0)
    vec_env.reset()
    env.unwrapped.state[0, 2] = 1.0  # env 0: the pole is already past the angle limit, so it terminates
    _, _, dones, infos = vec_env.step(torch.zeros(3, dtype=torch.long))
    assert dones.dtype == torch.uint8 and dones.tolist() == [1, 0, 0] and infos["time_outs"].tolist() == [0, 0, 0]
    _, _, dones, infos = vec_env.step(torch.zeros(3, dtype=torch.long))
    assert dones.tolist() == [0, 1, 1] and infos["time_outs"].tolist() == [False, True, True]
    env.close()


def test_a_file_that_is_not_an_agent_checkpoint_is_refused(tmp_path):
    path = tmp_path / "agent.pth"
    torch.save({"model": {}}, path)
    with pytest.raises(CorruptCheckpoint, match="missing epoch, optimizer"):
        rl_games.check_checkpoint(path)
    torch.save({"model": {}, "epoch": 1, "optimizer": {}, "code": print}, path)
    with pytest.raises(CorruptCheckpoint, match="cannot be read"):
        rl_games.check_checkpoint(path)
    path.write_bytes(b"\x80\x04not a zip")
    with pytest.raises(CorruptCheckpoint, match="cannot be read"):
        rl_games.check_checkpoint(path)


def test_the_registries_guard_restores_every_registry():
    from rl_games.algos_torch import model_builder
    from rl_games.common import env_configurations, vecenv

    (guard,) = [guard for guard in GUARDS if guard.name == "rl_games registries"]
    before = census.snapshot()
    with hermetic_call(check_leaks=True) as call, call.guarded():
        vecenv.register("RLRUN_TEST", lambda config_name, num_actors, **kwargs: None)
        env_configurations.register("rlrun_test", {"vecenv_type": "RLRUN_TEST"})
        model_builder.register_network("rlrun_test", object)
        model_builder.register_model("rlrun_test", object)
        model_builder.NETWORK_REGISTRY.pop("testnet")
        env_configurations.configurations = {}
        assert guard.snapshot() != before[guard.name]
    assert census.compare(before, census.snapshot()) == []
    assert "rlrun_test" not in model_builder.MODEL_REGISTRY and "testnet" in model_builder.NETWORK_REGISTRY
    assert "RLRUN_TEST" not in vecenv.vecenv_config and "CartPole-v1" in env_configurations.configurations
