"""`--agent_config PATH`: a configuration file in the library's own layout replaces the
shipped one; `agent.` overrides apply on top; its values are checked before any directory exists; and every
library trains, unchanged, from the `params/agent.yaml` of one of its own runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import rlrun
from rlrun import configs
from rlrun.errors import InvalidArgument, UserError
from rlrun.libraries import LIBRARIES

pytest.importorskip("rsl_rl")
pytest.importorskip("stable_baselines3")
pytest.importorskip("rl_games")
pytest.importorskip("skrl")  # the libraries its cases train with

PENDULUM = "rlrun/Pendulum-v1"
SMALL = {
    "rsl_rl": ("agent.num_steps_per_env=8", "agent.actor.hidden_dims=[16,16]", "agent.critic.hidden_dims=[16,16]"),
    "skrl": ("agent.agent.rollouts=8", "agent.agent.learning_epochs=1", "agent.agent.mini_batches=1"),
    "sb3": ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]"),
    "rl_games": ("agent.params.config.horizon_length=8", "agent.params.config.minibatch_size=16"),
    "torchrl": ("agent.steps_per_env=8", "agent.minibatch_size=16", "agent.num_epochs=1"),
}
"""Per library, overrides for a run of a second or so (a library added to the table later runs with none)."""
SLOW_FRAMEWORKS = ("jax",)
"""JAX compiles its update on first use: several seconds per run."""


def library_cases() -> list[object]:
    cases = []
    for library in LIBRARIES.values():
        for framework in library.frameworks:
            marks = [pytest.mark.slow] if framework in SLOW_FRAMEWORKS else []
            if not library.installed:
                marks.append(pytest.mark.skip(reason=f"{library.name} is not installed"))
            case_id = library.name if framework == library.frameworks[0] else f"{library.name}-{framework}"
            cases.append(pytest.param(library.name, framework, id=case_id, marks=marks))
    return cases


def small_train(root: Path, library: str, framework: str | None = None, **fields: object) -> rlrun.TrainResult:
    fields = {"num_envs": 2, "max_iterations": 1, "seed": 5, **fields}
    framework_field = {"ml_framework": framework} if framework not in (None, "torch") else {}
    return rlrun.train(
        rlrun.TrainRequest(task=PENDULUM, library=library, log_root=str(root), **framework_field, **fields)
    )


def manifest(result: rlrun.TrainResult) -> dict:
    return json.loads((result.run_dir / "run.json").read_text())


@pytest.mark.parametrize(("library", "framework"), library_cases())
def test_a_runs_agent_yaml_trains_unchanged_when_passed_back(library, framework, tmp_path):
    first = small_train(tmp_path / "logs", library, framework, overrides=SMALL.get(library, ()))
    saved = first.run_dir / "params" / "agent.yaml"
    second = small_train(tmp_path / "logs", library, framework, agent_config=str(saved))
    assert second.status == "completed" and second.checkpoint is not None
    assert yaml.safe_load((second.run_dir / "params" / "agent.yaml").read_text()) == yaml.safe_load(saved.read_text())
    assert second.env_steps == first.env_steps  # the same rollout length: the file's, not the shipped default's
    assert {key: manifest(second)["agent_config"][key] for key in ("from", "path")} == {
        "from": "file",
        "path": str(saved),
    }
    assert manifest(first)["agent_config"]["from"] == "rlrun"


def test_the_file_replaces_the_default_and_overrides_apply_on_top(tmp_path):
    shipped = configs.load_agent_config("sb3", "ppo", PENDULUM)
    mine = {**shipped, "n_steps": 8, "batch_size": 8, "policy_kwargs": {"net_arch": [8]}, "stats_window_size": 50}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(mine, sort_keys=False))
    result = small_train(
        tmp_path / "logs", "sb3", agent_config=str(path), overrides=("agent.stats_window_size=10", "agent.n_steps=4")
    )
    used = yaml.safe_load((result.run_dir / "params" / "agent.yaml").read_text())
    ran = {"seed": 5, "max_iterations": 1, "num_envs": 2}  # the run keys as they ran
    assert used == {**mine, "stats_window_size": 10, "n_steps": 4, **ran}  # an added key, then set by an override
    assert result.env_steps == 4 * 2


def test_run_keys_the_file_lacks_are_the_shipped_ones(tmp_path):
    path = tmp_path / "bare.yaml"
    path.write_text("n_steps: 8\nbatch_size: 16\n")
    shipped = configs.load_agent_config("sb3", "ppo", PENDULUM)
    config, source = configs.starting_config("sb3", "ppo", PENDULUM, path=str(path))
    assert config == {"num_envs": shipped["num_envs"], "max_iterations": shipped["max_iterations"], "seed": 42,
                      "n_steps": 8, "batch_size": 16}  # fmt: skip
    assert source == {"from": "file", "path": str(path)}


BAD_FILES = {
    # case id: (library, file text or None for no file, what the one-line error says)
    "missing file": ("sb3", None, "does not exist"),
    "not YAML": ("sb3", "n_steps: [8,\nbatch_size: {", "is not valid YAML"),
    "a list": ("sb3", "- n_steps\n- 8\n", "not a mapping"),
    "empty": ("sb3", "", "holds nothing"),
    "negative learning rate": ("sb3", "learning_rate: -0.001\n", "'agent.learning_rate: -0.001': a learning rate"),
    "layer size not an integer": ("sb3", "policy_kwargs:\n  net_arch: [64, big]\n", "list of integers"),
    "rollout length zero": ("sb3", "n_steps: 0\n", "'agent.n_steps: 0': this count must be at least 1"),
    "a key SB3 lacks": ("sb3", "n_step: 8\n", "agent.n_step is not a keyword of SB3's"),
    "rsl_rl gamma not a number": ("rsl_rl", "algorithm:\n  gamma: high\n", "'agent.algorithm.gamma: high' expects"),
    "rl_games without params": ("rl_games", "config:\n  horizon_length: 8\n", "lacks the key 'params'"),
    "rl_games minibatch too big": (
        "rl_games",
        "params:\n  config:\n    horizon_length: 8\n    minibatch_size: 7\n",
        "minibatch_size 7 does not split",
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_file_is_refused_in_one_line_before_anything_exists(case, tmp_path):
    library, text, expected = BAD_FILES[case]
    path = tmp_path / "agent.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(UserError) as caught:
        small_train(tmp_path / "logs", library, agent_config=str(path))
    message = str(caught.value)
    assert expected in message and "\n" not in message
    if text is not None and case != "rl_games minibatch too big":
        assert str(path) in message or "agent." in message
    assert not (tmp_path / "logs").exists()


def test_a_file_of_another_layout_names_what_it_lacks(tmp_path):
    """An rsl_rl file given to rl_games: the key rl_games needs is named, and the fix."""
    first = small_train(tmp_path / "logs", "rsl_rl", overrides=SMALL["rsl_rl"])
    with pytest.raises(InvalidArgument, match=r"lacks the key .params.; start from a run.s params/agent\.yaml"):
        small_train(tmp_path / "other", "rl_games", agent_config=str(first.run_dir / "params" / "agent.yaml"))
    assert not (tmp_path / "other").exists()


def test_resuming_with_a_file_takes_the_file(tmp_path):
    first = small_train(tmp_path / "logs", "sb3", overrides=SMALL["sb3"])
    mine = yaml.safe_load((first.run_dir / "params" / "agent.yaml").read_text())
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({**mine, "learning_rate": 1.0e-4}, sort_keys=False))
    resumed = small_train(tmp_path / "logs", "sb3", resume=True, agent_config=str(path))
    assert yaml.safe_load((resumed.run_dir / "params" / "agent.yaml").read_text())["learning_rate"] == 1.0e-4
    assert manifest(resumed)["agent_config"]["from"] == "file"
    again = small_train(tmp_path / "logs", "sb3", resume=True)  # no file: the run's own configuration
    assert manifest(again)["agent_config"]["from"] == "run"
    assert yaml.safe_load((again.run_dir / "params" / "agent.yaml").read_text())["learning_rate"] == 1.0e-4


def test_the_flag_reaches_the_request(tmp_path):
    from rlrun import cli

    args = cli.parse(["train", "--task", PENDULUM, "--agent_config", "x.yaml"])
    assert args.agent_config == "x.yaml"
