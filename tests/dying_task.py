"""A Gymnasium task that SIGKILLs the process stepping it, but only in a pool worker (a process with a
multiprocessing parent): a bench cell whose worker dies in the middle of training. Used as the `module:id`
task `dying_task:RlrunTestDying-v0`, so that spawned workers import it too."""

from __future__ import annotations

import multiprocessing
import os
import shutil
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


FLAKY = "RlrunTestFlaky-v0"
FAILURES_FILE = "RLRUN_TEST_FAILURES"
"""The environment variable naming a file that holds how many more times the flaky task fails."""
KILL_NODE = "RLRUN_TEST_KILL_NODE"
"""Set in the environment of a Ray node's processes: there, the flaky task kills the node (its raylet and the
worker) instead of raising, and only there does it take a failure from the count."""
LOST_FOLDER = "RLRUN_TEST_LOST_FOLDER"
"""The environment variable naming a folder that the flaky task deletes before it kills its pool worker: a node
lost with its disk."""


class FlakyEnv(DyingEnv):
    """Fails at step `KILL_AT_STEP` while the count in the file that `$RLRUN_TEST_FAILURES` names is above 0
    (taking one off first): SIGKILLs a pool worker, raises in any other process. A bench cell that fails a set
    number of times, then trains."""

    def step(self, action):
        self.steps += 1
        if self.steps == KILL_AT_STEP and os.environ.get(KILL_NODE) and _take_a_failure():
            _kill_this_ray_node()
        if self.steps == KILL_AT_STEP and not os.environ.get(KILL_NODE) and _take_a_failure():
            if multiprocessing.parent_process() is not None:
                if os.environ.get(LOST_FOLDER):
                    shutil.rmtree(os.environ[LOST_FOLDER])
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("the flaky task failed on purpose")
        return np.zeros(3, np.float32), 0.0, False, False, {}


def _kill_this_ray_node() -> None:
    """SIGKILL the raylet this Ray worker runs under, then the worker: the node is gone, as a machine lost."""
    import psutil

    process = psutil.Process().parent()
    while process is not None and "raylet" not in process.name():
        process = process.parent()
    if process is not None:
        os.kill(process.pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _take_a_failure() -> bool:
    path = os.environ.get(FAILURES_FILE)
    if not path:
        return False
    with open(path, encoding="utf-8") as handle:
        left = int(handle.read())
    if left <= 0:
        return False
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(str(left - 1))
    return True


if FLAKY not in gymnasium.registry:
    gymnasium.register(FLAKY, entry_point=FlakyEnv, max_episode_steps=10)
