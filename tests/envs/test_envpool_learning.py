"""PPO learns HalfCheetah-v5 on EnvPool: rlrun's trainings there are trainings, not just steps that run.

The budget and margins are set from runs on 2 shared cores (see the constants); the baseline is the random agent
on the same env and seed, so the test asks for learning, not for a score someone else reported.
"""

from __future__ import annotations

import statistics

import pytest

import rlrun

pytest.importorskip("envpool")
pytest.importorskip("rsl_rl")

TASK = "HalfCheetah-v5"
SEEDS = (1, 2, 3)
NUM_ENVS = 16
ITERATIONS = 60
STEPS_PER_ENV = 64
"""60 iterations of 16 envs x 64 steps: 61,440 env steps (61 episodes of 1,000 steps), about 100 s a seed on 2
shared cores (about 5 minutes for the three)."""
MEAN_GAIN = 300.0
SEED_GAIN = 50.0
"""Required gains of the played (deterministic, 4 episodes) policy's mean return over the random agent's (-230
to -285, its control cost): on average over the seeds, and for every seed. Measured at this budget: 912, 524 and
82. PPO's deterministic return on HalfCheetah swings from one iteration to the next (seed 3 gained 825 at 40
iterations, 82 at 60), so each seed is only asked to have moved, and the seeds together to have learned."""


def gain(seed: int, log_root: str) -> float:
    common = {"task": TASK, "num_envs": 4, "seed": seed, "vectorization": "envpool", "log_root": log_root}
    random = rlrun.random_agent(rlrun.AgentRequest(num_episodes=4, **common))
    rlrun.train(
        rlrun.TrainRequest(
            library="rsl_rl",
            max_iterations=ITERATIONS,
            overrides=(f"agent.num_steps_per_env={STEPS_PER_ENV}",),
            **{**common, "num_envs": NUM_ENVS},
        )
    )
    played = rlrun.play(rlrun.PlayRequest(library="rsl_rl", num_episodes=4, **common))
    return played.mean_return - random.mean_return


@pytest.mark.slow
def test_ppo_improves_halfcheetah_on_envpool(tmp_path):
    gains = {seed: gain(seed, str(tmp_path / f"seed{seed}")) for seed in SEEDS}
    assert statistics.mean(gains.values()) >= MEAN_GAIN, gains
    assert min(gains.values()) >= SEED_GAIN, gains
