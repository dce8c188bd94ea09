"""PPO (RSL-RL) and SAC (SB3) learn HalfCheetah-v5 on EnvPool: rlrun's trainings there are trainings, not just
steps that run.

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


def gain(seed: int, log_root: str, library: str, algorithm: str, num_envs: int, iterations: int, *overrides: str):
    """How much better the trained policy plays (deterministic, 4 episodes) than the random agent, same env and
    seed."""
    common = {"task": TASK, "seed": seed, "vectorization": "envpool", "log_root": log_root}
    random = rlrun.random_agent(rlrun.AgentRequest(num_envs=min(num_envs, 4), num_episodes=4, **common))
    train = {"library": library, "algorithm": algorithm, "num_envs": num_envs, **common}
    rlrun.train(rlrun.TrainRequest(max_iterations=iterations, overrides=overrides, **train))
    played = rlrun.play(rlrun.PlayRequest(num_episodes=4, **{**train, "num_envs": min(num_envs, 4)}))
    return played.mean_return - random.mean_return


@pytest.mark.slow
def test_ppo_improves_halfcheetah_on_envpool(tmp_path):
    ppo = ("rsl_rl", "ppo", NUM_ENVS, ITERATIONS, f"agent.num_steps_per_env={STEPS_PER_ENV}")
    gains = {seed: gain(seed, str(tmp_path / f"seed{seed}"), *ppo) for seed in SEEDS}
    assert statistics.mean(gains.values()) >= MEAN_GAIN, gains
    assert min(gains.values()) >= SEED_GAIN, gains


SAC_STEPS = 20_000
SAC_CYCLE = 16
SAC_OVERRIDES = ("agent.learning_starts=1000", f"agent.train_freq={SAC_CYCLE}", f"agent.gradient_steps={SAC_CYCLE}")
"""SB3's SAC on one EnvPool env: 20,000 env steps (20 episodes), each iteration 16 steps then 16 updates (SAC's one
update per step), learning from step 1,000 on: about 270 s a seed on 2 shared cores."""
SAC_MEAN_GAIN = 200.0
SAC_SEED_GAIN = 100.0
"""Required gains of the played policy's mean return over the random agent's, on average and for every seed.
Measured at this budget: 548, 225 and 364 (at 12,000 steps, seed 1 had gained 91: SAC is still leaving the random
agent's return behind there)."""


@pytest.mark.slow
def test_sac_improves_halfcheetah_on_envpool(tmp_path):
    pytest.importorskip("stable_baselines3")
    sac = ("sb3", "sac", 1, SAC_STEPS // SAC_CYCLE, *SAC_OVERRIDES)
    gains = {seed: gain(seed, str(tmp_path / f"seed{seed}"), *sac) for seed in SEEDS}
    assert statistics.mean(gains.values()) >= SAC_MEAN_GAIN, gains
    assert min(gains.values()) >= SAC_SEED_GAIN, gains
