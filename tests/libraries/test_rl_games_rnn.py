"""rl_games recurrent networks: an LSTM or GRU from `--agent_config` trains, plays and exports no
further than rlrun can; in play, the states of the envs whose episode ended go back to zero, as in rl_games'
own player loop."""

from __future__ import annotations

import pytest
import torch
import yaml

import rlrun
from rlrun import configs
from rlrun.envs import make_env
from rlrun.errors import InvalidArgument
from rlrun.hermetic import hermetic_call
from rlrun.libraries import rl_games
from rlrun.libraries.base import PlayJob
from rlrun.rollout import evaluate

pytest.importorskip("rl_games")

TASK = "rlrun/Pendulum-v1"


def recurrent_config(tmp_path, name: str = "lstm"):
    """rlrun's rl_games configuration with a small recurrent layer, written as an `--agent_config` file."""
    config = configs.load_agent_config("rl_games", "ppo", TASK)
    config["params"]["network"]["rnn"] = {"name": name, "units": 16, "layers": 1, "before_mlp": False}
    config["params"]["network"]["mlp"]["units"] = [16]
    config["params"]["config"].update(horizon_length=8, minibatch_size=16, seq_length=4, mini_epochs=1)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("rnn")
    request = rlrun.TrainRequest(
        task=TASK,
        library="rl_games",
        num_envs=4,
        max_iterations=2,
        log_root=str(root / "logs"),
        agent_config=str(recurrent_config(root)),
    )
    return rlrun.train(request)


def test_a_recurrent_network_trains_and_plays(trained):
    assert trained.status == "completed" and trained.checkpoint is not None
    saved = yaml.safe_load((trained.run_dir / "params" / "agent.yaml").read_text())
    assert saved["params"]["network"]["rnn"]["name"] == "lstm"
    played = rlrun.play(
        rlrun.PlayRequest(task=TASK, library="rl_games", log_root=str(trained.run_dir.parents[2]), num_episodes=2)
    )
    assert len(played.returns) == 2


def test_a_gru_trains(tmp_path):
    result = rlrun.train(
        rlrun.TrainRequest(
            task=TASK,
            library="rl_games",
            num_envs=4,
            max_iterations=1,
            log_root=str(tmp_path / "logs"),
            agent_config=str(recurrent_config(tmp_path, "gru")),
        )
    )
    assert result.status == "completed"


def test_play_zeroes_the_states_of_the_envs_whose_episode_ended(trained):
    config = configs.library_config(yaml.safe_load((trained.run_dir / "params" / "agent.yaml").read_text()))
    with hermetic_call() as call:
        call.import_modules(rl_games.IMPORTS["torch"])
        with call.guarded():
            env = make_env(TASK, 4)
            try:
                job = PlayJob(env=env, config=config, checkpoint=trained.checkpoint, device="cpu", deterministic=True)
                policy = rl_games.load_policy(job)
                assert policy.player.is_rnn
                assert all(bool((state == 0).all()) for state in policy.player.states)  # zero at the start
                observations, _ = env.reset(seed=1)
                with torch.inference_mode():
                    for _ in range(3):
                        observations, *_ = env.step(policy(observations))
                assert all(bool((state != 0).any(dim=-1).all()) for state in policy.player.states)
                done = torch.tensor([True, False, True, False])
                policy.episodes_ended(done)
                for state in policy.player.states:  # hidden and cell states of the LSTM: [layers, envs, units]
                    assert bool((state[:, done] == 0).all())
                    assert bool((state[:, ~done] != 0).any(dim=-1).all())
            finally:
                env.close()


def test_the_rollout_tells_a_recurrent_policy_which_episodes_ended():
    """`evaluate` calls `episodes_ended(done)` after every step where an episode ended, with that step's mask."""
    env = make_env(TASK, 3, env_kwargs={"max_episode_steps": 4})
    seen = []

    class Remembering:
        def __call__(self, observations):
            return torch.zeros(observations.shape[0], 1)

        def episodes_ended(self, done):
            seen.append(done.clone())

    try:
        episodes = evaluate(env, Remembering(), num_episodes=6, max_steps=100, seed=0)
    finally:
        env.close()
    assert len(episodes.returns) == 6
    assert [mask.tolist() for mask in seen] == [[True, True, True], [True, True, True]]


def test_a_recurrent_policy_is_not_exported(trained):
    root = str(trained.run_dir.parents[2])
    with pytest.raises(InvalidArgument, match="recurrent rl_games policies"):
        rlrun.export(rlrun.ExportRequest(task=TASK, library="rl_games", log_root=root))


def test_sequences_that_do_not_tile_the_rollout_are_refused_before_the_run(tmp_path):
    path = recurrent_config(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["params"]["config"]["seq_length"] = 3
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    request = rlrun.TrainRequest(
        task=TASK, library="rl_games", num_envs=4, log_root=str(tmp_path / "logs"), agent_config=str(path)
    )
    with pytest.raises(InvalidArgument, match="horizon_length 8 is not a multiple of the recurrent network's seq_len"):
        rlrun.train(request)
    assert not (tmp_path / "logs").exists()
