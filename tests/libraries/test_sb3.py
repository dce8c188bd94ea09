"""The Stable-Baselines3 adapter: its VecEnv, bootstrapping at time-outs, checkpoints, learning, order independence."""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import shutil
import zipfile
from importlib import resources

import gymnasium
import numpy as np
import pytest
import torch
import yaml

pytest.importorskip("stable_baselines3")
from stable_baselines3 import A2C, PPO, SAC, TD3
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecCheckNan, VecEnv

import rlrun
from rlrun.configs import library_config
from rlrun.envs import make_env
from rlrun.errors import CorruptCheckpoint, InvalidArgument
from rlrun.libraries import sb3, sb3_checkpoints
from support import assert_bitwise_equal, assert_order_independent

CARTPOLE, PENDULUM = "rlrun/CartPole-v1", "rlrun/Pendulum-v1"
TINY_PPO = ("agent.n_steps=8", "agent.batch_size=32", "agent.n_epochs=2", "agent.policy_kwargs.net_arch=[16,16]")
TINY_OFF_POLICY = ("agent.learning_starts=16", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")


# --- the VecEnv -----------------------------------------------------------------------------------------------


def check_vec_env(vec_env: VecEnv, steps: int) -> int:
    """SB3's `check_env` checks, for a vector env: what reset and step return (through SB3's `VecCheckNan`).

    Returns the number of episodes that ended.
    """
    n = vec_env.num_envs
    observation_space, action_space = vec_env.observation_space, vec_env.action_space
    checked = VecCheckNan(vec_env, raise_exception=True, check_inf=True)
    vec_env.seed(0)
    observations = checked.reset()
    assert isinstance(observations, np.ndarray) and observations.shape == (n, *observation_space.shape)
    assert observations.dtype == observation_space.dtype and all(map(observation_space.contains, observations))
    action_space.seed(0)
    ended = 0
    for _ in range(steps):
        observations, rewards, dones, infos = checked.step(np.stack([action_space.sample() for _ in range(n)]))
        assert observations.shape == (n, *observation_space.shape) and observations.dtype == observation_space.dtype
        assert rewards.shape == (n,) and rewards.dtype == np.float32
        assert dones.shape == (n,) and dones.dtype == np.bool_
        assert isinstance(infos, list) and len(infos) == n and all(isinstance(info, dict) for info in infos)
        for index, info in enumerate(infos):
            assert bool(info) == dones[index], "infos are filled for the envs that ended, and only for them"
            if dones[index]:
                assert info["terminal_observation"].shape == observation_space.shape
                assert isinstance(info["TimeLimit.truncated"], bool) and info["episode"]["l"] > 0
        ended += int(dones.sum())
    return ended


@pytest.mark.parametrize("task", [CARTPOLE, PENDULUM, "rlrun/CartPoleContinuous-v1", "Pendulum-v1"])
def test_the_vec_env_passes_sb3s_checks(task):
    env = make_env(task, 3, env_kwargs={"max_episode_steps": 20})
    vec_env = sb3.Sb3VecEnv(env)
    assert isinstance(vec_env, VecEnv) and vec_env.num_envs == 3
    assert vec_env.observation_space is env.single_observation_space
    assert vec_env.action_space is env.single_action_space
    assert vec_env.get_attr("render_mode") == [None] * 3 and vec_env.env_is_wrapped(gymnasium.Wrapper) == [False] * 3
    assert check_vec_env(vec_env, 45) >= 3
    vec_env.close()


def test_the_vec_env_steps_exactly_like_sb3s_own_dummy_vec_env():
    """Gymnasium's CartPole through rlrun (SyncVectorEnv, torch, this VecEnv) and through SB3's DummyVecEnv."""
    n, limit = 4, 15
    ours = sb3.Sb3VecEnv(make_env("CartPole-v1", n, env_kwargs={"max_episode_steps": limit}))
    reference = DummyVecEnv([lambda: gymnasium.make("CartPole-v1", max_episode_steps=limit)] * n)
    ours.seed(3)
    reference.seed(3)
    assert np.array_equal(ours.reset(), reference.reset())
    ends = {True: 0, False: 0}
    for actions in np.random.default_rng(0).integers(0, 2, size=(60, n)):
        observations, rewards, dones, infos = ours.step(actions)
        expected = reference.step(actions)
        assert np.array_equal(observations, expected[0]) and np.array_equal(rewards, expected[1])
        assert rewards.dtype == expected[1].dtype and np.array_equal(dones, expected[2])
        for index in np.flatnonzero(dones):
            info, expected_info = infos[index], expected[3][index]
            assert np.array_equal(info["terminal_observation"], expected_info["terminal_observation"])
            assert info["TimeLimit.truncated"] == expected_info["TimeLimit.truncated"]
            ends[info["TimeLimit.truncated"]] += 1
    assert ends[True] > 0 and ends[False] > 0, "both truncations and terminations were compared"
    ours.close()
    reference.close()


def test_ended_envs_report_the_final_observation_and_whether_they_were_truncated():
    env = make_env("rlrun/CartPoleContinuous-v1", 3, env_kwargs={"max_episode_steps": 2})
    vec_env = sb3.Sb3VecEnv(env)
    vec_env.seed(0)
    vec_env.reset()
    env.unwrapped.state[0, 2] = 1.0  # env 0: the pole is already past the angle limit, so it terminates
    observations, _, dones, infos = vec_env.step(np.zeros((3, 1), dtype=np.float32))
    assert dones.tolist() == [True, False, False] and infos[1:] == [{}, {}]
    assert infos[0]["TimeLimit.truncated"] is False and infos[0]["terminal_observation"][2] > 0.9
    assert abs(observations[0, 2]) <= 0.05  # the next episode's first observation
    observations, _, dones, infos = vec_env.step(np.zeros((3, 1), dtype=np.float32))
    assert dones.tolist() == [False, True, True] and infos[0] == {}
    for index in (1, 2):
        assert infos[index]["TimeLimit.truncated"] is True and infos[index]["episode"]["l"] == 2
        assert not np.array_equal(infos[index]["terminal_observation"], observations[index])
    vec_env.close()


class RolloutRecorder(BaseCallback):
    """Records each step's rewards and infos as the env returned them, and the rollout as SB3 stored it.

    `before_rollout()` runs once, after SB3 reset the env and before the first step.
    """

    def __init__(self, before_rollout):
        super().__init__()
        self.before_rollout = before_rollout
        self.rewards, self.infos = [], []

    def _on_rollout_start(self) -> None:
        if self.before_rollout is not None:  # the first rollout only
            self.before_rollout()
            self.before_rollout = None

    def _on_step(self) -> bool:
        self.rewards.append(self.locals["rewards"].copy())  # before SB3 adds bootstrapped values in place
        self.infos.append(self.locals["infos"])
        return True

    def _on_rollout_end(self) -> None:
        if hasattr(self.model, "rollout_buffer"):
            self.buffer_rewards = self.model.rollout_buffer.rewards.copy()
            self.policy = copy.deepcopy(self.model.policy)  # the values SB3 bootstrapped with, before the update
            self.next_observations = self.model._last_obs.copy()


def terminate_env_0(env):
    """Put env 0's pole past the angle limit: its episode terminates at the next step."""
    return lambda: env.unwrapped.state.__setitem__((0, 2), 0.5)


def test_ppo_bootstraps_a_truncated_episode_from_its_final_observation_and_a_terminated_one_not_at_all():
    env = make_env("rlrun/CartPoleContinuous-v1", 2, env_kwargs={"max_episode_steps": 3})
    model = PPO("MlpPolicy", sb3.Sb3VecEnv(env), n_steps=3, batch_size=6, n_epochs=1, gamma=0.9)
    recorder = RolloutRecorder(terminate_env_0(env))
    model.learn(6, callback=recorder)  # one rollout: env 0 terminates at step 0, env 1 is truncated at step 2

    def value(observation):
        with torch.no_grad():
            return float(recorder.policy.predict_values(torch.as_tensor(observation[None]))[0, 0])

    assert recorder.infos[0][0]["TimeLimit.truncated"] is False
    assert recorder.buffer_rewards[0, 0] == recorder.rewards[0][0]  # terminated: nothing added
    assert recorder.infos[2][1]["TimeLimit.truncated"] is True
    final, next_start = recorder.infos[2][1]["terminal_observation"], recorder.next_observations[1]
    assert recorder.buffer_rewards[2, 1] == pytest.approx(recorder.rewards[2][1] + 0.9 * value(final), abs=1e-6)
    assert value(final) != pytest.approx(value(next_start), abs=1e-4), "the test must tell the two apart"
    assert np.array_equal(recorder.buffer_rewards[:2, 1], np.array([recorder.rewards[0][1], recorder.rewards[1][1]]))
    env.close()


def test_sac_stores_the_final_observation_and_the_time_out_of_a_truncated_transition():
    env = make_env("rlrun/CartPoleContinuous-v1", 2, env_kwargs={"max_episode_steps": 3})
    model = SAC("MlpPolicy", sb3.Sb3VecEnv(env), buffer_size=10, learning_starts=100)
    recorder = RolloutRecorder(terminate_env_0(env))
    model.learn(6, callback=recorder)  # 3 warm-up steps of 2 envs, no update
    buffer = model.replay_buffer
    assert buffer.dones[:3].tolist() == [[1, 0], [0, 0], [0, 1]]
    assert buffer.timeouts[:3].tolist() == [[0, 0], [0, 0], [0, 1]]  # only the truncation is bootstrapped
    assert np.array_equal(buffer.next_observations[0, 0], recorder.infos[0][0]["terminal_observation"])
    assert np.array_equal(buffer.next_observations[2, 1], recorder.infos[2][1]["terminal_observation"])
    assert not np.array_equal(buffer.next_observations[2, 1], model._last_obs[1])  # not the next episode's start
    assert np.array_equal(buffer.next_observations[1, 1], buffer.observations[2, 1])
    env.close()


# --- iterations and configurations ----------------------------------------------------------------------------


def test_an_iteration_is_a_rollout_on_policy_and_a_train_freq_cycle_off_policy():
    assert sb3.env_steps_per_iteration({"n_steps": 32}, 16) == 512
    assert sb3.env_steps_per_iteration({"train_freq": 4}, 8) == 32
    assert sb3.env_steps_per_iteration({"train_freq": [2, "step"]}, 8) == 16
    with pytest.raises(InvalidArgument, match=r"agent\.train_freq \[1, 'episode'\].*positive integer"):
        sb3.env_steps_per_iteration({"train_freq": [1, "episode"]}, 8)


def test_configuration_names_become_objects_and_bad_names_are_refused():
    space = gymnasium.spaces.Box(-1.0, 1.0, (2,))
    config = {
        "policy": "MlpPolicy",
        "save_interval": 5,
        "noise_type": "normal",
        "noise_std": 0.2,
        "learning_rate": "lin_1e-3",
        "train_freq": [4, "step"],
        "policy_kwargs": {"activation_fn": "ELU", "net_arch": [8]},
    }
    kwargs = sb3.constructor_kwargs(config, "td3", space)
    assert set(kwargs) == {"learning_rate", "train_freq", "policy_kwargs", "action_noise"}
    assert kwargs["learning_rate"](1.0) == pytest.approx(1e-3) and kwargs["learning_rate"](0.5) == pytest.approx(5e-4)
    assert kwargs["train_freq"] == (4, "step") and kwargs["policy_kwargs"]["activation_fn"] is torch.nn.ELU
    np.testing.assert_allclose(kwargs["action_noise"]._sigma, [0.2, 0.2])
    assert "action_noise" not in sb3.constructor_kwargs(config, "ppo", space)
    assert sb3.constructor_kwargs({**config, "learning_rate": "3e-4"}, "sac", space)["learning_rate"] == 3e-4
    for key, value, message in (
        ("policy_kwargs", {"activation_fn": "Tanhh"}, "activation_fn 'Tanhh' is not a torch.nn module"),
        ("learning_rate", "linear", "'linear' is neither a number nor a linear schedule"),
        ("noise_type", "pink", "noise_type 'pink' is not one of"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            sb3.constructor_kwargs({**config, key: value}, "sac", space)
        with pytest.raises(InvalidArgument, match=message):  # what rlrun calls before a run starts
            sb3.env_steps_per_iteration({**config, key: value}, 4)


def test_a_configuration_the_adapter_cannot_read_is_refused_before_anything_changes(log_root, capsys):
    argv = ["train", "--task", CARTPOLE, "--library", "sb3", "--log_root", str(log_root)]
    assert rlrun.main([*argv, "agent.policy_kwargs.activation_fn=Tanhh"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "activation_fn=Tanhh': this key selects code" in line and "Did you mean 'Tanh'?" in line
    assert not log_root.exists()


def test_every_shipped_configuration_builds_its_algorithm():
    root = resources.files("rlrun.configs") / "sb3"
    for algorithm, cls in {"ppo": PPO, "a2c": A2C, "sac": SAC, "td3": TD3}.items():
        for path in [root / algorithm / "default.yaml", *(root / algorithm / "rlrun").iterdir()]:
            config = yaml.safe_load(path.read_text())
            task = PENDULUM if path.name == "default.yaml" else f"rlrun/{path.name.removesuffix('.yaml')}"
            env = make_env(task, config["num_envs"])
            vec_env = sb3.Sb3VecEnv(env)
            kwargs = sb3.constructor_kwargs(library_config(config), algorithm, vec_env.action_space)
            if "buffer_size" in kwargs:
                kwargs["buffer_size"] = 100
            model = cls(config["policy"], vec_env, **kwargs)
            assert model.n_envs == config["num_envs"] and sb3.env_steps_per_iteration(config, 1) >= 1, path
            env.close()


# --- runs, checkpoints, play --------------------------------------------------------------------------------


def train(log_root, task=CARTPOLE, algorithm="ppo", overrides=TINY_PPO, **kwargs):
    request = {"num_envs": 4, "max_iterations": 3, "seed": 1, **kwargs}
    return rlrun.train(
        rlrun.TrainRequest(
            task=task, library="sb3", algorithm=algorithm, log_root=str(log_root), overrides=overrides, **request
        )
    )


def test_a_run_keeps_sb3s_zip_checkpoints_its_tensorboard_events_and_its_console_table(log_root):
    result = train(log_root, overrides=(*TINY_PPO, "agent.save_interval=2"))
    assert result.iterations == 3 and result.env_steps == 3 * 8 * 4
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert [(entry["file"], entry["iteration"]) for entry in manifest["checkpoints"]] == [
        ("model_2.zip", 2),
        ("model_3.zip", 3),
    ]
    assert result.checkpoint == result.run_dir / "model_3.zip" and manifest["algorithm"] == "ppo"
    files = {path.name for path in result.run_dir.iterdir() if path.is_file()}
    assert {"model_2.zip", "model_3.zip", "run.json", "console.log"} <= files
    assert not [name for name in files if name.endswith((".tmp", ".zip.zip"))]
    assert list(result.run_dir.glob("events.out.tfevents.*")), "TensorBoard events go to the run directory"
    assert "ep_rew_mean" in (result.run_dir / "console.log").read_text()  # SB3's table, with episode returns
    model = PPO.load(result.checkpoint)  # SB3's own loader reads rlrun's checkpoints
    assert model.num_timesteps == result.env_steps
    assert sb3_checkpoints.saved_algorithm(result.checkpoint) == "ppo"


def test_checkpoints_say_which_algorithm_saved_them(log_root):
    for algorithm, overrides in (("a2c", ("agent.policy_kwargs.net_arch=[8]",)), ("td3", TINY_OFF_POLICY)):
        result = train(log_root, PENDULUM, algorithm, overrides, max_iterations=2)
        assert sb3_checkpoints.saved_algorithm(result.checkpoint) == algorithm


def test_the_default_library_of_discrete_cartpole_is_sb3_and_it_plays_back(log_root):
    argv = ["train", "--task", CARTPOLE, "--num_envs", "4", "--max_iterations", "2", "--log_root", str(log_root)]
    assert rlrun.main([*argv, *TINY_PPO]) == 0
    (run_dir,) = (log_root / "sb3").glob("*/*")
    played = rlrun.play(rlrun.PlayRequest(task=CARTPOLE, num_episodes=3, num_envs=3, log_root=str(log_root)))
    assert played.library == "sb3" and played.checkpoint == run_dir / "model_2.zip" and len(played.returns) == 3
    sampled = rlrun.play(
        rlrun.PlayRequest(task=CARTPOLE, num_episodes=3, num_envs=3, log_root=str(log_root), deterministic=False)
    )
    assert len(sampled.returns) == 3


def test_a_run_resumes_from_its_checkpoint(log_root):
    first = train(log_root, max_iterations=2)
    resumed = train(log_root, max_iterations=1, resume=True)
    assert resumed.iterations == first.iterations + 1 and resumed.checkpoint.name == f"model_{resumed.iterations}.zip"
    assert PPO.load(resumed.checkpoint).num_timesteps == first.env_steps + resumed.env_steps


def test_an_algorithm_that_cannot_act_in_the_space_is_refused_in_one_line(log_root, capsys):
    argv = ["train", "--task", CARTPOLE, "--library", "sb3", "--algorithm", "sac", "--log_root", str(log_root)]
    assert rlrun.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "sb3 sac cannot act in rlrun/CartPole-v1's Discrete action space" in line and "--algorithm ppo" in line


def test_playing_a_checkpoint_with_another_algorithm_names_the_right_one(log_root):
    trained = train(log_root, max_iterations=1)
    request = rlrun.PlayRequest(
        task=CARTPOLE, library="sb3", algorithm="a2c", checkpoint=str(trained.checkpoint), log_root=str(log_root)
    )
    with pytest.raises(InvalidArgument, match=r"holds an SB3 PPO model, not A2C; pass --algorithm ppo"):
        rlrun.play(request)


def test_files_that_are_not_sb3_models_are_refused(tmp_path):
    path = tmp_path / "model.zip"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CorruptCheckpoint, match="cannot be read as a Stable-Baselines3 model"):
        sb3.check_checkpoint(path)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", "{}")
    with pytest.raises(CorruptCheckpoint, match=r"missing policy\.pth, _stable_baselines3_version"):
        sb3.check_checkpoint(path)
    state = io.BytesIO()
    torch.save({"weight": torch.zeros(1)}, state)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", json.dumps({"policy_class": {"__module__": "somewhere.else"}}))
        archive.writestr("policy.pth", state.getvalue())
        archive.writestr("_stable_baselines3_version", "2.9.2")
    with pytest.raises(CorruptCheckpoint, match=r"policy class from 'somewhere\.else'"):
        sb3.check_checkpoint(path)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", json.dumps({"policy_class": {"__module__": "stable_baselines3.sac.policies"}}))
        archive.writestr("policy.pth", pickle.dumps(os.system, protocol=2))  # code, not tensors
        archive.writestr("_stable_baselines3_version", "2.9.2")
    with pytest.raises(CorruptCheckpoint, match="cannot be read"):
        sb3.check_checkpoint(path)


# --- learning -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ppo_learns_cartpole_and_plays_it_back(log_root):
    trained = rlrun.train(rlrun.TrainRequest(task=CARTPOLE, library="sb3", seed=1, log_root=str(log_root)))
    assert trained.mean_return >= 400, f"mean return {trained.mean_return} after {trained.env_steps} steps"
    played = rlrun.play(rlrun.PlayRequest(task=CARTPOLE, library="sb3", num_episodes=20, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint
    assert played.mean_return >= 400, f"played returns {played.returns}"


@pytest.mark.slow
def test_sac_learns_pendulum_and_plays_it_back(log_root):
    request = rlrun.TrainRequest(task=PENDULUM, library="sb3", algorithm="sac", seed=1, log_root=str(log_root))
    trained = rlrun.train(request)
    assert trained.mean_return >= -400, f"mean return {trained.mean_return} after {trained.env_steps} steps"
    played = rlrun.play(rlrun.PlayRequest(task=PENDULUM, library="sb3", num_episodes=20, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint
    assert played.mean_return >= -400, f"played returns {played.returns}"


# --- order independence ---------------------------------------------------------------------------------------

A = {"task": CARTPOLE, "algorithm": "ppo", "seed": 1, "num_envs": 8, "max_iterations": 3, "overrides": TINY_PPO}
B = {"task": PENDULUM, "algorithm": "sac", "seed": 2, "num_envs": 4, "max_iterations": 30, "overrides": TINY_OFF_POLICY}


def weights(checkpoint):
    with zipfile.ZipFile(checkpoint) as archive:
        return torch.load(io.BytesIO(archive.read("policy.pth")), weights_only=True)


@pytest.mark.slow
def test_a_run_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path):
    assert_order_independent(tmp_path, {"library": "sb3", **A}, {"library": "sb3", **B}, weights)


def test_resuming_from_a_copied_checkpoint_of_another_task_is_one_user_error(tmp_path):
    import shutil

    import rlrun
    from rlrun.errors import UnsupportedTask

    small = ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")
    common = {"library": "sb3", "num_envs": 2, "max_iterations": 1, "overrides": small}
    trained = rlrun.train(rlrun.TrainRequest(task="rlrun/Pendulum-v1", log_root=str(tmp_path / "a"), **common))
    copy = tmp_path / "elsewhere" / trained.checkpoint.name
    copy.parent.mkdir()
    shutil.copy(trained.checkpoint, copy)
    request = rlrun.TrainRequest(
        task="rlrun/CartPoleContinuous-v1", resume=True, checkpoint=str(copy), log_root=str(tmp_path / "b"), **common
    )
    with pytest.raises(UnsupportedTask, match="does not fit this task") as caught:
        rlrun.train(request)
    assert "\n" not in str(caught.value)


# --- checkpoints read as data ---------------------------------------------------------------------------------


class Payload:
    """Unpickled (as SB3's `load` unpickles `data` with cloudpickle), it writes `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def plant_payloads(checkpoint, marker):
    """Replace every cloudpickled value of the zip's `data` (policy class, spaces, schedules) by `Payload(marker)`,
    keeping the plain fields SB3 writes beside them."""
    import base64

    with zipfile.ZipFile(checkpoint) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    payload = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    pickled = {key for key, value in data.items() if isinstance(value, dict) and ":serialized:" in value}
    assert {"policy_class", "observation_space", "action_space", "lr_schedule"} <= pickled
    for key in pickled | {"learning_rate"}:  # a number in rlrun's files; a schedule is pickled
        value = data[key] if isinstance(data[key], dict) else {":type:": "<class 'function'>"}
        data[key] = {**value, ":serialized:": payload}
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(checkpoint, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)


@pytest.mark.parametrize("algorithm", ["ppo", "sac"])
def test_cloudpickled_payloads_in_data_are_never_decoded(algorithm, tmp_path):
    """A run's checkpoint and the same file handed on its own, every pickled value in its `data` a payload:
    play, export and --resume work from the configuration and the zip's tensors, and nothing runs."""
    task, overrides = (CARTPOLE, TINY_PPO) if algorithm == "ppo" else (PENDULUM, TINY_OFF_POLICY)
    root = tmp_path / "logs"
    trained = train(root, task, algorithm, overrides, max_iterations=2)
    marker = tmp_path / "marker"
    plant_payloads(trained.checkpoint, marker)
    lone = tmp_path / "shared" / "model.zip"
    lone.parent.mkdir()
    shutil.copy(trained.checkpoint, lone)
    common = {"task": task, "library": "sb3", "algorithm": algorithm, "log_root": str(root)}
    for checkpoint, extra, iterations in ((trained.checkpoint, (), 3), (lone, overrides, 1)):  # a lone file: from 0
        played = rlrun.play(
            rlrun.PlayRequest(checkpoint=str(checkpoint), num_episodes=2, num_envs=2, overrides=extra, **common)
        )
        assert len(played.returns) == 2 and not marker.exists()
        exported = rlrun.export(rlrun.ExportRequest(checkpoint=str(checkpoint), overrides=extra, **common))
        assert exported.files and not marker.exists()
        resumed = rlrun.train(
            rlrun.TrainRequest(
                checkpoint=str(checkpoint),
                resume=True,
                num_envs=4,
                max_iterations=1,
                seed=1,
                overrides=overrides,
                **common,
            )
        )
        assert resumed.iterations == iterations and not marker.exists()
    argv = ["play", "--task", task, "--library", "sb3", "--algorithm", algorithm, "--checkpoint", str(lone)]
    assert rlrun.main([*argv, "--num_episodes", "1", "--log_root", str(root), *overrides]) == 0
    assert not marker.exists()
    with pytest.raises(Exception):  # noqa: B017  # what SB3's own loader does with the file: runs it
        sb3.algorithm_class(algorithm).load(lone)
    assert marker.exists()


def test_a_zip_saved_by_sb3_itself_plays_resumes_and_exports_and_a_misfit_is_one_line(tmp_path, capsys):
    """A model saved with SB3's `save` outside rlrun (as rlrun's checkpoints are written): rebuilt from the agent
    configuration, with its weights, optimiser state and step count."""
    env = make_env(CARTPOLE, 4)
    vec_env = sb3.Sb3VecEnv(env)
    model = PPO("MlpPolicy", vec_env, n_steps=8, batch_size=32, n_epochs=2, policy_kwargs={"net_arch": [16, 16]})
    model.learn(64)
    path = tmp_path / "saved_by_sb3.zip"
    model.save(path)
    env.close()
    root = str(tmp_path / "logs")
    common = {"task": CARTPOLE, "library": "sb3", "checkpoint": str(path), "log_root": root, "overrides": TINY_PPO}
    played = rlrun.play(rlrun.PlayRequest(num_episodes=2, num_envs=2, **common))
    assert len(played.returns) == 2
    assert rlrun.export(rlrun.ExportRequest(**common)).files
    resumed = rlrun.train(rlrun.TrainRequest(resume=True, num_envs=4, max_iterations=1, seed=1, **common))
    assert PPO.load(resumed.checkpoint).num_timesteps == model.num_timesteps + resumed.env_steps
    config = {"policy": "MlpPolicy", "n_steps": 8, "batch_size": 32, "policy_kwargs": {"net_arch": [16, 16]}}
    play_env = make_env(CARTPOLE, 2)
    rebuilt = sb3_checkpoints.build_model(
        path, config, "ppo", sb3.Sb3VecEnv(play_env), device="cpu", seed=None, play=True
    )
    play_env.close()
    assert_bitwise_equal(rebuilt.policy.state_dict(), weights(path))
    assert rebuilt.num_timesteps == model.num_timesteps and rebuilt._n_updates == model._n_updates

    argv = ["play", "--task", CARTPOLE, "--library", "sb3", "--checkpoint", str(path), "--log_root", root]
    assert rlrun.main(argv) == 2  # the default configuration's network is another one
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "does not fit" in line and "agent.policy_kwargs" in line
    argv = ["play", "--task", PENDULUM, "--library", "sb3", "--checkpoint", str(path), "--log_root", root]
    assert rlrun.main([*argv, *TINY_PPO]) == 2  # another task's spaces
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "does not fit" in line and "observation_space" in line


def test_clip_reward_gives_sb3_the_signs_and_keeps_the_episode_returns_the_envs_own():
    """As SB3's `AtariWrapper` inside RL Zoo's `Monitor`: the agent learns from signs, the returns stay scores."""
    out = {}
    for clip in (True, False):
        vec_env = sb3.Sb3VecEnv(make_env("rlrun/Pendulum-v1", 2, env_kwargs={"max_episode_steps": 3}), clip_reward=clip)
        vec_env.seed(0)
        vec_env.reset()
        steps = [vec_env.step(np.ones((2, 1), dtype=np.float32)) for _ in range(3)]
        vec_env.close()
        out[clip] = np.stack([rewards for _, rewards, _, _ in steps]), steps[-1][3]
    (clipped, clipped_infos), (plain, plain_infos) = out[True], out[False]
    assert np.any(plain % 1 != 0) and np.all(plain < 0)  # Pendulum's fractional costs
    np.testing.assert_array_equal(clipped, np.sign(plain))
    for clipped_info, plain_info, returns in zip(clipped_infos, plain_infos, plain.sum(axis=0), strict=True):
        assert clipped_info["episode"]["r"] == plain_info["episode"]["r"] == pytest.approx(returns)
