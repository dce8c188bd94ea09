"""The RSL-RL adapter: it learns, plays back what it learned, and reads only sound checkpoints."""

from __future__ import annotations

import json

import pytest
import torch

import rlrun
from rlrun.envs import make_env
from rlrun.errors import CorruptCheckpoint
from rlrun.libraries import rsl_rl

pytest.importorskip("rsl_rl")

TASK = "rlrun/CartPoleContinuous-v1"


@pytest.mark.slow
def test_learns_cartpole_and_plays_it_back(log_root):
    trained = rlrun.train(rlrun.TrainRequest(task=TASK, library="rsl_rl", seed=1, log_root=str(log_root)))
    assert trained.iterations == 150 and trained.num_envs == 512  # the tuned configuration
    assert trained.mean_return >= 400, f"mean return {trained.mean_return} after {trained.env_steps} steps"

    played = rlrun.play(rlrun.PlayRequest(task=TASK, library="rsl_rl", num_episodes=20, log_root=str(log_root)))
    assert played.checkpoint == trained.checkpoint
    assert played.mean_return >= 400, f"played returns {played.returns}"


def test_truncations_are_reported_as_time_outs_and_terminations_are_not():
    env = make_env("rlrun/CartPoleContinuous-v1", 3, env_kwargs={"max_episode_steps": 2})
    vec_env = rsl_rl.RslRlVecEnv(env, {}, seed=0)
    env.unwrapped.state[0, 2] = 1.0  # env 0: the pole is already past the angle limit, so it terminates
    _, _, dones, extras = vec_env.step(torch.zeros(3, 1))
    assert dones.tolist() == [1, 0, 0] and extras["time_outs"].tolist() == [False, False, False]
    _, _, dones, extras = vec_env.step(torch.zeros(3, 1))
    assert dones.tolist() == [0, 1, 1] and extras["time_outs"].tolist() == [False, True, True]
    env.close()


def test_actions_are_clipped_to_the_action_space():
    env = make_env("rlrun/Pendulum-v1", 2)
    vec_env = rsl_rl.RslRlVecEnv(env, {}, seed=0)
    state = env.unwrapped.state.clone()
    beyond = vec_env.step(torch.tensor([[100.0], [-100.0]]))
    env.unwrapped.state = state.clone()
    at_limit = vec_env.step(torch.tensor([[2.0], [-2.0]]))
    env.unwrapped.state = state.clone()
    inside = vec_env.step(torch.tensor([[1.0], [-1.0]]))
    assert torch.equal(beyond[0]["policy"], at_limit[0]["policy"]) and torch.equal(beyond[1], at_limit[1])
    assert not torch.equal(inside[1], at_limit[1])
    env.close()


def test_a_file_that_is_not_a_runner_checkpoint_is_refused(tmp_path):
    path = tmp_path / "model.pt"
    torch.save({"actor_state_dict": {}}, path)
    with pytest.raises(CorruptCheckpoint, match="critic_state_dict"):
        rsl_rl.check_checkpoint(path)
    path.write_bytes(b"\x80\x04not a zip")
    with pytest.raises(CorruptCheckpoint, match="cannot be read"):
        rsl_rl.check_checkpoint(path)


def test_resume_continues_counters_optimiser_and_normaliser(log_root):
    """2k steps straight against 1k + resume + 1k: same iteration count and optimiser step count."""
    small = ("agent.num_steps_per_env=16",)
    common = {"task": "rlrun/Pendulum-v1", "library": "rsl_rl", "num_envs": 16, "seed": 3, "overrides": small}
    straight = rlrun.train(rlrun.TrainRequest(**common, max_iterations=8, log_root=str(log_root / "straight")))
    first = rlrun.train(rlrun.TrainRequest(**common, max_iterations=4, log_root=str(log_root / "resumed")))
    resumed = rlrun.train(
        rlrun.TrainRequest(**common, max_iterations=4, log_root=str(log_root / "resumed"), resume=True)
    )
    assert straight.env_steps == first.env_steps + resumed.env_steps == 2048
    assert resumed.checkpoint.name == straight.checkpoint.name == "model_7.pt" and resumed.iterations == 8

    def state(result):
        return torch.load(result.checkpoint, weights_only=True)

    parent, child, whole = state(first), state(resumed), state(straight)
    assert child["iter"] == whole["iter"] == 7
    adam_steps = [entry["step"] for entry in child["optimizer_state_dict"]["state"].values()]
    assert adam_steps == [entry["step"] for entry in whole["optimizer_state_dict"]["state"].values()]
    # The resumed normaliser counts on from the parent's statistics instead of starting over.
    count = next(key for key in child["actor_state_dict"] if key.endswith("count"))
    assert child["actor_state_dict"][count] == whole["actor_state_dict"][count] > parent["actor_state_dict"][count]
    manifest = json.loads((resumed.run_dir / "run.json").read_text())
    assert manifest["parent"]["checkpoint"] == str(first.checkpoint)
    assert manifest["parent"]["run"] == str(first.run_dir)


def test_training_starts_no_git_process(log_root, monkeypatch):
    """RSL-RL's code-state logging would run GitPython on the repository holding rsl_rl (the enclosing project's,
    when the environment lives inside one, as in CI), leaving persistent `git cat-file` processes to the
    collector; the adapter turns it off."""
    import subprocess

    started = []
    original = subprocess.Popen.__init__

    def record(self, args, *rest, **kwargs):
        started.append(list(args) if isinstance(args, list | tuple) else [args])
        original(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", record)
    result = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/Pendulum-v1",
            library="rsl_rl",
            num_envs=4,
            max_iterations=1,
            log_root=str(log_root),
            overrides=("agent.num_steps_per_env=8",),
        )
    )
    assert [args for args in started if args and str(args[0]).endswith("git") and "version" not in args] == []
    assert not list(result.run_dir.rglob("*.diff"))
