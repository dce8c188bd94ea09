"""A run's params files hold what ran: fed back through `--agent_config`, they repeat the run, row for row and
byte for byte, for every library; run.json names the source, the overrides and the files' hashes."""

from __future__ import annotations

import csv
import hashlib
import json
import zipfile
from pathlib import Path

import pytest
import yaml

import rlrun
from support import CONTRACT_CASES

TASK = "rlrun/Pendulum-v1"
CASES = [
    pytest.param(name, marks=[pytest.mark.slow] if name == "skrl_jax" else [])  # JAX compiles: seconds a run
    for name in ("rsl_rl", "skrl", "skrl_jax", "sb3", "rl_games", "torchrl", "torchrl_sac")
]
COUNTED = ("iteration", "env_steps", "mean_return", "mean_length", "episodes")
"""The metrics.csv columns a repeat must match (the rest are wall-clock times)."""


def rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open() as file:
        return [{key: row[key] for key in COUNTED} for row in csv.DictReader(file)]


WALL_CLOCK = ("start_time", "ep_info_buffer", "observation_space", "action_space")
"""Keys of SB3's `data` member that differ between equal runs: the wall-clock start, the last episodes stamped
with their wall-clock time, and the spaces cloudpickled with the state of their own RNG. rlrun never reads `data`
(`rlrun.trust.checkpoints`); the episodes' returns are the metrics rows, compared whole."""


def checkpoint_content(path: Path) -> object:
    """The checkpoint's bytes; for SB3's zip, each member's bytes (a zip stamps every member with the second it
    was written) and `data` less `WALL_CLOCK`."""
    if path.suffix != ".zip":
        return path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(members.pop("data"))
    return {**members, "data": {key: value for key, value in data.items() if key not in WALL_CLOCK}}


def params(run_dir: Path, name: str) -> dict:
    return yaml.safe_load((run_dir / "params" / name).read_text())


@pytest.mark.parametrize("case", CASES)
def test_training_from_a_runs_agent_yaml_repeats_the_run(case, tmp_path):
    spec, _ = CONTRACT_CASES[case]
    framework = {"ml_framework": spec["ml_framework"]} if "ml_framework" in spec else {}
    first = rlrun.train(
        rlrun.TrainRequest(
            task=TASK,
            log_root=str(tmp_path / "first"),
            **{**spec, "seed": 123, "overrides": (*spec["overrides"], "env.g=9.5")},
        )
    )
    agent = params(first.run_dir, "agent.yaml")
    assert (agent["seed"], agent["num_envs"], agent["max_iterations"]) == (
        123,
        spec["num_envs"],
        spec["max_iterations"],
    )
    assert params(first.run_dir, "env.yaml")["g"] == 9.5

    # Only the file, the task, the library (and its framework) and the env override, as the header says.
    header = (first.run_dir / "params" / "agent.yaml").read_text().splitlines()
    repeat = next(line for line in header if line.startswith("# Repeat it: "))
    assert f"--library {spec['library']}" in repeat and "--agent_config <this file>" in repeat and "env.g=9.5" in repeat
    again = rlrun.train(
        rlrun.TrainRequest(
            task=TASK,
            library=spec["library"],
            algorithm=spec.get("algorithm"),
            log_root=str(tmp_path / "again"),
            agent_config=str(first.run_dir / "params" / "agent.yaml"),
            overrides=("env.g=9.5",),
            **framework,
        )
    )
    assert params(again.run_dir, "agent.yaml") == agent
    assert params(again.run_dir, "env.yaml") == params(first.run_dir, "env.yaml")
    assert rows(again.run_dir) == rows(first.run_dir) and len(rows(first.run_dir)) == spec["max_iterations"]
    assert checkpoint_content(again.checkpoint) == checkpoint_content(first.checkpoint)


def test_run_json_names_the_source_the_overrides_and_the_params_hashes(tmp_path):
    spec, _ = CONTRACT_CASES["rsl_rl"]
    result = rlrun.train(rlrun.TrainRequest(task=TASK, log_root=str(tmp_path), **spec))
    recorded = json.loads((result.run_dir / "run.json").read_text())["agent_config"]
    assert recorded["from"] == "rlrun" and recorded["overrides"] == list(spec["overrides"])
    for name in ("agent.yaml", "env.yaml"):
        digest = hashlib.sha256((result.run_dir / "params" / name).read_bytes()).hexdigest()
        assert recorded["sha256"][name] == digest


