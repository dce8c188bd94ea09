"""Cart-pole balancing as one batched torch vector env, step for step Gymnasium 1.4.0's `CartPoleEnv`.

The physics, constants, thresholds, rewards and reset distribution are those of
`gymnasium/envs/classic_control/cartpole.py` (euler integrator, state in float64, observations in
float32). Episodes end and restart in the same step (`AutoresetMode.SAME_STEP`); the time limit is
applied here, like Gymnasium's `TimeLimit`, instead of by a wrapper.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control import utils
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlrun.envs.rendering import GymnasiumPainter, SubEnvFrames
from rlrun.errors import InvalidArgument


class CartPoleVectorEnv(VectorEnv):
    """`num_envs` cart-poles stepped together in torch on `device`.

    Discrete (default): actions in {0, 1} push the cart left/right with `force_mag`.
    Continuous (`continuous=True`): a float action in [-1, 1] (clipped) scales `force_mag`.
    Every step gives reward 1.0, the terminating step included.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50, "autoreset_mode": AutoresetMode.SAME_STEP}

    state: torch.Tensor
    """Physics state `[num_envs, 4]` float64: cart position and velocity, pole angle and angular velocity."""
    steps: torch.Tensor
    """Steps taken in the current episode, `[num_envs]` int64."""

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int = 500,
        device: str | torch.device = "cpu",
        continuous: bool = False,
        force_mag: float = 10.0,
        render_mode: str | None = None,
    ):
        if render_mode not in (None, "rgb_array"):
            raise InvalidArgument(f"{type(self).__name__} renders rgb_array images only, not {render_mode!r}.")
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.device = torch.empty(0, device=device).device  # 'cuda' -> 'cuda:0', as tensors report it
        self.continuous = continuous
        self.render_mode = render_mode

        self.gravity = 9.8
        self.masscart = 1.0
        self.masspole = 0.1
        self.total_mass = self.masspole + self.masscart
        self.length = 0.5  # actually half the pole's length
        self.polemass_length = self.masspole * self.length
        self.force_mag = force_mag
        self.tau = 0.02  # seconds between state updates

        # Angle at which to fail the episode
        self.theta_threshold_radians = 12 * 2 * math.pi / 360
        self.x_threshold = 2.4

        # Angle limit set to 2 * theta_threshold_radians so failing observation is still within bounds.
        high = np.array([self.x_threshold * 2, np.inf, self.theta_threshold_radians * 2, np.inf], dtype=np.float32)
        self.single_observation_space = spaces.Box(-high, high, dtype=np.float32)
        if continuous:
            self.single_action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        else:
            self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

        self._generator = torch.Generator(device=self.device)
        self._generator.seed()  # non-deterministic until reset(seed=...), like Gymnasium
        # On the CPU, indexing the ended envs is cheapest; on accelerators it would wait for the device.
        self._draw_for_ended_only = self.device.type == "cpu"
        self.state = torch.zeros(num_envs, 4, dtype=torch.float64, device=self.device)
        self.steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._painter = GymnasiumPainter(CartPoleEnv)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every env; `options={"low": .., "high": ..}` bounds this reset's state."""
        if seed is not None:
            self._generator.manual_seed(seed)
        low, high = utils.maybe_parse_reset_bounds(options, -0.05, 0.05)
        self.state = self._sample_state(self.num_envs, low, high)
        self.steps.zero_()
        return self.state.to(torch.float32), {}

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env by one step and restart the envs whose episode ended."""
        force = self._force(torch.as_tensor(actions, device=self.device))
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)

        # Same expressions, in the same order, as Gymnasium's CartPoleEnv.step.
        temp = (force + self.polemass_length * theta_dot.square() * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta.square() / self.total_mass)
        )
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass

        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        next_state = torch.stack((x, x_dot, theta, theta_dot), dim=1)

        terminated = (
            (x < -self.x_threshold)
            | (x > self.x_threshold)
            | (theta < -self.theta_threshold_radians)
            | (theta > self.theta_threshold_radians)
        )
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps
        reward = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)

        # SAME_STEP autoreset: the envs whose episode ended start the next one in this step.
        done = terminated | truncated
        info = {"final_obs": next_state.to(torch.float32), "_final_obs": done}
        self.state = self._restart(next_state, done)
        self.steps.masked_fill_(done, 0)
        return self.state.to(torch.float32), reward, terminated, truncated, info

    def render(self) -> SubEnvFrames | None:
        """One rgb_array frame per env (with `render_mode="rgb_array"`), drawn on demand by Gymnasium's CartPoleEnv."""
        if self.render_mode != "rgb_array":
            return None
        return SubEnvFrames(self.num_envs, lambda i: self._painter.draw(state=self.state[i].cpu().numpy()))

    def close_extras(self, **kwargs: Any) -> None:
        self._painter.close()

    def _force(self, actions: torch.Tensor) -> torch.Tensor:
        """Return the float64 force `[num_envs]` that `actions` push the carts with."""
        actions = actions.reshape(self.num_envs)
        if self.continuous:
            return actions.to(torch.float64).clamp(-1.0, 1.0) * self.force_mag
        direction = torch.where(actions == 1, 1.0, -1.0).to(torch.float64)
        return direction * self.force_mag

    def _restart(self, state: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """Return `state` with new initial states in the rows of the `done` envs."""
        if self._draw_for_ended_only:
            ended = done.nonzero().squeeze(1)
            state[ended] = self._sample_state(len(ended), -0.05, 0.05)
            return state
        # No host sync (nonzero would wait for the device): draw for every env, keep where done.
        return torch.where(done.unsqueeze(1), self._sample_state(self.num_envs, -0.05, 0.05), state)

    def _sample_state(self, n: int, low: float, high: float) -> torch.Tensor:
        """Draw `[n, 4]` states uniformly in [low, high) from this env's own generator."""
        u = torch.rand(n, 4, generator=self._generator, dtype=torch.float64, device=self.device)
        return low + (high - low) * u
