"""The report tests' data: the fixed results file of data/ and the metrics.csv of its run dirs.

data/results.jsonl: 2 tasks (rlrun/CartPole-v1 with reward threshold 475, Pendulum-v1 without) x 2 runs
(sb3/ppo, skrl/ppo) x 3 seeds, plus a failed cell (Pendulum-v1 skrl/ppo seed 3), a skipped one
(Pendulum-v1 sb3/dqn), an earlier failed row for `cp-sb3-0` that its rerun supersedes, and a torn last
line. Each completed cell's curve rises linearly to its final return over 10 iterations of 2048 env
steps; `cp-skrl-2` has no metrics.csv. The CartPole run dirs have a run.json naming their configuration's source
(`CONFIG_SOURCES`); the Pendulum ones have none.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
STEPS_PER_ITERATION = 2048
ITERATIONS = 10
NO_CURVE = "cp-skrl-2"
CARTPOLE = "rlrun/CartPole-v1"
CONFIG_SOURCES = {
    "sb3/ppo": {"from": "rl_zoo3", "path": "/site-packages/rl_zoo3/hyperparams/ppo.yml", "entry": "CartPole-v1"},
    "skrl/ppo": {"from": "rlrun", "path": "skrl/ppo/default.yaml"},
}


def write_manifest(run_dir: Path, agent_config: dict) -> None:
    """A run.json with the keys training writes that the report reads."""
    run_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"library": "sb3", "task": CARTPOLE, "agent_config": agent_config, "checkpoints": []}
    run_dir.joinpath("run.json").write_text(json.dumps(manifest), encoding="utf-8")


def write_metrics(run_dir: Path, final: float, steps_per_s: float, iterations: int = ITERATIONS) -> None:
    """A metrics.csv whose mean return is empty at iteration 0, then rises linearly to `final`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = ["iteration,env_steps,wall_s,steps_per_s,mean_return,mean_length,episodes"]
    for i in range(iterations + 1):
        steps = i * STEPS_PER_ITERATION
        wall = steps / steps_per_s
        mean_return = "" if i == 0 else repr(final * i / iterations)
        lines.append(f"{i},{steps},{wall!r},{steps_per_s!r},{mean_return},{20 + i},{3 * i}")
    run_dir.joinpath("metrics.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def fixture_rows() -> list[dict]:
    rows = []
    for line in (DATA / "results.jsonl").read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):  # the torn last line
            rows.append(json.loads(line))
    return rows
