"""Exported policies (ONNX, TorchScript) act like the live policy, normalisation included."""

from __future__ import annotations

import onnxruntime
import pytest
import torch

import rlrun
from rlrun.configs import RUN_KEYS
from rlrun.envs import make_env
from rlrun.libraries import get_library, load_adapter
from rlrun.libraries.base import PlayJob
from rlrun.rollout import random_policy
from support import needs_jax

TASK = "rlrun/Pendulum-v1"  # observation normalisation on in its tuned RSL-RL configuration
SMALL = ("agent.num_steps_per_env=8",)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("export") / "logs"
    trained = rlrun.train(
        rlrun.TrainRequest(
            task=TASK, library="rsl_rl", num_envs=16, max_iterations=3, log_root=str(root), overrides=SMALL
        )
    )
    result = rlrun.export(rlrun.ExportRequest(task=TASK, library="rsl_rl", log_root=str(root)))
    return trained, result


def observations_met_by_a_random_agent(count, task=TASK):
    env = make_env(task, 10)
    act = random_policy(env, seed=0)
    seen, (observations, _) = [], env.reset(seed=0)
    while sum(len(batch) for batch in seen) < count:
        seen.append(observations)
        observations, *_ = env.step(act(observations))
    env.close()
    return torch.cat(seen)[:count]


def live_policy(trained, library="rsl_rl", task=TASK, algorithm="ppo"):
    """The policy `rlrun play` acts with (deterministic), rebuilt by the adapter from the run's own config."""
    import yaml

    config = yaml.safe_load((trained.run_dir / "params" / "agent.yaml").read_text())
    env = make_env(task, 1000)
    job = PlayJob(
        env=env,
        config={key: value for key, value in config.items() if key not in RUN_KEYS},
        checkpoint=trained.checkpoint,
        device="cpu",
        deterministic=True,
        algorithm=algorithm,
        seed=0,
    )
    return load_adapter(get_library(library)).load_policy(job), env


def test_export_writes_both_files_in_the_run_directory_and_checks_them(exported):
    trained, result = exported
    assert [path.name for path in result.files] == ["policy.onnx", "policy.pt"]
    assert all(path.parent == trained.run_dir / "exported" and path.stat().st_size > 0 for path in result.files)
    assert set(result.max_abs_error) == {"policy.onnx", "policy.pt"}
    assert max(result.max_abs_error.values()) < 1e-5


def test_exported_files_reproduce_the_live_policy_on_1000_observations(exported):
    trained, result = exported
    observations = observations_met_by_a_random_agent(1000)
    policy, env = live_policy(trained)
    with torch.inference_mode():
        live = policy(observations)
    env.close()
    space = env.single_action_space
    low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)

    session = onnxruntime.InferenceSession(str(result.files[0]), providers=["CPUExecutionProvider"])
    onnx_actions = torch.from_numpy(session.run(None, {"obs": observations.numpy()})[0])
    scripted = torch.jit.load(str(result.files[1]))
    with torch.inference_mode():
        script_actions = scripted(observations)
    for actions in (onnx_actions, script_actions):
        assert actions.shape == (1000, 1)
        assert float((torch.clamp(actions, low, high) - live).abs().max()) < 1e-5
    assert float(live.std()) > 0  # the policy is not constant, so the comparison can fail


def test_the_exported_policy_includes_observation_normalisation(exported):
    trained, result = exported
    state = torch.load(trained.checkpoint, weights_only=True)["actor_state_dict"]
    normaliser = {key: value for key, value in state.items() if key.startswith("obs_normalizer")}
    assert normaliser and any(float(value.abs().sum()) > 0 for value in normaliser.values())
    scripted = torch.jit.load(str(result.files[1]))
    assert any(name.startswith("obs_normalizer") for name, _ in scripted.named_buffers())


def test_export_format_and_library_errors(capsys, exported):
    trained, _ = exported
    root = str(trained.run_dir.parents[2])
    assert rlrun.main(["export", "--task", TASK, "--log_root", root, "--format", "tflite"]) == 2
    assert "'tflite' is not one of onnx, torchscript, both" in capsys.readouterr().err
    assert rlrun.main(["export", "--task", TASK, "--log_root", root, "--format", "torchscript"]) == 0
    assert "policy.pt" in capsys.readouterr().out


