"""Inverted pendulum swing-up as one batched torch vector env, step for step Gymnasium 1.4.0's `PendulumEnv`.

The dynamics, costs, bounds and reset distribution are those of
`gymnasium/envs/classic_control/pendulum.py` (state in float64, torque in float32, observations
`[cos(th), sin(th), thdot]` in float32), evaluated in the same order and dtypes. Episodes never
terminate; `BatchedVectorEnv` truncates them after `max_episode_steps` and restarts them in the same
step.
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

from rlrun.envs.batched import BatchedVectorEnv
from rlrun.envs.rendering import GymnasiumPainter

DEFAULT_X = math.pi
DEFAULT_Y = 1.0


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Wrap angles to [-pi, pi)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class PendulumVectorEnv(BatchedVectorEnv):
    """`num_envs` pendulums stepped together in torch on `device`.

    Action: torque `[num_envs, 1]`, clipped to [-2, 2]. Reward: -(angle^2 + 0.1 thdot^2 + 0.001 u^2).
    State components: angle (0 = upright) and angular velocity.
    """

    metadata = {**BatchedVectorEnv.metadata, "render_modes": ["rgb_array"], "render_fps": 30}
    state_size = 2

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int = 200,
        device: str | torch.device = "cpu",
        g: float = 10.0,
        render_mode: str | None = None,
    ):
        self.max_speed = 8
        self.max_torque = 2.0
        self.dt = 0.05
        self.g = g
        self.m = 1.0
        self.l = 1.0

        high = np.array([1.0, 1.0, self.max_speed], dtype=np.float32)
        super().__init__(
            num_envs,
            max_episode_steps=max_episode_steps,
            device=device,
            render_mode=render_mode,
            single_observation_space=spaces.Box(low=-high, high=high, dtype=np.float32),
            single_action_space=spaces.Box(low=-self.max_torque, high=self.max_torque, shape=(1,), dtype=np.float32),
        )
        self.painter = GymnasiumPainter(partial(PendulumEnv, g=g))
        self._last_torque: torch.Tensor | None = None
        self._default_high = torch.tensor([[DEFAULT_X], [DEFAULT_Y]], dtype=torch.float64, device=self.device)
        # Work buffers, written in place every step.
        self._cost = torch.empty(num_envs, dtype=torch.float64, device=self.device)
        self._term = torch.empty_like(self._cost)
        self._torque_term = torch.empty(num_envs, dtype=torch.float32, device=self.device)

    def initial_state(self, n: int, options: dict[str, Any] | None) -> torch.Tensor:
        """Angle uniform in [-pi, pi), velocity in [-1, 1), or within `options={"x_init": .., "y_init": ..}`."""
        if options is None:
            high = self._default_high
        else:
            x = utils.verify_number_and_cast(options.get("x_init", DEFAULT_X))
            y = utils.verify_number_and_cast(options.get("y_init", DEFAULT_Y))
            high = torch.tensor([[x], [y]], dtype=torch.float64, device=self.device)
        u = torch.rand(n, 2, generator=self.generator, dtype=torch.float64, device=self.device).T
        return -high + 2 * high * u

    def advance(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gymnasium's `PendulumEnv.step`, in place on `components`, each expression in its order and dtype."""
        th, thdot = self.components
        # The torque stays float32 where Gymnasium's does (NumPy keeps float32 * Python float in float32).
        u = torch.clamp(actions.reshape(self.num_envs).to(torch.float32), -self.max_torque, self.max_torque)
        self._last_torque = u  # for rendering, as Gymnasium keeps last_u

        # costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)
        costs = torch.add(th, math.pi, out=self._cost).remainder_(2 * math.pi).sub_(math.pi).square_()
        costs.add_(torch.mul(thdot, thdot, out=self._term).mul_(0.1))
        costs.add_(torch.mul(u, u, out=self._torque_term).mul_(0.001))
        reward = costs.neg_().to(torch.float32)

        # newthdot = thdot + (3 * g / (2 * l) * sin(th) + 3.0 / (m * l**2) * u) * dt, clipped to max_speed
        g, m, l, dt = self.g, self.m, self.l, self.dt  # noqa: E741
        change = torch.sin(th, out=self._term).mul_(3 * g / (2 * l))
        change.add_(torch.mul(u, 3.0 / (m * l**2), out=self._torque_term)).mul_(dt)
        thdot.add_(change).clamp_(-self.max_speed, self.max_speed)
        # newth = th + newthdot * dt
        th.add_(torch.mul(thdot, dt, out=self._term))

        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return reward, terminated

    def observe(self, components: torch.Tensor) -> torch.Tensor:
        """`[cos(th), sin(th), thdot]` in float32: `[n, 3]` (computed in float64, then rounded)."""
        th, thdot = components
        obs = torch.empty(components.shape[1], 3, dtype=torch.float32, device=self.device)
        torch.cos(th, out=obs[:, 0])
        torch.sin(th, out=obs[:, 1])
        obs[:, 2] = thdot
        return obs

    def draw(self, index: int) -> np.ndarray:
        """Env `index` drawn by Gymnasium's PendulumEnv, with the torque arrow of the last step."""
        if self.painter is None:
            return super().draw(index)
        torque = None if self._last_torque is None else float(self._last_torque[index])
        return self.painter.draw(state=self.state[index].cpu().numpy(), last_u=torque)
