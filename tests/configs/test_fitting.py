"""A shipped configuration fits the `--num_envs` asked for: its minibatch is resized to split the rollout, the
number of minibatches kept, and the change recorded; a minibatch the user set is the user's."""

from __future__ import annotations

import json
import warnings

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import rlrun
from rlrun.configs.fitting import fit_minibatch
from rlrun.errors import InvalidArgument

TASK = "rlrun/Pendulum-v1"


def rollout(config: dict, num_envs: int) -> int:
    """A library whose rollout is `n_steps` per env and which refuses a minibatch that does not split it."""
    batch = config["n_steps"] * num_envs
    if batch % config["train"]["minibatch"]:
        raise InvalidArgument("does not split")
    return batch


def shipped(n_steps: int, own_envs: int, minibatch: int) -> dict:
    return {"num_envs": own_envs, "max_iterations": 5, "seed": 1, "n_steps": n_steps, "train": {"minibatch": minibatch}}


def test_the_number_of_minibatches_is_kept():
    fitted, changed = fit_minibatch(
        shipped(8, 16, 64), key="train.minibatch", num_envs=4, source="rlrun", overrides=(), steps=rollout
    )
    assert fitted["train"]["minibatch"] == 16  # 128 steps in 2 minibatches at 16 envs; 32 steps in 2 at 4
    assert changed == {"train.minibatch": {"from": 64, "to": 16}}


def test_a_fitting_minibatch_at_the_configurations_own_envs_is_left_alone():
    config = shipped(8, 16, 64)
    assert fit_minibatch(config, key="train.minibatch", num_envs=16, source="rlrun", overrides=(), steps=rollout) == (
        config,
        {},
    )


@pytest.mark.parametrize("source", ["file", "run"])
def test_a_file_or_a_runs_configuration_is_not_fitted(source):
    config = shipped(8, 16, 64)
    assert fit_minibatch(config, key="train.minibatch", num_envs=4, source=source, overrides=(), steps=rollout)[1] == {}


def test_an_override_of_the_minibatch_is_not_fitted():
    words = ("agent.train.minibatch=64",)
    config = shipped(8, 16, 64)
    assert (
        fit_minibatch(config, key="train.minibatch", num_envs=4, source="rlrun", overrides=words, steps=rollout)[1]
        == {}
    )


@given(
    n_steps=st.integers(1, 64),
    own_envs=st.integers(1, 512),
    minibatches=st.integers(1, 64),
    num_envs=st.integers(1, 512),
)
def test_a_fitted_minibatch_always_splits_the_rollout(n_steps, own_envs, minibatches, num_envs):
    minibatch = max(1, n_steps * own_envs // minibatches)
    config = shipped(n_steps, own_envs, minibatch)
    fitted, changed = fit_minibatch(
        config, key="train.minibatch", num_envs=num_envs, source="rlrun", overrides=(), steps=rollout, minimum=2
    )
    size = fitted["train"]["minibatch"]
    batch = n_steps * num_envs
    if batch >= 2:
        assert batch % size == 0 and size <= batch
        assert size >= 2 or size == minibatch  # a fitting minibatch of 1 that the configuration chose is its own
    assert changed == ({} if size == minibatch else {"train.minibatch": {"from": minibatch, "to": size}})


SMALL_NETS = {
    "rl_games": ("agent.params.network.mlp.units=[16,16]",),
    "torchrl": ("agent.actor.hidden=[16,16]", "agent.critic.hidden=[16,16]"),
}


@pytest.mark.parametrize(
    ("library", "num_envs", "key"),
    [("rl_games", 8, "params.config.minibatch_size"), ("torchrl", 2, "minibatch_size")],
)
def test_the_shipped_configuration_trains_with_few_envs_and_says_what_it_fitted(library, num_envs, key, tmp_path):
    result = rlrun.train(
        rlrun.TrainRequest(
            task=TASK, library=library, num_envs=num_envs, max_iterations=1, log_root=str(tmp_path),
            overrides=SMALL_NETS[library],
        )
    )  # fmt: skip
    assert result.status == "completed"
    fitted = json.loads((result.run_dir / "run.json").read_text())["agent_config"]["fitted"]
    agent = yaml.safe_load((result.run_dir / "params" / "agent.yaml").read_text())
    value = agent
    for part in key.split("."):
        value = value[part]
    assert fitted[key]["to"] == value and result.env_steps % value == 0
    assert f"Fitted to num_envs {num_envs}: {key}" in (result.run_dir / "params" / "agent.yaml").read_text()


def test_sb3_ppo_with_few_envs_trains_under_warnings_as_errors(tmp_path):
    """rlrun/CartPole-v1's tuned batch of 512 is one minibatch at 32 envs; over 16 steps x 4 envs, SB3 would warn
    (and fail under "error") unless it is fitted."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = rlrun.train(
            rlrun.TrainRequest(
                task="rlrun/CartPole-v1", library="sb3", num_envs=4, max_iterations=1, log_root=str(tmp_path)
            )
        )
    assert result.status == "completed"
    recorded = json.loads((result.run_dir / "run.json").read_text())["agent_config"]
    assert recorded["fitted"] == {"batch_size": {"from": 512, "to": 64}}


def test_a_minibatch_the_user_set_is_refused_rather_than_changed(tmp_path):
    with pytest.raises(InvalidArgument, match="minibatch_size 7 does not split"):
        rlrun.train(
            rlrun.TrainRequest(
                task=TASK, library="rl_games", num_envs=8, max_iterations=1, log_root=str(tmp_path),
                overrides=("agent.params.config.minibatch_size=7",),
            )
        )  # fmt: skip
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
