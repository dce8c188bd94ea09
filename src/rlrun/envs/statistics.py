"""Episode returns and lengths of a torch vector env (SAME_STEP autoreset), kept on its device.

Gymnasium's `gymnasium.wrappers.vector.RecordEpisodeStatistics` keeps its counters in NumPy arrays
and fails on the first step of a torch env (`ndarray += Tensor` raises `TypeError`), hence this one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv, VectorWrapper

from rlrun.envs.batched import BatchedVectorEnv


class _Log:
    """The values of finished episodes, kept as NumPy arrays: no Python number is made per episode.

    A step's values are kept as the array it appended: a list append, where copying them into one growing
    array would cost more every step and its doublings would fault in fresh memory at every size. Every 256
    of them are joined into one chunk; reads take the newest pieces for a `tail` and join everything only for
    the whole list.
    """

    JOIN = 256
    """Pieces joined into one chunk at a time."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._pieces: list[np.ndarray] = []
        self._size = 0

    def append(self, values: np.ndarray) -> None:
        """Keep `values`, an array that nothing writes again (a fancy-indexed copy)."""
        self._pieces.append(values)
        self._size += len(values)
        if len(self._pieces) >= self.JOIN:
            self._chunks.append(np.concatenate(self._pieces))
            self._pieces.clear()

    def __len__(self) -> int:
        return self._size

    def tail(self, count: int) -> list[Any]:
        """The last `count` values (fewer when there are fewer), oldest first, as Python numbers."""
        newest: list[np.ndarray] = []
        found = 0
        # Lazily, newest first, without first unpacking every piece into a tuple.
        for array in itertools.chain(reversed(self._pieces), reversed(self._chunks)):
            if found >= count:
                break
            newest.append(array)
            found += len(array)
        if not newest:
            return []
        return np.concatenate(newest[::-1])[-count:].tolist()

    def tolist(self) -> list[Any]:
        if not self._size:
            return []
        return np.concatenate([*self._chunks, *self._pieces]).tolist()


class EpisodeStatistics(VectorWrapper):
    """Count transitions and record the return and length of every finished episode.

    Running returns and lengths stay on the env's device; a step syncs with the host only to fetch
    the episodes that ended in it, into NumPy logs (a step of thousands of envs ends hundreds of episodes,
    and a Python number for each would cost more than the step). `on_step(self)` is called after every step
    (progress displays). A native task on the CPU counts its episodes' lengths itself (`ended_lengths`, from
    its reset, as its time limit does); for other envs the wrapper counts them, from its own reset.
    """

    env_steps: int
    """Transitions taken since construction, summed over envs."""

    def __init__(self, env: VectorEnv, on_step: Callable[[EpisodeStatistics], None] | None = None):
        super().__init__(env)
        self.on_step = on_step
        self.env_steps = 0
        self._num_envs = self.num_envs
        self._episode_returns = _Log()
        self._episode_lengths = _Log()
        self._returns = torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)
        self._lengths = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self._done = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._clock = 0
        self._views = None
        self._native = None
        if self._returns.device.type == "cpu":
            # NumPy views of the same memory (NumPy's dispatch costs less than torch's). `_lengths` holds the step
            # (`_clock`) at which each env's episode started: a length is one subtraction when it ends.
            self._views = (self._returns.numpy(), self._lengths.numpy(), self._done.numpy())
            if isinstance(env, BatchedVectorEnv) and type(env).step is BatchedVectorEnv.step:
                # It has found the ended envs and counted their steps already: no second search, no counters.
                self._native = env

    @property
    def episodes(self) -> int:
        """How many episodes have finished."""
        return len(self._episode_returns)

    @property
    def episode_returns(self) -> list[float]:
        """Undiscounted return of every finished episode, oldest first (within a step, in env-index order);
        a new list on every read (`mean_return` and `episodes` read the log itself)."""
        return self._episode_returns.tolist()

    @property
    def episode_lengths(self) -> list[int]:
        """Length of every finished episode, in the same order as `episode_returns`."""
        return self._episode_lengths.tolist()

    @property
    def device(self) -> torch.device:
        """The device of the wrapped env's tensors (found through Gymnasium wrappers, which do not forward it)."""
        env: Any = self.env  # any wrapper, down to the env that has a device
        while not hasattr(env, "device") and hasattr(env, "env"):
            env = env.env
        device: torch.device = env.device
        return device

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the env and drop the episodes in progress (finished ones are kept)."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._returns.zero_()
        self._lengths.fill_(self._clock)
        return obs, info

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step the env, update the running statistics, record finished episodes, call `on_step`."""
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self.env_steps += self._num_envs
        if self._views is not None:  # on the CPU
            returns, starts, done = self._views
            np.add(returns, reward.numpy(), out=returns)
            native = self._native
            if native is not None:  # a native task: it has found the ended envs and counted their steps
                ended = native.ended_envs
            else:
                self._clock += 1
                ended = np.logical_or(terminated.numpy(), truncated.numpy(), out=done).nonzero()[0]  # index order
            if ended.size:
                self._episode_returns.append(returns[ended])
                returns[ended] = 0.0
                if native is not None:
                    self._episode_lengths.append(native.ended_lengths)
                else:
                    self._episode_lengths.append(self._clock - starts[ended])
                    starts[ended] = self._clock
        else:
            running, lengths, ended_mask = self._returns, self._lengths, self._done
            running.add_(reward)
            lengths.add_(1)
            torch.logical_or(terminated, truncated, out=ended_mask)
            if ended_mask.any():  # one host sync per step; the boolean mask keeps env-index order
                self._episode_returns.append(running[ended_mask].cpu().numpy())
                self._episode_lengths.append(lengths[ended_mask].cpu().numpy())
                running[ended_mask] = 0.0
                lengths[ended_mask] = 0
        if self.on_step is not None:
            self.on_step(self)
        return obs, reward, terminated, truncated, info

    def mean_return(self, last: int = 100) -> float | None:
        """Return the mean return of the last `last` finished episodes, or None before the first one."""
        if last < 1:
            raise ValueError(f"last must be at least 1, got {last}.")
        recent = self._episode_returns.tail(last)
        return sum(recent) / len(recent) if recent else None

    def mean_length(self, last: int = 100) -> float | None:
        """Return the mean length of the last `last` finished episodes, or None before the first one."""
        if last < 1:
            raise ValueError(f"last must be at least 1, got {last}.")
        recent = self._episode_lengths.tail(last)
        return sum(recent) / len(recent) if recent else None
