"""A Gymnasium task that SIGKILLs the process stepping it, but only in a pool worker (a process with a
multiprocessing parent): a bench cell whose worker dies in the middle of training. Used as the `module:id`
task `dying_task:RlrunTestDying-v0`, so that spawned workers import it too."""

from __future__ import annotations

import multiprocessing
import os
import signal

import gymnasium
import numpy as np

TASK = "RlrunTestDying-v0"
KILL_AT_STEP = 20


class DyingEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps == KILL_AT_STEP and multiprocessing.parent_process() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return np.zeros(3, np.float32), 0.0, False, False, {}


if TASK not in gymnasium.registry:
    gymnasium.register(TASK, entry_point=DyingEnv, max_episode_steps=10)
