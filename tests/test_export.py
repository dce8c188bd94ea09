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


def observations_met_by_a_random_agent(count):
    env = make_env(TASK, 10)
    generator = torch.Generator().manual_seed(0)
    seen, (observations, _) = [], env.reset(seed=0)
    while sum(len(batch) for batch in seen) < count:
        seen.append(observations)
        observations, *_ = env.step(torch.rand(10, 1, generator=generator) * 4 - 2)
    env.close()
    return torch.cat(seen)[:count]


def live_policy(trained):
    import yaml

    library = get_library("rsl_rl")
    config = yaml.safe_load((trained.run_dir / "params" / "agent.yaml").read_text())
    env = make_env(TASK, 1000)
    job = PlayJob(
        env=env,
        config={key: value for key, value in config.items() if key not in RUN_KEYS},
        checkpoint=trained.checkpoint,
        device="cpu",
        deterministic=True,
        algorithm="ppo",
    )
    return load_adapter(library).load_policy(job), env


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
