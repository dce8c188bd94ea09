"""A caller on the `spawn` start method (TorchRL's import sets it; so do many scripts) gets no process from a
call: under `spawn` the first lock or queue a library makes (tqdm's bar lock in SKRL, tensorboardX's event
queue in rl_games) starts multiprocessing's resource tracker, so the plan's import phase starts it first
(`rlrun.api.imports.start_resource_tracker`), as a fresh process running the library would have it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support import CONTRACT_CASES

SPAWN_CALLER = """
import json, multiprocessing, sys
multiprocessing.set_start_method("spawn")
import rlrun
spec = json.loads(sys.argv[2])
rlrun.train(rlrun.TrainRequest(task="rlrun/Pendulum-v1", log_root=sys.argv[1], **spec), check_leaks=True)
assert multiprocessing.get_start_method() == "spawn"
"""


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CONTRACT_CASES))
def test_a_caller_on_the_spawn_start_method_is_left_without_a_resource_tracker(case, tmp_path):
    spec = dict(CONTRACT_CASES[case][0])
    if spec.get("ml_framework") == "jax":
        pytest.importorskip("jax")
    spec["max_iterations"] = 1
    done = subprocess.run(
        [sys.executable, "-c", SPAWN_CALLER, str(tmp_path), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
