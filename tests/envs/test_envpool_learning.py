"""PPO learns HalfCheetah-v5 on EnvPool: rlrun's trainings there are trainings, not just steps that run.

The budget and margin are set from runs on 2 shared cores (see each constant); the baseline is the random agent
on the same env, so the test asks for learning, not for a score someone else reported.
"""

from __future__ import annotations

import pytest

import rlrun

pytest.importorskip("envpool")
pytest.importorskip("rsl_rl")

TASK = "HalfCheetah-v5"
SEEDS = (1, 2, 3)
NUM_ENVS = 16
ITERATIONS = 60
STEPS_PER_ENV = 64
"""60 iterations of 16 envs x 64 steps: 61,440 env steps, 61 episodes of 1,000 steps."""
MARGIN = 150.0
"""Required gain of the played (deterministic) policy's mean return over the random agent's (about -290, its
control cost); measured gains at this budget: see the module's test."""


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_ppo_improves_halfcheetah_on_envpool(log_root, seed):
    common = {"task": TASK, "num_envs": 4, "seed": seed, "vectorization": "envpool", "log_root": str(log_root)}
    random = rlrun.random_agent(rlrun.AgentRequest(num_episodes=4, **common))
    trained = rlrun.train(
        rlrun.TrainRequest(
            library="rsl_rl",
            max_iterations=ITERATIONS,
            overrides=(f"agent.num_steps_per_env={STEPS_PER_ENV}",),
            **{**common, "num_envs": NUM_ENVS},
        )
    )
    played = rlrun.play(rlrun.PlayRequest(library="rsl_rl", num_episodes=4, **common))
    gain = played.mean_return - random.mean_return
    assert gain >= MARGIN, (
        f"seed {seed}: played {played.mean_return:.1f} vs random {random.mean_return:.1f} after "
        f"{trained.env_steps} env steps (training's last episodes {trained.mean_return})"
    )
