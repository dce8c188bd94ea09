"""Inverted pendulum swing-up as one batched torch vector env, step for step Gymnasium 1.4.0's `PendulumEnv`.

The dynamics, costs, bounds and reset distribution are those of
`gymnasium/envs/classic_control/pendulum.py` (state in float64, torque in float32, observations
`[cos(th), sin(th), thdot]` in float32). Episodes never terminate; they are truncated after
`max_episode_steps` and restart in the same step (`AutoresetMode.SAME_STEP`).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control import utils
from gymnasium.envs.classic_control.pendulum import PendulumEnv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlrun.envs.rendering import GymnasiumPainter, SubEnvFrames
from rlrun.errors import InvalidArgument

DEFAULT_X = math.pi
DEFAULT_Y = 1.0


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Wrap angles to [-pi, pi)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class PendulumVectorEnv(VectorEnv):
    """`num_envs` pendulums stepped together in torch on `device`.

    Action: torque `[num_envs, 1]`, clipped to [-2, 2]. Reward: -(angle^2 + 0.1 thdot^2 + 0.001 u^2).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30, "autoreset_mode": AutoresetMode.SAME_STEP}

    state: torch.Tensor
    """Physics state `[num_envs, 2]` float64: angle (0 = upright) and angular velocity."""
    steps: torch.Tensor
    """Steps taken in the current episode, `[num_envs]` int64."""

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int = 200,
        device: str | torch.device = "cpu",
        g: float = 10.0,
        render_mode: str | None = None,
    ):
        if render_mode not in (None, "rgb_array"):
            raise InvalidArgument(f"{type(self).__name__} renders rgb_array images only, not {render_mode!r}.")
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.device = torch.empty(0, device=device).device  # 'cuda' -> 'cuda:0', as tensors report it
        self.render_mode = render_mode

        self.max_speed = 8
        self.max_torque = 2.0
        self.dt = 0.05
        self.g = g
        self.m = 1.0
        self.l = 1.0

        high = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        self.single_action_space = spaces.Box(low=-self.max_torque, high=self.max_torque, shape=(1,), dtype=np.float32)
        self.single_observation_space = spaces.Box(low=-high, high=high, dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

        self._generator = torch.Generator(device=self.device)
        self._generator.seed()  # non-deterministic until reset(seed=...), like Gymnasium
        # On the CPU, indexing the ended envs is cheapest; on accelerators it would wait for the device.
        self._draw_for_ended_only = self.device.type == "cpu"
        self._default_high = torch.tensor([DEFAULT_X, DEFAULT_Y], dtype=torch.float64, device=self.device)
        self.state = torch.zeros(num_envs, 2, dtype=torch.float64, device=self.device)
        self.steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._last_torque: torch.Tensor | None = None
        self._painter = GymnasiumPainter(partial(PendulumEnv, g=g))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every env; `options={"x_init": .., "y_init": ..}` bounds this reset."""
        if seed is not None:
            self._generator.manual_seed(seed)
        options = options or {}
        x = utils.verify_number_and_cast(options.get("x_init", DEFAULT_X))
        y = utils.verify_number_and_cast(options.get("y_init", DEFAULT_Y))
        high = torch.tensor([x, y], dtype=torch.float64, device=self.device)
        self.state = self._sample_state(self.num_envs, high)
        self.steps.zero_()
        return self._obs(self.state), {}

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env by one step and restart the envs whose episode reached the time limit."""
        th, thdot = self.state.unbind(1)
        # The torque stays float32 where Gymnasium's does (NumPy keeps float32 * Python float in float32).
        u = torch.as_tensor(actions, device=self.device).reshape(self.num_envs).to(torch.float32)
        u = u.clamp(-self.max_torque, self.max_torque)
        self._last_torque = u  # for rendering, as Gymnasium keeps last_u
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + (0.001 * (u**2)).to(torch.float64)

        g, m, l, dt = self.g, self.m, self.l, self.dt  # noqa: E741
        newthdot = thdot + (3 * g / (2 * l) * torch.sin(th) + (3.0 / (m * l**2) * u).to(torch.float64)) * dt
        newthdot = newthdot.clamp(-self.max_speed, self.max_speed)
        newth = th + newthdot * dt
        next_state = torch.stack((newth, newthdot), dim=1)

        reward = (-costs).to(torch.float32)
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps

        # SAME_STEP autoreset: the envs whose episode ended start the next one in this step.
        done = truncated.clone()
        info = {"final_obs": self._obs(next_state), "_final_obs": done}
        self.state = self._restart(next_state, done)
        self.steps.masked_fill_(done, 0)
        return self._obs(self.state), reward, terminated, truncated, info

    def render(self) -> SubEnvFrames | None:
        """One rgb_array frame per env (with `render_mode="rgb_array"`), drawn on demand by Gymnasium's PendulumEnv."""
        if self.render_mode != "rgb_array":
            return None

        def draw(index: int) -> np.ndarray:
            torque = None if self._last_torque is None else float(self._last_torque[index])
            return self._painter.draw(state=self.state[index].cpu().numpy(), last_u=torque)

        return SubEnvFrames(self.num_envs, draw)

    def close_extras(self, **kwargs: Any) -> None:
        self._painter.close()

    def _obs(self, state: torch.Tensor) -> torch.Tensor:
        """Return the float32 observations `[n, 3]` = [cos(th), sin(th), thdot] of float64 states `[n, 2]`."""
        th, thdot = state.unbind(1)
        return torch.stack((torch.cos(th), torch.sin(th), thdot), dim=1).to(torch.float32)

    def _restart(self, state: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Return `state` with new initial states in the rows of the `done` envs."""
        if self._draw_for_ended_only:
            ended = done.nonzero().squeeze(1)
            state[ended] = self._sample_state(len(ended), self._default_high)
            return state
        # No host sync (nonzero would wait for the device): draw for every env, keep where done.
        return torch.where(done.unsqueeze(1), self._sample_state(self.num_envs, self._default_high), state)

    def _sample_state(self, n: int, high: torch.Tensor) -> torch.Tensor:
        """Draw `[n, 2]` states uniformly in [-high, high) from this env's own generator."""
        u = torch.rand(n, 2, generator=self._generator, dtype=torch.float64, device=self.device)
        return -high + 2 * high * u