CONTINUOUS, DISCRETE = "rlrun/Pendulum-v1", "rlrun/CartPole-v1"
SMALL_RUNS = {
    # case id: (library, algorithm, task, overrides for a short run that still moves the weights and statistics)
    "skrl-ppo-continuous": ("skrl", "ppo", CONTINUOUS, ("agent.agent.rollouts=16",)),
    "skrl-ppo-discrete": ("skrl", "ppo", DISCRETE, ("agent.agent.rollouts=16",)),
    "skrl-sac": ("skrl", "sac", CONTINUOUS, ("agent.agent.random_timesteps=0", "agent.agent.learning_starts=8")),
    "sb3-ppo-continuous": ("sb3", "ppo", CONTINUOUS, ("agent.n_steps=16", "agent.batch_size=64")),
    "sb3-ppo-discrete": ("sb3", "ppo", DISCRETE, ("agent.n_steps=16", "agent.batch_size=64")),
    "sb3-sac": ("sb3", "sac", CONTINUOUS, ("agent.learning_starts=8",)),
    "sb3-td3": ("sb3", "td3", CONTINUOUS, ("agent.learning_starts=8",)),
    "rl_games-continuous": ("rl_games", "ppo", CONTINUOUS, ("agent.params.config.minibatch_size=64",)),
    "rl_games-discrete": ("rl_games", "ppo", DISCRETE, ("agent.params.config.minibatch_size=64",)),
    "torchrl-ppo-continuous": ("torchrl", "ppo", CONTINUOUS, ("agent.steps_per_env=16", "agent.minibatch_size=64")),
    "torchrl-ppo-discrete": (
        "torchrl",
        "ppo",
        DISCRETE,
        ("agent.steps_per_env=32", "agent.minibatch_size=64", "agent.lr_schedule=constant"),
    ),
    "torchrl-sac": ("torchrl", "sac", CONTINUOUS, ("agent.learning_starts=8",)),
}


@pytest.mark.parametrize("case", list(SMALL_RUNS))
def test_every_pytorch_library_exports_what_its_live_policy_does(case, tmp_path):
    library, algorithm, task, overrides = SMALL_RUNS[case]
    root = str(tmp_path / "logs")
    common = {"task": task, "library": library, "algorithm": algorithm, "log_root": root}
    trained = rlrun.train(rlrun.TrainRequest(num_envs=8, max_iterations=8, overrides=overrides, **common))
    result = rlrun.export(rlrun.ExportRequest(**common))
    assert [path.parent for path in result.files] == [trained.run_dir / "exported"] * 2
    assert max(result.max_abs_error.values()) < 1e-5  # the export's own check, on a rollout of the policy

    observations = observations_met_by_a_random_agent(1000, task)
    policy, env = live_policy(trained, library, task, algorithm)
    with torch.inference_mode():
        live = policy(observations).reshape(1000, -1).float()
    env.close()
    session = onnxruntime.InferenceSession(str(result.files[0]), providers=["CPUExecutionProvider"])
    onnx_actions = torch.from_numpy(session.run(None, {"obs": observations.numpy()})[0])
    with torch.inference_mode():
        script_actions = torch.jit.load(str(result.files[1]))(observations)
    space = env.single_action_space
    for actions in (onnx_actions, script_actions):
        if task == DISCRETE:
            assert actions.shape == (1000,) and not actions.is_floating_point()
            assert torch.equal(actions.reshape(1000, -1).float(), live)
        else:  # the export acts before clipping to the action space, as the library's policy does
            clipped = torch.clamp(actions, torch.as_tensor(space.low), torch.as_tensor(space.high))
            assert float((clipped - live).abs().max()) < 1e-5
    assert len(live.unique()) > 1  # the policy is not constant, so the comparison can fail


@needs_jax
def test_only_pytorch_agents_are_exported(capsys, tmp_path):
    root = str(tmp_path / "logs")
    small = ("agent.agent.rollouts=8", "agent.agent.mini_batches=1")
    rlrun.train(
        rlrun.TrainRequest(
            task=CONTINUOUS, library="skrl", num_envs=4, max_iterations=1, log_root=root, overrides=small
        )
    )
    argv = ["export", "--task", CONTINUOUS, "--library", "skrl", "--ml_framework", "jax", "--log_root", root]
    assert rlrun.main(argv) == 2
    error = capsys.readouterr().err
    assert "rlrun exports PyTorch policies only" in error and "--ml_framework torch" in error
    assert not list((tmp_path / "logs" / "skrl" / "rlrun_Pendulum-v1").glob("*/exported"))
