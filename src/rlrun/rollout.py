"""Running a policy for a number of episodes, and the two policies that need no library (zero, random).

`evaluate` is what `play`, `rlrun zero` and `rlrun random` share: it steps rlrun's torch vector env
with a policy until every environment finished its share of the episodes, and reports returns and
lengths. Taking the first episodes of every environment (not the first episodes to finish) keeps
short episodes from being over-represented.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from rlrun.progress import Progress

if TYPE_CHECKING:
    from rlrun.envs import TorchVectorEnv

Policy = Callable[[Any], Any]


@dataclass(frozen=True)
class Episodes:
    """Returns and lengths of finished episodes, ordered by (episode index within its env, env index)."""

    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    env_steps: int
    wall_time_s: float

    @property
    def mean_return(self) -> float | None:
        return sum(self.returns) / len(self.returns) if self.returns else None

    @property
    def std_return(self) -> float | None:
        mean = self.mean_return
        if mean is None:
            return None
        return math.sqrt(sum((value - mean) ** 2 for value in self.returns) / len(self.returns))

    @property
    def mean_length(self) -> float | None:
        return sum(self.lengths) / len(self.lengths) if self.lengths else None


def evaluate(
    env: TorchVectorEnv,
    policy: Policy,
    *,
    num_episodes: int | None,
    max_steps: int,
    seed: int,
    progress: Progress | None = None,
) -> Episodes:
    """Step `env` with `policy` until `num_episodes` episodes are done (None: just `max_steps` vector steps).

    Stops after `max_steps` vector steps whatever happened; episodes still running then are not counted.
    """
    import torch

    cap = math.ceil(num_episodes / env.num_envs) if num_episodes is not None else None
    started = time.perf_counter()
    observations, _ = env.reset(seed=seed)
    running = torch.zeros(env.num_envs, dtype=torch.float64, device=env.device)
    steps = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
    finished = [0] * env.num_envs
    episodes: list[tuple[int, int, float, int]] = []
    env_steps = 0
    for _ in range(max_steps):
        with torch.inference_mode():
            actions = policy(observations)
        observations, rewards, terminated, truncated, _ = env.step(actions)
        running += rewards.to(torch.float64)
        steps += 1
        env_steps += env.num_envs
        done = terminated | truncated
        if bool(done.any()):
            if hasattr(policy, "episodes_ended"):  # a recurrent policy forgets the episodes that ended
                policy.episodes_ended(done)
            for index in done.nonzero().flatten().tolist():
                if cap is None or finished[index] < cap:
                    episodes.append((finished[index], index, float(running[index]), int(steps[index])))
                finished[index] += 1
            running[done] = 0.0
            steps[done] = 0
            if cap is not None and min(finished) >= cap:
                break
        if progress is not None:
            mean = sum(episode[2] for episode in episodes) / len(episodes) if episodes else None
            progress.update(env_steps, mean)
    episodes.sort()
    if num_episodes is not None:
        episodes = episodes[:num_episodes]
    return Episodes(
        returns=tuple(episode[2] for episode in episodes),
        lengths=tuple(episode[3] for episode in episodes),
        env_steps=env_steps,
        wall_time_s=time.perf_counter() - started,
    )


def zero_policy(env: TorchVectorEnv) -> Policy:
    """Always the zero action (clipped into the action space), or action 0 for a discrete space."""
    import torch
    from gymnasium import spaces

    space = env.single_action_space
    if isinstance(space, spaces.Discrete):
        action = torch.full((env.num_envs,), int(space.start), dtype=torch.long, device=env.device)
    else:
        box = cast("spaces.Box", space)  # rlrun's envs act in Box or Discrete spaces
        low = torch.as_tensor(box.low, dtype=torch.float32, device=env.device)
        high = torch.as_tensor(box.high, dtype=torch.float32, device=env.device)
        action = torch.zeros((env.num_envs, *box.shape), device=env.device).clamp(low, high)
    return lambda observations: action


def random_policy(env: TorchVectorEnv, seed: int) -> Policy:
    """Uniform actions from the action space (a standard normal where a bound is infinite), from its own generator."""
    import torch
    from gymnasium import spaces

    space = env.single_action_space
    generator = torch.Generator(device=env.device).manual_seed(seed)
    if isinstance(space, spaces.Discrete):
        return lambda observations: torch.randint(
            int(space.start), int(space.start + space.n), (env.num_envs,), generator=generator, device=env.device
        )
    box = cast("spaces.Box", space)  # rlrun's envs act in Box or Discrete spaces
    low = torch.as_tensor(box.low, dtype=torch.float32, device=env.device)
    high = torch.as_tensor(box.high, dtype=torch.float32, device=env.device)
    bounded = torch.isfinite(low) & torch.isfinite(high)
    shape = (env.num_envs, *box.shape)

    def policy(observations: Any) -> Any:
        uniform = torch.rand(shape, generator=generator, device=env.device)
        normal = torch.randn(shape, generator=generator, device=env.device)
        return torch.where(bounded, low + (high - low).nan_to_num(0.0) * uniform, normal)

    return policy
