"""Every library trains on an EnvPool task through its own runner, and its agent plays there; an RSL-RL and an SB3
run are exported too. Tiny budgets: these show the contract holds for each library, not that it learns
(`test_envpool_learning.py` does)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlrun
from support import CONTRACT_CASES

pytest.importorskip("envpool")

TASK = "Hopper-v5"


def train(tmp_path: Path, case: str) -> rlrun.TrainResult:
    spec, _ = CONTRACT_CASES[case]
    request = rlrun.TrainRequest(task=TASK, vectorization="envpool", seed=1, log_root=str(tmp_path), **spec)
    return rlrun.train(request, check_leaks=True)


SLOW = {"skrl_jax"}
"""Cases over ~20 s here (JAX compiles its functions first)."""


@pytest.mark.parametrize(
    "case", [pytest.param(case, marks=[pytest.mark.slow] * (case in SLOW)) for case in CONTRACT_CASES]
)
def test_each_library_trains_and_plays_on_envpool(tmp_path, case):
    spec, _ = CONTRACT_CASES[case]
    result = train(tmp_path, case)
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["vectorization"] == "envpool" and manifest["task"] == TASK
    assert result.env_steps > 0 and result.checkpoint is not None and result.checkpoint.is_file()
    played = rlrun.play(
        rlrun.PlayRequest(
            task=TASK,
            library=spec["library"],
            algorithm=spec.get("algorithm"),
            ml_framework=spec.get("ml_framework"),
            checkpoint=str(result.checkpoint),
            log_root=str(tmp_path),
            num_envs=2,
            num_episodes=2,
            max_steps=400,
            vectorization="envpool",
        ),
        check_leaks=True,
    )
    assert len(played.returns) >= 1 and played.env_steps > 0


@pytest.mark.parametrize("case", ["rsl_rl", "sb3"])
def test_a_run_trained_on_envpool_exports(tmp_path, case):
    spec, _ = CONTRACT_CASES[case]
    result = train(tmp_path, case)
    exported = rlrun.export(
        rlrun.ExportRequest(
            task=TASK,
            library=spec["library"],
            checkpoint=str(result.checkpoint),
            log_root=str(tmp_path),
            format="torchscript",
            vectorization="envpool",
        ),
        check_leaks=True,
    )
    assert exported.files and all(Path(path).is_file() for path in exported.files)
    assert max(exported.max_abs_error.values()) < 1e-4
