"""A mistyped name or a missing file is answered from data, before torch or any RL library is imported (a native
task's `env.` keys excepted: its env module imports torch)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

EARLY = {
    # case: (command line, what the one line says)
    "library": (["train", "--task", "rlrun/CartPole-v1", "--library", "sb"], "Did you mean 'sb3'?"),
    "task": (["train", "--task", "rlrun/CartPol-v1"], "Did you mean 'rlrun/CartPole-v1'?"),
    "algorithm": (["train", "--task", "rlrun/CartPole-v1", "--library", "sb3", "--algorithm", "ppx"], "'ppo'"),
    "framework": (["train", "--task", "rlrun/CartPole-v1", "--library", "skrl", "--ml_framework", "jx"], "jax"),
    "override key": (
        ["train", "--task", "rlrun/CartPole-v1", "--library", "rsl_rl", "agent.algorithm.gama=0.9"],
        "Did you mean 'agent.algorithm.gamma'?",
    ),
    "nested override key": (
        ["train", "--task", "rlrun/Pendulum-v1", "--library", "rl_games", "agent.params.config.horizon_lenght=8"],
        "horizon_length",
    ),
    "override key of RL Zoo's entry": (  # SB3 on a Gymnasium id starts from RL Zoo's tuned entry (rl_zoo3)
        ["train", "--task", "CartPole-v1", "--library", "sb3", "agent.n_stepz=8"],
        "Did you mean 'agent.n_steps'?",
    ),
    "off-policy override key of RL Zoo's entry": (
        ["train", "--task", "Pendulum-v1", "--library", "sb3", "--algorithm", "sac", "agent.learning_startz=1"],
        "Did you mean 'agent.learning_starts'?",
    ),
    "env override key of a Gymnasium id": (  # its env module is imported (MuJoCo's), torch is not
        ["train", "--task", "HalfCheetah-v5", "--library", "rsl_rl", "env.forward_reward_weigth=2"],
        "Did you mean 'env.forward_reward_weight'?",
    ),
    "env override key of a native task": (  # read from its env class's source: its module imports torch
        ["train", "--task", "rlrun/CartPole-v1", "--library", "sb3", "env.force_magg=5"],
        "Did you mean 'env.force_mag'?",
    ),
    "env override value of a native task": (
        ["train", "--task", "rlrun/Pendulum-v1", "--library", "rsl_rl", "env.g=heavy"],
        "expects a number",
    ),
    "env override key of a native task for a zero agent": (
        ["zero", "--task", "rlrun/Pendulum-v1", "env.gravty=9"],
        "Keys of env: max_episode_steps, g.",
    ),
    "env override key of a random agent": (
        ["random", "--task", "Pendulum-v1", "env.gravty=9"],
        "Keys of env: g, max_episode_steps.",
    ),
    "missing checkpoint": (
        ["play", "--task", "rlrun/CartPole-v1", "--library", "sb3", "--checkpoint", "no.pt"],
        "no.pt",
    ),
    "nothing to resume": (["train", "--task", "rlrun/CartPole-v1", "--library", "sb3", "--resume"], "train one first"),
    "nothing to export": (["export", "--task", "rlrun/CartPole-v1", "--library", "rsl_rl"], "train one first"),
}
PROBE = """
import json, sys
import rlrun.cli
code = rlrun.cli.main(sys.argv[2:] + ["--log_root", sys.argv[1]])
heavy = sorted(name for name in ("torch", "stable_baselines3", "rsl_rl", "skrl", "rl_games", "torchrl", "jax")
               if name in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


@pytest.mark.parametrize("case", list(EARLY))
def test_a_user_error_is_answered_before_torch_is_imported(case, tmp_path):
    words, expected = EARLY[case]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "logs"), *words], capture_output=True, text=True, timeout=120
    )
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome == {"code": 2, "heavy": []}, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0]
    assert not (tmp_path / "logs").exists()


def test_exporting_when_only_a_jax_run_exists_says_so_and_how_to_export(tmp_path):
    import rlrun
    from rlrun import runs
    from rlrun.errors import InvalidArgument

    run_dir = tmp_path / "skrl" / "rlrun_Pendulum-v1" / "2026-12-01_10-00-00"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "agent_8.pickle").write_bytes(b"jax weights")
    manifest = {
        "library": "skrl",
        "task": "rlrun/Pendulum-v1",
        "ml_framework": "jax",
        "algorithm": "ppo",
        "created_at": "2026-12-01T10:00:00+00:00",
        "checkpoints": [{"file": "checkpoints/agent_8.pickle"}],
    }
    runs.write_manifest(run_dir, manifest)
    with pytest.raises(
        InvalidArgument,
        match=r"runs on jax, and rlrun exports PyTorch policies only; train one with --ml_framework torch",
    ):
        rlrun.export(rlrun.ExportRequest(task="rlrun/Pendulum-v1", library="skrl", log_root=str(tmp_path)))
    assert sorted(path.name for path in run_dir.iterdir()) == ["checkpoints", "run.json"]  # nothing written


def test_a_linked_experiment_folder_is_refused_before_torch_is_imported(tmp_path):
    """A planted link where a training would make its run folder is answered from the folder tree alone."""
    logs, outside = tmp_path / "logs", tmp_path / "outside"
    outside.mkdir()
    (logs / "sb3").mkdir(parents=True)
    (logs / "sb3" / "rlrun_CartPole-v1").symlink_to(outside)
    words = ["train", "--task", "rlrun/CartPole-v1", "--library", "sb3", "--max_iterations", "1"]
    done = subprocess.run([sys.executable, "-c", PROBE, str(logs), *words], capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": 2, "heavy": []}, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "rlrun_CartPole-v1' is a link" in line
    assert list(outside.iterdir()) == [] and sorted(p.name for p in (logs / "sb3").iterdir()) == ["rlrun_CartPole-v1"]
