"""Cart-pole balancing as one batched torch vector env, step for step Gymnasium 1.4.0's `CartPoleEnv`.

The physics, constants, thresholds, rewards and reset distribution are those of
`gymnasium/envs/classic_control/cartpole.py` (euler integrator, state in float64, observations in
float32), evaluated in the same order, operation for operation, so that a step rounds as Gymnasium's
does (torch's sin and cos may differ from NumPy's by one ulp). `BatchedVectorEnv` adds the time limit
and the SAME_STEP restarts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.classic_control import utils
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from rlrun.envs.batched import BatchedVectorEnv, beyond
from rlrun.envs.rendering import GymnasiumPainter


class CartPoleVectorEnv(BatchedVectorEnv):
    """`num_envs` cart-poles stepped together in torch on `device`.

    Discrete (default): actions in {0, 1} push the cart left/right with `force_mag` (other values
    raise). Continuous (`continuous=True`): a float action in [-1, 1] (clipped) scales `force_mag`.
    Every step gives reward 1.0, the terminating step included. State components: cart position and
    velocity, pole angle and angular velocity.
    """

    metadata = {**BatchedVectorEnv.metadata, "render_modes": ["rgb_array"], "render_fps": 50}
    state_size = 4

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int = 500,
        device: str | torch.device = "cpu",
        continuous: bool = False,
        force_mag: float = 10.0,
        render_mode: str | None = None,
        kernel: str = "auto",
    ):
        self.continuous = continuous
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
        super().__init__(
            num_envs,
            max_episode_steps=max_episode_steps,
            device=device,
            render_mode=render_mode,
            single_observation_space=spaces.Box(-high, high, dtype=np.float32),
            single_action_space=(
                spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32) if continuous else spaces.Discrete(2)
            ),
            kernel=kernel,
        )
        self.painter = GymnasiumPainter(CartPoleEnv)
        self._constants_of: tuple[float, ...] = ()  # the attribute values `_k` holds
        self._k: dict[str, torch.Tensor] = {}
        # Views of the state's rows and work buffers: made once, written in place by every eager step (a
        # compiled step gives `components` new memory each step; these views serve `advance` only).
        self._theta, self._theta_dot = self.components[2:]
        self._positions, self._velocities = self.components[0::2], self.components[1::2]  # (x, theta), their rates
        vector = torch.empty(num_envs, dtype=torch.float64, device=self.device)
        self._sin, self._cos, self._temp, self._den = (torch.empty_like(vector) for _ in range(4))
        self._acc = torch.empty(2, num_envs, dtype=torch.float64, device=self.device)
        self._xacc, self._thetaacc = self._acc
        self._delta = torch.empty_like(self._acc)

    def initial_state(self, n: int, options: dict[str, Any] | None) -> torch.Tensor:
        """Every component uniform in [low, high): (-0.05, 0.05), or `options={"low": .., "high": ..}`."""
        low, high = utils.maybe_parse_reset_bounds(options, -0.05, 0.05)
        u = torch.rand(n, 4, generator=self.generator, dtype=torch.float64, device=self.device)
        return (low + (high - low) * u).T

    def advance(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Gymnasium's `CartPoleEnv.step`, in place on `components`, each expression in its order."""
        k, theta, theta_dot = self._constants(), self._theta, self._theta_dot
        force = self._force(actions, k["pushes"])
        costheta = torch.cos(theta, out=self._cos)
        sintheta = torch.sin(theta, out=self._sin)

        # temp = (force + polemass_length * theta_dot**2 * sintheta) / total_mass
        # (no addcmul: its fused multiply-add rounds differently from NumPy's two operations)
        temp = torch.mul(theta_dot, theta_dot, out=self._temp).mul_(k["polemass_length"]).mul_(sintheta)
        temp.add_(force).div_(k["total_mass"])
        # thetaacc = (gravity * sintheta - costheta * temp)
        #            / (length * (4.0 / 3.0 - masspole * costheta**2 / total_mass))
        thetaacc = torch.mul(sintheta, k["gravity"], out=self._thetaacc)
        thetaacc.sub_(torch.mul(costheta, temp, out=self._den))
        den = torch.mul(costheta, costheta, out=self._den).mul_(k["masspole"]).div_(k["total_mass"])
        thetaacc.div_(torch.sub(k["four_thirds"], den, out=den).mul_(k["length"]))
        # xacc = temp - polemass_length * thetaacc * costheta / total_mass
        xacc = torch.mul(thetaacc, k["polemass_length"], out=self._xacc).mul_(costheta).div_(k["total_mass"])
        torch.sub(temp, xacc, out=xacc)

        # Euler: x += tau * x_dot and theta += tau * theta_dot (the old velocities), then the velocities.
        self._positions.add_(torch.mul(self._velocities, k["tau"], out=self._delta))
        self._velocities.add_(self._acc.mul_(k["tau"]))

        # x < -x_threshold or x > x_threshold or theta < -theta_threshold_radians or theta > ...
        terminated = beyond(self._positions, (self.x_threshold, self.theta_threshold_radians))
        reward = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)
        return reward, terminated

    @staticmethod
    def dynamics(
        components: torch.Tensor, actions: torch.Tensor, k: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """`advance` and `observe` as one pure function, for the compiled step: Gymnasium's expressions in
        Gymnasium's order. `actions` is `kernel_actions`' `[n]`: int64 pushes in {0, 1}, or float64 for the
        continuous cart-pole (a kernel each); `k` is `kernel_constants`. Returns observation, reward,
        terminated and the next state."""
        gravity, masspole, total_mass, length, polemass_length, tau, x_threshold, theta_threshold, force_mag = (
            k.unbind()
        )
        if actions.dtype == torch.int64:  # Gymnasium's sign(action - 0.5) * force_mag of actions checked in {0, 1}
            force = torch.where(actions == 1, force_mag, -force_mag)
        else:
            force = actions.clamp(-1.0, 1.0) * force_mag
        x, x_dot, theta, theta_dot = components.unbind()
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)
        temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass
        thetaacc = (gravity * sintheta - costheta * temp) / (
            length * (4.0 / 3.0 - masspole * (costheta * costheta) / total_mass)
        )
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        rows = (x + tau * x_dot, x_dot + tau * xacc, theta + tau * theta_dot, theta_dot + tau * thetaacc)
        terminated = (rows[0].abs() > x_threshold) | (rows[2].abs() > theta_threshold)
        obs = torch.stack([row.to(torch.float32) for row in rows], dim=1)
        return obs, torch.ones_like(x, dtype=torch.float32), terminated, torch.stack(rows)

    def kernel_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The actions `[num_envs]` for `dynamics`: float64 for the continuous cart-pole; int64 for the discrete
        one, checked in the kernel (`refused_actions`)."""
        if self.continuous:
            return actions.reshape(self.num_envs).to(torch.float64).contiguous()
        return actions.long().contiguous()

    @staticmethod
    def refused_actions(actions: torch.Tensor) -> torch.Tensor | None:
        """In the kernel: whether a discrete action is neither 0 nor 1 (`advance` raises IndexError on it);
        continuous actions are clipped, never refused."""
        if actions.dtype != torch.int64:
            return None
        return torch.bitwise_and(actions, -2).ne(0).any()  # clearing the low bit leaves 0 for 0 and 1 only

    def check_actions(self, actions: torch.Tensor) -> None:
        """Raise IndexError, as `advance` does, naming the first discrete action that is neither 0 nor 1."""
        if not self.continuous:
            refused = actions[(actions < 0) | (actions > 1)]
            if refused.numel():
                raise IndexError(f"A cart-pole's action is 0 (push left) or 1 (push right), not {refused[0].item()}.")

    def kernel_constants(self) -> torch.Tensor:
        """gravity, masspole, total_mass, length, polemass_length, tau, the two thresholds and force_mag."""
        self._constants()
        return self._k["kernel"]

    def kernel_options(self) -> dict[str, Any]:
        """`continuous`: the discrete and the continuous cart-pole take their actions in different dtypes."""
        return {"continuous": self.continuous}

    def observe(self, components: torch.Tensor) -> torch.Tensor:
        """The state itself, in float32: `[n, 4]`."""
        obs = torch.empty(components.shape[1], 4, dtype=torch.float32, device=self.device)
        obs.T.copy_(components)
        return obs

    def _constants(self) -> dict[str, torch.Tensor]:
        """The physical constants as 0-d tensors (a Python float costs a conversion in every op), made again
        whenever one of the attributes changed."""
        values = (
            self.gravity,
            self.masspole,
            self.total_mass,
            self.length,
            self.polemass_length,
            self.tau,
            4.0 / 3.0,
            self.force_mag,
            self.x_threshold,
            self.theta_threshold_radians,
        )
        if values != self._constants_of:
            names = ("gravity", "masspole", "total_mass", "length", "polemass_length", "tau", "four_thirds")
            self._k = {
                name: torch.tensor(value, dtype=torch.float64, device=self.device)
                for name, value in zip(names, values[: len(names)], strict=True)
            }
            # Gymnasium's force, sign(action - 0.5) * force_mag, of actions 0 and 1.
            self._k["pushes"] = torch.tensor([-self.force_mag, self.force_mag], dtype=torch.float64, device=self.device)
            self._k["kernel"] = torch.tensor(
                [*values[:6], self.x_threshold, self.theta_threshold_radians, self.force_mag],
                dtype=torch.float64,
                device=self.device,
            )
            self._constants_of = values
        return self._k

    def _force(self, actions: torch.Tensor, pushes: torch.Tensor) -> torch.Tensor:
        """Return the float64 force `[num_envs]` that `actions` push the carts with."""
        if self.continuous:
            return actions.reshape(self.num_envs).to(torch.float64, copy=True).clamp_(-1.0, 1.0).mul_(self.force_mag)
        if actions.dtype not in (torch.int64, torch.int32):
            actions = actions.long()
        return torch.index_select(pushes, 0, actions)
