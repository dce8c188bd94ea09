"""The TorchRL adapter: its EnvBase, bootstrapping at time-outs, checkpoints, resume, learning, hermeticity.

The contract cases (success, an env raising after TorchRL changed its globals, Ctrl-C, exit, `--help`, a
rejected argument) run for TorchRL through `CONTRACT_CASES` in tests/api/test_contract.py; stops and
resumes through tests/api/test_interrupts.py; export against onnxruntime through tests/api/test_exporting.py.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

pytest.importorskip("tensordict")
pytest.importorskip("torchrl")
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torchrl.envs.utils import check_env_specs
from torchrl.modules import ValueOperator
from torchrl.objectives.value import GAE

import rlrun
from rlrun.envs import make_env
from rlrun.errors import CorruptCheckpoint, InvalidArgument, MissingDependency
from rlrun.hermetic import census
from rlrun.libraries import LIBRARIES, check_installed
from rlrun.libraries import torchrl as adapter
from rlrun.libraries.torchrl_agent import CHECKPOINT_FORMAT
from rlrun.libraries.torchrl_env import TorchRLVecEnv
from rlrun.libraries.torchrl_trainer import make_trainer
from support import assert_order_independent

CARTPOLE, PENDULUM, CONTINUOUS_CARTPOLE = "rlrun/CartPole-v1", "rlrun/Pendulum-v1", "rlrun/CartPoleContinuous-v1"
TINY_PPO = ("agent.steps_per_env=8", "agent.minibatch_size=16", "agent.num_epochs=2")
TINY_SAC = (
    "agent.learning_starts=16",
    "agent.updates_per_iteration=1",
    "agent.batch_size=16",
    "agent.actor.hidden=[16,16]",
    "agent.critic.hidden=[16,16]",
)


# --- the EnvBase ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", [CARTPOLE, PENDULUM, CONTINUOUS_CARTPOLE, "CartPole-v1"])
def test_the_env_passes_torchrls_check_env_specs(task):
    env = make_env(task, 3, env_kwargs={"max_episode_steps": 4})
    torchrl_env = TorchRLVecEnv(env, seed=0)
    assert torchrl_env.batch_size == (3,)
    check_env_specs(torchrl_env, break_when_any_done="both")
    rollout = torchrl_env.rollout(10, break_when_any_done=False)  # episodes end and restart within it
    assert rollout["next", "done"].sum() == 3 * 2
    env.close()


def rollout_with_a_termination_and_a_truncation():
    """Two CartPoleContinuous envs with a 3-step limit, zero actions for 4 steps: env 0 terminates at step 0
    (its pole starts past the limit) and is truncated at step 3, env 1 is truncated at step 2."""
    env = make_env(CONTINUOUS_CARTPOLE, 2, env_kwargs={"max_episode_steps": 3})
    torchrl_env = TorchRLVecEnv(env, seed=0)
    first = torchrl_env.reset()
    env.unwrapped.state[0, 2] = 1.0
    first["observation"][0] = env.unwrapped.observe(env.unwrapped.components[:, :1])[0]
    restarts = []

    def act(observations):
        restarts.append(torchrl_env._restarted.clone())
        return torch.zeros(2, 1)

    policy = TensorDictModule(act, in_keys=["observation"], out_keys=["action"])
    rollout = torchrl_env.rollout(4, policy, auto_reset=False, tensordict=first, break_when_any_done=False)
    return env, rollout, restarts


def test_terminations_and_truncations_become_torchrls_flags_with_the_final_observation():
    env, rollout, restarts = rollout_with_a_termination_and_a_truncation()
    flags = {key: rollout["next", key].squeeze(-1).tolist() for key in ("terminated", "truncated", "done")}
    assert flags["terminated"] == [[True, False, False, False], [False, False, False, False]]
    assert flags["truncated"] == [[False, False, False, True], [False, False, True, False]]
    assert flags["done"] == [[True, False, False, True], [False, False, True, False]]
    assert rollout["next", "observation"][0, 0, 2] > 0.9  # the pole past the limit: the final observation
    assert abs(rollout["observation"][0, 1, 2]) <= 0.05  # the next episode's first observation
    # The partial reset after a done step handed out the env's own restart: nothing was reset again.
    assert torch.equal(rollout["observation"][1, 3], restarts[3][1])
    assert not torch.equal(rollout["next", "observation"][1, 2], rollout["observation"][1, 3])
    assert env.unwrapped.steps.tolist() == [0, 1]  # both restarted once, by the env itself
    env.close()


def test_gae_bootstraps_a_truncated_episode_from_its_final_observation_and_a_terminated_one_not_at_all():
    env, rollout, _ = rollout_with_a_termination_and_a_truncation()
    torch.manual_seed(0)
    critic = ValueOperator(torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
    gae = GAE(gamma=0.9, lmbda=0.95, value_network=critic)
    with torch.no_grad():
        gae(rollout)

    @torch.no_grad()
    def value(observation):
        return float(critic(TensorDict({"observation": observation[None]}, [1]))["state_value"])

    targets, rewards = rollout["value_target"].squeeze(-1), rollout["next", "reward"].squeeze(-1)
    final, restart = rollout["next", "observation"][1, 2], rollout["observation"][1, 3]
    assert float(targets[1, 2]) == pytest.approx(float(rewards[1, 2]) + 0.9 * value(final), abs=1e-5)
    assert value(final) != pytest.approx(value(restart), abs=1e-3), "the test must tell the two apart"
    assert float(targets[0, 0]) == pytest.approx(float(rewards[0, 0]), abs=1e-6)  # terminated: no bootstrap
    env.close()


def test_box_actions_are_clipped_to_the_action_space():
    env = make_env(PENDULUM, 2)
    torchrl_env = TorchRLVecEnv(env, seed=0)
    data = torchrl_env.reset()
    state = env.unwrapped.state.clone()
    beyond = torchrl_env.step(data.clone().set("action", torch.tensor([[100.0], [-100.0]])))
    env.unwrapped.state = state.clone()
    at_limit = torchrl_env.step(data.clone().set("action", torch.tensor([[2.0], [-2.0]])))
    assert torch.equal(beyond["next", "observation"], at_limit["next", "observation"])
    env.close()


# --- configuration and checkpoints ----------------------------------------------------------------------------


def test_an_iteration_is_one_collector_batch_and_bad_settings_are_refused():
    assert adapter.env_steps_per_iteration({"steps_per_env": 16, "minibatch_size": 64, "num_epochs": 4}, 8) == 128
    assert adapter.env_steps_per_iteration({"steps_per_env": 1, "updates_per_iteration": 4}, 8) == 8
    cases = (
        ({"minibatch_size": 48}, r"agent\.minibatch_size 48 does not split .* 128 steps.*minibatch_size=32"),
        ({"actor": {"activation": "Tanhh"}}, r"agent\.actor\.activation 'Tanhh' is not a torch\.nn module"),
        ({"lr_schedule": "cosine"}, r"agent\.lr_schedule 'cosine' is not one of constant, linear"),
    )
    for change, message in cases:
        with pytest.raises(InvalidArgument, match=message):
            adapter.env_steps_per_iteration({"steps_per_env": 16, "minibatch_size": 64, "num_epochs": 4, **change}, 8)


def test_a_configuration_the_adapter_cannot_run_is_refused_in_one_line_before_anything_changes(log_root, capsys):
    argv = ["train", "--task", CARTPOLE, "--library", "torchrl", "--log_root", str(log_root)]
    assert rlrun.main([*argv, "agent.minibatch_size=1000"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "agent.minibatch_size 1000 does not split" in line and not log_root.exists()
    assert rlrun.main([*argv, "--algorithm", "sac"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "torchrl sac cannot act in rlrun/CartPole-v1's Discrete action space" in line


def test_every_shipped_configuration_builds_its_agent_and_trainer(tmp_path):
    from importlib import resources

    import yaml

    from rlrun.configs import library_config
    from rlrun.libraries.base import TrainJob

    root = resources.files("rlrun.configs") / "torchrl"
    for algorithm in adapter.ALGORITHMS:
        for path in [root / algorithm / "default.yaml", *(root / algorithm / "rlrun").iterdir()]:
            config = yaml.safe_load(path.read_text())
            task = PENDULUM if path.name == "default.yaml" else f"rlrun/{path.name.removesuffix('.yaml')}"
            env = make_env(task, config["num_envs"])
            job = TrainJob(env, env, library_config(config), config["max_iterations"], 0, "cpu", tmp_path, None)
            job.algorithm = algorithm
            agent = adapter.Agent(algorithm, env, job.config, "cpu")
            trainer = make_trainer(job, TorchRLVecEnv(env, seed=0), agent, 0)
            trainer.collector.shutdown()
            assert adapter.env_steps_per_iteration(job.config, config["num_envs"]) >= config["num_envs"], path
            env.close()


def train(log_root, task=PENDULUM, algorithm="ppo", overrides=TINY_PPO, **fields):
    request = {"num_envs": 4, "max_iterations": 3, "seed": 1, **fields}
    return rlrun.train(
        rlrun.TrainRequest(
            task=task, library="torchrl", algorithm=algorithm, log_root=str(log_root), overrides=overrides, **request
        )
    )


def test_a_run_keeps_weights_only_checkpoints_listed_in_its_manifest(log_root):
    result = train(log_root, overrides=(*TINY_PPO, "agent.save_interval=2"))
    assert result.iterations == 3 and result.env_steps == 3 * 8 * 4
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert [(entry["file"], entry["iteration"]) for entry in manifest["checkpoints"]] == [
        ("model_2.pt", 2),
        ("model_3.pt", 3),
    ]
    state = torch.load(result.checkpoint, weights_only=True)
    assert state["format"] == CHECKPOINT_FORMAT and state["algorithm"] == "ppo" and state["iteration"] == 3
    assert int(state["optimizer"]["state"][0]["step"]) == 3 * 2 * 2  # iterations x epochs x minibatches
    assert not (Path.cwd() / "runs").exists() and manifest["versions"]["torchrl"] == LIBRARIES["torchrl"].version


def test_sac_resumes_with_its_temperature_optimiser_and_counters(log_root):
    first = train(log_root, algorithm="sac", overrides=TINY_SAC, max_iterations=8)
    resumed = train(log_root, algorithm="sac", overrides=TINY_SAC, max_iterations=4, resume=True)
    assert resumed.iterations == 12 and resumed.checkpoint.name == "model_12.pt"
    parent, child = (torch.load(result.checkpoint, weights_only=True) for result in (first, resumed))
    assert child["iteration"] == 12
    # Updates start once 16 env steps are collected (the 4th iteration of 4 envs): 5 in the first run, and one
    # in each of the 4 iterations after the resume, which does not wait again.
    assert [int(state["optimizer"]["state"][0]["step"]) for state in (parent, child)] == [5, 9]
    assert not torch.equal(parent["loss_module"]["log_alpha"], child["loss_module"]["log_alpha"])


def test_files_that_are_not_torchrl_agents_are_refused(tmp_path, log_root):
    path = tmp_path / "model.pt"
    torch.save({"loss_module": {}}, path)
    with pytest.raises(CorruptCheckpoint, match="missing format, algorithm, iteration, optimizer"):
        adapter.check_checkpoint(path)
    path.write_bytes(b"\x80\x04not a zip")
    with pytest.raises(CorruptCheckpoint, match="cannot be read as a TorchRL checkpoint"):
        adapter.check_checkpoint(path)
    torch.save({"format": CHECKPOINT_FORMAT, "code": os.system}, path)
    with pytest.raises(CorruptCheckpoint, match="cannot be read"):
        adapter.check_checkpoint(path)
    trained = train(log_root, max_iterations=1)
    request = rlrun.PlayRequest(
        task=PENDULUM, library="torchrl", algorithm="sac", checkpoint=str(trained.checkpoint), log_root=str(log_root)
    )
    with pytest.raises(InvalidArgument, match="holds a TorchRL PPO agent, not SAC; pass --algorithm ppo"):
        rlrun.play(request)


def test_discrete_ppo_plays_back_deterministically_and_sampled(log_root):
    trained = train(log_root, task=CARTPOLE, max_iterations=2)
    for deterministic in (True, False):
        played = rlrun.play(
            rlrun.PlayRequest(
                task=CARTPOLE, library="torchrl", num_envs=2, num_episodes=2, log_root=str(log_root),
                deterministic=deterministic,
            )
        )  # fmt: skip
        assert played.checkpoint == trained.checkpoint and len(played.returns) == 2


# --- hermeticity ----------------------------------------------------------------------------------------------


def open_fds():
    paths = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the descriptor listdir itself used
            continue
    return sorted(paths)


def test_five_calls_in_one_process_leave_no_thread_fd_child_or_exit_hook_behind(log_root):
    train(log_root, max_iterations=1)  # the first call in the process imports TorchRL
    before, threads, fds, hooks = census.snapshot(), threading.enumerate(), open_fds(), atexit._ncallbacks()
    train(log_root)
    train(log_root, algorithm="sac", overrides=TINY_SAC, max_iterations=6)
    train(log_root, task=CARTPOLE)
    rlrun.play(rlrun.PlayRequest(task=PENDULUM, library="torchrl", num_envs=2, num_episodes=2, log_root=str(log_root)))
    train(log_root, resume=True)
    assert threading.enumerate() == threads and open_fds() == fds and atexit._ncallbacks() == hooks
    assert census.compare(before, census.snapshot()) == []  # threads, fds, child processes, exit hooks, guards


def test_the_collector_switches_the_exploration_type_only_while_it_collects(log_root):
    from tensordict.nn import InteractionType
    from tensordict.nn.probabilistic import interaction_type

    seen = []
    rlrun.train(
        rlrun.TrainRequest(
            task=PENDULUM, library="torchrl", num_envs=2, max_iterations=2, log_root=str(log_root), overrides=TINY_PPO
        ),
        on_iteration=lambda row: seen.append(interaction_type()),  # called from the env's step, in the collector
    )
    assert seen == [InteractionType.RANDOM] * 2 and interaction_type() is None


FIRST_CALL = Path(__file__).parents[1] / "hermetic" / "test_first_call.py"


@pytest.mark.slow
def test_the_first_call_in_a_fresh_process_leaves_the_callers_streams_and_filters(tmp_path):
    from hermetic.test_first_call import CALLER

    request = {"library": "torchrl", "task": PENDULUM, "num_envs": 4, "max_iterations": 1, "log_root": str(tmp_path)}
    request["overrides"] = list(TINY_PPO)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    completed = subprocess.run(
        [sys.executable, "-c", CALLER, json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    outcome = json.loads(completed.stdout.splitlines()[-1])
    assert outcome["draws"] == outcome["expected"]  # random, NumPy's global generator, torch's CPU generator
    assert outcome["filters"], f"the call left warning filters behind: {outcome['added']}"


A = {"task": CARTPOLE, "algorithm": "ppo", "seed": 1, "num_envs": 8, "max_iterations": 3, "overrides": TINY_PPO}
B = {"task": PENDULUM, "algorithm": "sac", "seed": 2, "num_envs": 4, "max_iterations": 8, "overrides": TINY_SAC}


def loss_weights(checkpoint):
    return torch.load(checkpoint, weights_only=True)["loss_module"]


@pytest.mark.slow
def test_a_run_gives_the_same_result_after_other_runs_and_in_a_fresh_process(tmp_path):
    assert_order_independent(tmp_path, {"library": "torchrl", **A}, {"library": "torchrl", **B}, loss_weights)


# --- the table ------------------------------------------------------------------------------------------------


def test_rlrun_lists_torchrl_and_a_missing_install_names_the_extra(capsys, monkeypatch):
    assert rlrun.main(["list", "libraries"]) == 0
    assert "torchrl" in capsys.readouterr().out
    monkeypatch.setattr(type(LIBRARIES["torchrl"]), "installed", property(lambda library: False))
    with pytest.raises(MissingDependency, match=r"pip install 'rlrun\[torchrl\]'"):
        check_installed(LIBRARIES["torchrl"])


def test_every_command_and_the_bench_take_library_torchrl(tmp_path, capsys):
    root = str(tmp_path / "logs")
    common = ["--task", PENDULUM, "--library", "torchrl", "--log_root", root]
    assert rlrun.main(["train", *common, "--num_envs", "2", "--max_iterations", "2", *TINY_PPO]) == 0
    assert rlrun.main(["play", *common, "--num_envs", "2", "--num_episodes", "1"]) == 0
    assert rlrun.main(["export", *common]) == 0
    assert "policy.onnx" in capsys.readouterr().out
    bench = rlrun.BenchRequest(
        tasks=(CARTPOLE,), runs=("torchrl",), seeds=(0,), iterations=2, num_envs=2, overrides=TINY_PPO,
        out=str(tmp_path / "bench"), report=False,
    )  # fmt: skip
    result = rlrun.bench(bench)
    assert (result.completed, result.failed) == (1, 0)
    (row,) = [json.loads(line) for line in (tmp_path / "bench" / "results.jsonl").read_text().splitlines()]
    assert row["status"] == "completed" and row["env_steps"] == 2 * 8 * 2


# --- learning -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ppo_learns_cartpole_and_plays_it_back(log_root):
    trained = rlrun.train(rlrun.TrainRequest(task=CARTPOLE, library="torchrl", seed=1, log_root=str(log_root)))
    assert trained.mean_return >= 400, f"mean return {trained.mean_return} after {trained.env_steps} steps"
    played = rlrun.play(rlrun.PlayRequest(task=CARTPOLE, library="torchrl", num_episodes=20, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint
    assert played.mean_return >= 400, f"played returns {played.returns}"


@pytest.mark.slow
def test_sac_learns_pendulum_and_plays_it_back(log_root):
    request = rlrun.TrainRequest(task=PENDULUM, library="torchrl", algorithm="sac", seed=1, log_root=str(log_root))
    trained = rlrun.train(request)
    assert trained.mean_return >= -400, f"mean return {trained.mean_return} after {trained.env_steps} steps"
    played = rlrun.play(rlrun.PlayRequest(task=PENDULUM, library="torchrl", num_episodes=20, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint
    assert played.mean_return >= -400, f"played returns {played.returns}"
