"""An Atari task end to end: SB3 (the library with an image policy) trains on it through EnvPool and through
Gymnasium's vector envs with RL Zoo's atari configuration, plays and exports it, with no leak; the libraries
without an image policy are refused before anything is made. Tiny budgets: the contract, not learning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import rlrun

pytest.importorskip("ale_py")
pytest.importorskip("cv2")
pytest.importorskip("envpool")
pytest.importorskip("stable_baselines3")

TASK = "ALE/Breakout-v5"
SMALL = ("agent.n_steps=16", "agent.batch_size=32", "agent.n_epochs=1")


def train(tmp_path: Path, vectorization: str, library: str | None = "sb3") -> rlrun.TrainResult:
    request = rlrun.TrainRequest(
        task=TASK,
        library=library,
        vectorization=vectorization,
        num_envs=2,
        max_iterations=2,
        seed=1,
        log_root=str(tmp_path),
        overrides=SMALL,
    )
    return rlrun.train(request, check_leaks=True)


@pytest.mark.parametrize("vectorization", ["envpool", "sync"])
def test_sb3_trains_plays_and_exports_an_atari_task(tmp_path, vectorization):
    result = train(tmp_path, vectorization)
    manifest = json.loads((result.run_dir / "run.json").read_text())
    assert manifest["vectorization"] == vectorization and manifest["agent_config"]["entry"] == "atari"
    agent = yaml.safe_load((result.run_dir / "params" / "agent.yaml").read_text())
    assert agent["policy"] == "CnnPolicy" and agent["clip_reward"] is True
    assert result.env_steps == 2 * 2 * 16 and result.checkpoint is not None
    played = rlrun.play(
        rlrun.PlayRequest(
            task=TASK,
            library="sb3",
            checkpoint=str(result.checkpoint),
            log_root=str(tmp_path),
            num_envs=2,
            num_episodes=2,
            vectorization=vectorization,
            overrides=("env.max_episode_steps=40",),
        ),
        check_leaks=True,
    )
    assert played.returns and all(length == 40 for length in played.lengths)
    exported = rlrun.export(
        rlrun.ExportRequest(
            task=TASK,
            library="sb3",
            checkpoint=str(result.checkpoint),
            log_root=str(tmp_path),
            format="both",
            vectorization=vectorization,
        ),
        check_leaks=True,
    )
    assert exported.files and all(Path(path).is_file() for path in exported.files)
    assert max(exported.max_abs_error.values()) < 1e-4


def test_without_a_library_an_atari_task_goes_to_one_with_an_image_policy(tmp_path):
    result = train(tmp_path, "envpool", library=None)
    assert json.loads((result.run_dir / "run.json").read_text())["library"] == "sb3"


@pytest.mark.parametrize("library", ["rsl_rl", "skrl", "rl_games", "torchrl"])
def test_a_library_without_an_image_policy_is_refused_before_anything_is_made(tmp_path, capsys, library):
    code = rlrun.main(["train", "--task", TASK, "--library", library, "--log_root", str(tmp_path)])
    assert code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == f"rlrun: error: {library} has no policy for {TASK}'s image observations; use --library sb3."
    assert list(tmp_path.iterdir()) == []