def test_a_random_seed_is_recorded_as_the_seed_that_ran(tmp_path):
    spec, _ = CONTRACT_CASES["rsl_rl"]
    result = rlrun.train(rlrun.TrainRequest(task=TASK, log_root=str(tmp_path), **{**spec, "seed": -1}))
    recorded = json.loads((result.run_dir / "run.json").read_text())["seed"]
    assert recorded != -1 and params(result.run_dir, "agent.yaml")["seed"] == recorded


SB3_SMALL = ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")


def repeat(run_dir: Path, out: Path, **fields) -> rlrun.TrainResult:
    """A training from `run_dir`'s params/agent.yaml and nothing else but `fields`."""
    return rlrun.train(
        rlrun.TrainRequest(log_root=str(out), agent_config=str(run_dir / "params" / "agent.yaml"), **fields)
    )


def test_a_bench_cells_agent_yaml_repeats_the_cell(tmp_path):
    bench = rlrun.bench(
        rlrun.BenchRequest(
            tasks=("rlrun/CartPole-v1",), runs=("sb3",), seeds=(3,), env_steps=40, num_envs=2,
            overrides=SB3_SMALL, out=str(tmp_path / "bench"), report=False,
        )
    )  # fmt: skip
    row = json.loads((bench.out / "results.jsonl").read_text().splitlines()[0])
    cell = Path(row["run_dir"])
    agent = params(cell, "agent.yaml")
    assert (agent["seed"], agent["max_iterations"], agent["num_envs"]) == (3, 3, 2)  # 40 steps: 3 rollouts of 16
    again = repeat(cell, tmp_path / "again", task="rlrun/CartPole-v1", library="sb3")
    assert rows(again.run_dir) == rows(cell)
    assert checkpoint_content(again.checkpoint) == checkpoint_content(Path(row["checkpoint"]))


def test_tunes_best_yaml_repeats_the_best_trials_first_seed(tmp_path):
    pytest.importorskip("optuna")
    import optuna

    result = rlrun.tune(
        rlrun.TuneRequest(
            task="rlrun/CartPole-v1", library="sb3", num_envs=2, env_steps=40, n_trials=2, seeds=(4, 5),
            overrides=SB3_SMALL, search_space={"agent.learning_rate": "choice([0.001, 0.0003])"}, pruner="none",
            out=str(tmp_path / "tune"), report=False,
        )
    )  # fmt: skip
    storage = optuna.storages.RDBStorage(result.storage)
    try:
        best = optuna.load_study(study_name=result.study, storage=storage).trials[result.best_trial]
    finally:
        storage.remove_session()
        storage.engine.dispose()
    first_seed = Path(best.user_attrs["run_dirs"][0])
    header = result.best_config.read_text()
    assert header.startswith(f"# The agent configuration of trial {result.best_trial} ") and "--agent_config" in header
    assert yaml.safe_load(header) == params(first_seed, "agent.yaml")  # seed 4, the trial's iterations, its n_steps
    again = rlrun.train(
        rlrun.TrainRequest(
            task="rlrun/CartPole-v1",
            library="sb3",
            log_root=str(tmp_path / "again"),
            agent_config=str(result.best_config),
        )
    )
    assert rows(again.run_dir) == rows(first_seed)


def test_a_bench_row_names_its_configuration_source(tmp_path):
    bench = rlrun.bench(
        rlrun.BenchRequest(
            tasks=("rlrun/CartPole-v1",), runs=("sb3",), seeds=(0,), iterations=1, num_envs=4,
            out=str(tmp_path / "bench"), report=False,
        )
    )  # fmt: skip
    row = json.loads((bench.out / "results.jsonl").read_text().splitlines()[0])
    assert row["config_source"]["from"] == "rlrun" and row["config_source"]["path"] == "sb3/ppo/rlrun/CartPole-v1.yaml"
    assert row["config_source"]["fitted"] == {"batch_size": {"from": 512, "to": 64}}
