"""`train --resume` continues a run for every library: counters, optimiser state, the parent on record.

Each library trains N iterations straight through and N/2 + resume + N/2, and the two must end on the
same iteration count, checkpoint name, env-step total and optimiser step count (Adam's count goes on
from the parent's only if the optimiser state was loaded with the weights). Bitwise equality of the
two histories, where RSL-RL makes it possible, is tested in tests/libraries/test_rsl_rl.py.
"""

from __future__ import annotations

import io
import json
import zipfile

import pytest
import torch

import rlrun
from support import SHORT_RUNS as RUNS

TASK = "rlrun/Pendulum-v1"


def optimiser_steps(library, checkpoint):
    """Adam's step count for the first parameter, read from the library's own checkpoint format."""
    if library == "sb3":
        with zipfile.ZipFile(checkpoint) as archive:
            state = torch.load(io.BytesIO(archive.read("policy.optimizer.pth")), weights_only=True)
    else:
        key = "optimizer_state_dict" if library == "rsl_rl" else "optimizer"
        state = torch.load(checkpoint, weights_only=False)[key]  # rl_games' files hold NumPy scalars too
    return int(state["state"][0]["step"])


@pytest.mark.parametrize("library", list(RUNS))
def test_half_and_resumed_half_end_where_the_straight_run_ends(library, tmp_path):
    common = {"task": TASK, "library": library, "num_envs": 16, "seed": 3, "overrides": RUNS[library]}
    straight = rlrun.train(rlrun.TrainRequest(**common, max_iterations=16, log_root=str(tmp_path / "straight")))
    halves = str(tmp_path / "halves")
    first = rlrun.train(rlrun.TrainRequest(**common, max_iterations=8, log_root=halves))
    resumed = rlrun.train(rlrun.TrainRequest(**common, max_iterations=8, log_root=halves, resume=True))

    assert first.iterations == 8 and resumed.iterations == straight.iterations == 16
    assert resumed.checkpoint.name == straight.checkpoint.name
    assert first.env_steps + resumed.env_steps == straight.env_steps == 2048  # 1k + resume + 1k against 2k
    steps = [optimiser_steps(library, result.checkpoint) for result in (first, resumed, straight)]
    assert steps[0] > 0 and steps[1] == steps[2] == 2 * steps[0]
    manifest = json.loads((resumed.run_dir / "run.json").read_text())
    assert manifest["parent"]["checkpoint"] == str(first.checkpoint)
    recorded = [entry["iteration"] for entry in manifest["checkpoints"]]
    assert recorded[-1] == 16 and all(iteration >= 8 for iteration in recorded)
