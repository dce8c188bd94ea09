"""`BatchedVectorEnv`: the plumbing every native task shares, so that a task writes only its physics.

A native task keeps all `num_envs` environments in tensors on one device and steps them together. The
base owns what is the same for every task: the device, the render-mode check, the torch generator and
seeding, the physics state's storage, the step counter and time limit (truncation), the SAME_STEP
autoreset of the envs whose episode ended (their last observations go to `info["final_obs"]`), and
the batched spaces. A task subclasses it and implements four members, all abstract, so that a task
missing one fails when it is built, not in the middle of a run:

- `state_size`: how many numbers make one env's physics state;
- `initial_state(n, options)`: draw `n` initial states from `self.generator`;
- `advance(actions)`: move every env's state one step forward in place, return reward and termination;
- `observe(components)`: the observations of a batch of states.

A task may also offer a compiled CPU step (`rlrun.envs.kernels`): a pure torch `dynamics(components,
actions, constants)` with the same physics as `advance` and `observe` together (it returns the next state
rather than write it), plus `kernel_actions`, `kernel_constants` and, where its constructor changes what
the kernel takes, `kernel_options`. The base then compiles it once per machine and steps through it on
the CPU, unless the env is built with `kernel="eager"`.

The physics state is stored component-major: `components` is `[state_size, num_envs]`, one contiguous
row per state component, so that elementwise torch ops run over contiguous vectors (on a CPU much
faster than over the strided columns of `[num_envs, state_size]`). `state` is the
`[num_envs, state_size]` view of the same memory, for users and tests that read or write it.

The step contract is Gymnasium's `VectorEnv` in `AutoresetMode.SAME_STEP` with torch tensors: see
`step`. The recipe to add a task is in ARCHITECTURE.md ("Add a native task").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlrun.envs.rendering import GymnasiumPainter, SubEnvFrames
from rlrun.errors import InvalidArgument, did_you_mean

if TYPE_CHECKING:
    from torch._C._aoti import AOTIModelContainerRunnerCpu

    from rlrun.envs.kernels import Dynamics, RefusedActions

_NO_LENGTHS = np.empty(0, dtype=np.int32)
_NO_LENGTHS.flags.writeable = False


class BatchedVectorEnv(VectorEnv, ABC):
    """`num_envs` copies of one task, stepped together in torch on `device`, restarted in the same step.

    Subclasses call `super().__init__(num_envs, max_episode_steps=..., device=..., render_mode=...,
    single_observation_space=..., single_action_space=...)` and implement the four abstract members.
    Every tensor a step returns is new (never a buffer the env writes again), on `device`.
    """

    metadata: dict[str, Any] = {
        "render_modes": [],
        "render_fps": 30,
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }
    """Gymnasium's metadata. A task that draws itself lists "rgb_array" in `render_modes` and sets `painter`
    (or overrides `draw`); `autoreset_mode` must stay SAME_STEP."""

    state_dtype: ClassVar[torch.dtype] = torch.float64
    """The dtype of `components` (float64, as Gymnasium's classic-control physics)."""

    num_envs: int
    """Number of environments in the batch."""
    max_episode_steps: int
    """Time limit: an episode is truncated when its step counter reaches this (like Gymnasium's `TimeLimit`)."""
    device: torch.device
    """The device of every tensor (normalized: 'cuda' becomes 'cuda:0', as tensors report it)."""
    generator: torch.Generator
    """The env's own random generator: every random draw of the task comes from it, never from torch's
    global generator. Unseeded until `reset(seed=...)`, like Gymnasium."""
    painter: GymnasiumPainter | None
    """Draws one env's state for `render()`; None if the task does not draw."""

    def __init__(
        self,
        num_envs: int,
        *,
        max_episode_steps: int,
        device: str | torch.device,
        render_mode: str | None,
        single_observation_space: spaces.Space,
        single_action_space: spaces.Space,
        kernel: str = "eager",
    ):
        if self.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise TypeError(f"{type(self).__name__}.metadata must keep autoreset_mode SAME_STEP.")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            modes = self.metadata["render_modes"]
            offered = f"renders {', '.join(modes)} images only" if modes else "cannot render"
            raise InvalidArgument(f"{type(self).__name__} {offered}, not {render_mode!r}.")
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.device = torch.empty(0, device=device).device
        self.render_mode = render_mode
        self.painter = None

        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, num_envs)
        self.action_space = batch_space(single_action_space, num_envs)
        shape = self.action_space.shape
        if shape is None:  # a step reshapes the caller's actions to it
            raise TypeError(f"{type(self).__name__}'s action space {single_action_space} has no shape.")
        self._action_shape: tuple[int, ...] = shape

        self.generator = torch.Generator(device=self.device)
        self.generator.seed()  # non-deterministic until reset(seed=...), like Gymnasium
        # On the CPU, indexing the ended envs is cheapest; on accelerators it would wait for the device.
        self._draw_for_ended_only = self.device.type == "cpu"
        self._components = torch.zeros(self.state_size, num_envs, dtype=self.state_dtype, device=self.device)
        self._steps = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        self._kernel = self._load_kernel(kernel)
        self._first_compiled_step = True
        self._ended = np.empty(0, dtype=np.int64)
        self._ended_lengths = _NO_LENGTHS

    # ------------------------------------------------------------------ what a task implements

    @property
    @abstractmethod
    def state_size(self) -> int:
        """Number of components in one env's physics state (a class attribute in a task, e.g. `state_size = 4`)."""

    @abstractmethod
    def initial_state(self, n: int, options: dict[str, Any] | None) -> torch.Tensor:
        """Draw `n` initial states, `[state_size, n]` of `state_dtype` on `device`, from `self.generator`.

        `options` are those of `reset(options=...)` when every env starts; None when ended envs restart.
        The result may be a view (e.g. the transpose of a `[n, state_size]` draw).
        """

    @abstractmethod
    def advance(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Step every env's physics once: update `self.components` in place and return
        `(reward, terminated)`, new tensors `[num_envs]` float32 and `[num_envs]` bool.

        `actions` is on `device` with the batched action space's shape (`[num_envs]` for Discrete,
        `[num_envs, *shape]` for Box), in the dtype the caller gave; it may be the caller's own tensor,
        so never modify it. Time limits, restarts and final observations are the base's job.
        """

    @abstractmethod
    def observe(self, components: torch.Tensor) -> torch.Tensor:
        """Return the observations of the states `components` (`[state_size, n]`, possibly a view), as a
        new contiguous float32 tensor `[n, *single_observation_space.shape]`."""

    # ------------------------------------------------------------------ what a task may add: a compiled step

    dynamics: ClassVar[Dynamics | None] = None
    """Optional, a staticmethod: `advance` and `observe` as one pure torch function for the compiler,
    `dynamics(components, actions, constants) -> (obs, reward, terminated, next_components)`. It takes the
    state `[state_size, n]` and what `kernel_actions` and `kernel_constants` return, writes nothing, and
    returns new tensors. Everything a step computes from the actions belongs in it (the cart-pole's force:
    computed outside the kernel, it would cost one more pass over memory). It must round as `advance` does
    (the same expressions in the same order). The base hands the next state's memory to `components`, so
    nothing is copied back."""

    refused_actions: ClassVar[RefusedActions | None] = None
    """Optional, a staticmethod: `refused_actions(actions)`, a 0-d bool tensor, true when one of the actions
    `kernel_actions` returns is one that `advance` refuses (None for actions it never refuses), as a pure
    torch function. The kernel computes it in its own loop, so `kernel_actions` need not read the actions once
    more to check them. When it is true, the step calls `check_actions`, which raises, before any state
    changes."""

    def check_actions(self, actions: torch.Tensor) -> None:
        """Raise the error `advance` raises for `actions` (as `kernel_actions` returns them), if any: what a
        compiled step whose `refused_actions` was true raises. Nothing to check by default."""

    def kernel_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The caller's `actions` (as `advance` gets them) as the contiguous `[num_envs]` tensor `dynamics`
        takes, of the one dtype its kernel was built for; checks them as `advance` does, unless the task
        leaves that to `refused_actions`."""
        raise NotImplementedError(f"{type(self).__name__} defines no compiled step.")

    def kernel_options(self) -> dict[str, Any]:
        """The constructor's keyword arguments that change what `dynamics` is given (the dtype `kernel_actions`
        returns, a branch taken at export): JSON values. Each set of options is a kernel of its own, built by
        `task_class(num_envs=..., kernel="eager", **options)`. Empty by default."""
        return {}

    def kernel_constants(self) -> torch.Tensor:
        """The task's constants as a 1-d float64 tensor for `dynamics` (read again every step, so that a
        constant changed after construction takes effect, as in Gymnasium)."""
        raise NotImplementedError(f"{type(self).__name__} defines no compiled step.")

    @property
    def kernel(self) -> str:
        """How this env steps: "compiled" (the task's `dynamics` through its kernel) or "eager"."""
        return "eager" if self._kernel is None else "compiled"

    def _load_kernel(self, mode: str) -> AOTIModelContainerRunnerCpu | None:
        from rlrun.envs import kernels

        if mode not in kernels.KERNEL_MODES:
            raise InvalidArgument(
                f"Unknown kernel {mode!r}.{did_you_mean(mode, kernels.KERNEL_MODES)}"
                " Pass env.kernel=auto, compiled or eager."
            )
        if mode == "eager" or (mode == "auto" and (self.dynamics is None or self.device.type != "cpu")):
            return None
        if self.dynamics is None:
            raise InvalidArgument(f"{type(self).__name__} has no compiled step; use kernel='eager' or 'auto'.")
        if self.device.type != "cpu":
            raise InvalidArgument(f"kernel='compiled' steps on the CPU only, not on {self.device}; use 'auto'.")
        try:
            return kernels.load(type(self), mode, self.num_envs, self.kernel_options())
        except kernels.KernelUnavailable as error:
            raise InvalidArgument(f"kernel='compiled': {error}; use kernel='auto' to step eagerly instead.") from None

    def _compiled_step(
        self, kernel: AOTIModelContainerRunnerCpu, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """`advance` and `observe` of the new state, in one call of `kernel`: the observation, reward,
        terminated, and a copy of the observation of its own for the restarts (see `kernels.TaskStep`). The
        kernel returns the next state in new memory, which `components` takes over (`Tensor.set_`: the same
        tensor object) once the actions are known to be valid."""
        inputs = [self._components, self.kernel_actions(actions), self.kernel_constants()]
        outputs = kernel.run(inputs)
        if self._first_compiled_step:
            from rlrun.envs import kernels

            self._first_compiled_step = False
            kernels.reuse_freed_memory(outputs)
        if len(outputs) > 5 and outputs[5].item():  # `refused_actions`: nothing has changed yet
            self.check_actions(inputs[1])
            raise RuntimeError(f"{type(self).__name__}.refused_actions refused actions that check_actions accepts.")
        obs, reward, terminated, components, restart_obs = outputs[:5]
        self._components.set_(components)  # type: ignore[call-overload]  # torch's stubs lack set_(Tensor)
        return obs, reward, terminated.bool(), restart_obs

    # ------------------------------------------------------------------ the shared plumbing

    @property
    def components(self) -> torch.Tensor:
        """Physics state, component-major: `[state_size, num_envs]` of `state_dtype`, row i holding state
        component i of every env. Always the same tensor: write it in place, never rebind it; `advance`
        updates it. An eager task may keep views of its rows; a compiled step gives the tensor new memory
        every step (`Tensor.set_`), so views made before it no longer follow: read `components` afresh."""
        return self._components

    @property
    def steps(self) -> torch.Tensor:
        """Steps taken in each env's current episode, `[num_envs]` int32 (0 after a start); write in place."""
        return self._steps

    @property
    def ended_envs(self) -> np.ndarray:
        """On the CPU, the indices of the envs whose episode ended in the last step, ascending (a NumPy array the
        env does not write again; empty before the first step). `EpisodeStatistics` reads it rather than search
        `terminated | truncated` a second time. Not kept on accelerators (finding them would wait for the device)."""
        if not self._draw_for_ended_only:
            raise AttributeError(f"ended_envs is kept on the CPU only, not on {self.device}.")
        return self._ended

    @property
    def ended_lengths(self) -> np.ndarray:
        """On the CPU, the lengths of the episodes that ended in the last step (their `steps` counts as they
        ended, the time limit's count), in `ended_envs`' order: a NumPy int32 array the env does not write
        again. `EpisodeStatistics` records them rather than keep step counters of its own."""
        if not self._draw_for_ended_only:
            raise AttributeError(f"ended_lengths is kept on the CPU only, not on {self.device}.")
        return self._ended_lengths

    @property
    def state(self) -> torch.Tensor:
        """Physics state `[num_envs, state_size]`: a view of `components` (writes go through)."""
        return self.components.T

    @state.setter
    def state(self, value: torch.Tensor) -> None:
        self.components.T.copy_(value)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every env (seeding `generator` first if `seed` is given); return the
        observations `[num_envs, *obs_shape]` float32 and an empty info dict."""
        if seed is not None:
            self.generator.manual_seed(seed)
        self.components.copy_(self.initial_state(self.num_envs, options))
        self.steps.zero_()
        return self.observe(self.components), {}

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env by one step and restart, in the same step, the envs whose episode ended.

        Returns `(obs, reward, terminated, truncated, info)`: observations `[num_envs, *obs_shape]`
        float32 (of the new episode's first state where an episode ended), reward `[num_envs]` float32,
        terminated and truncated `[num_envs]` bool (both may be true), and in `info` "final_obs", the
        float32 observation every env reached before any restart, and "_final_obs", the bool mask of
        the envs that ended. `actions` may be a tensor or a NumPy array, Discrete ones also a column.
        """
        if not (isinstance(actions, torch.Tensor) and actions.device == self.device):
            actions = torch.as_tensor(actions, device=self.device)
        restart_obs: torch.Tensor | None = None  # on the CPU (kernels included), the copy the restarts write
        if self._kernel is not None:
            final_obs, reward, terminated, restart_obs = self._compiled_step(
                self._kernel, actions.reshape(self._action_shape)
            )
        else:
            reward, terminated = self.advance(actions.reshape(self._action_shape))
            final_obs = self.observe(self._components)
            if self._draw_for_ended_only:
                restart_obs = final_obs.clone()
        if restart_obs is not None:  # the CPU: the bookkeeping in NumPy, on views of the same memory
            return self._step_on_host(final_obs, reward, terminated, restart_obs)
        self._steps += 1
        truncated = torch.gt(self._steps, self.max_episode_steps - 1)
        done = terminated | truncated
        obs = self._restart(done, final_obs)
        return obs, reward, terminated, truncated, {"final_obs": final_obs, "_final_obs": done}

    def _step_on_host(
        self, final_obs: torch.Tensor, reward: torch.Tensor, terminated: torch.Tensor, obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """The time limit and the restarts of a CPU step, in `obs`, a copy of `final_obs` that the step returns.
        NumPy's dispatch of a small op costs less than torch's, and a CPU tensor shares its memory with
        `tensor.numpy()`, so the results are the same tensors."""
        steps = self._steps.numpy()
        np.add(steps, 1, out=steps)
        truncated = np.greater(steps, self.max_episode_steps - 1)
        done = np.logical_or(terminated.numpy(), truncated)
        self._ended = ended = np.flatnonzero(done)
        self._ended_lengths = steps[ended] if ended.size else _NO_LENGTHS
        if ended.size:
            index = torch.from_numpy(ended)
            fresh = self.initial_state(len(ended), None)
            self._components.index_copy_(1, index, fresh)
            obs.index_copy_(0, index, self.observe(fresh))
            steps[ended] = 0
        info = {"final_obs": final_obs, "_final_obs": torch.from_numpy(done)}
        return obs, reward, terminated, torch.from_numpy(truncated), info

    def render(self) -> SubEnvFrames | None:  # type: ignore[override]  # a lazy Sequence, not Gymnasium's tuple
        """One rgb_array frame per env (with `render_mode="rgb_array"`), each drawn when it is read."""
        if self.render_mode != "rgb_array":
            return None
        return SubEnvFrames(self.num_envs, self.draw)

    def draw(self, index: int) -> np.ndarray:
        """The rgb_array frame of env `index`: by default, `painter` draws that env's `state` row."""
        if self.painter is None:
            raise NotImplementedError(f"{type(self).__name__} sets no painter and does not override draw().")
        return self.painter.draw(state=self.state[index].cpu().numpy())

    def close_extras(self, **kwargs: Any) -> None:
        if self.painter is not None:
            self.painter.close()

    def _restart(self, done: torch.Tensor, final_obs: torch.Tensor) -> torch.Tensor:
        """Put new initial states in the rows of the `done` envs, zero their step counters, and return the
        observations: `final_obs` with the restarted rows replaced (a new tensor). With no host sync (nonzero
        would wait for the device): draw for every env, keep where done. The CPU's way is `_step_on_host`."""
        fresh = self.initial_state(self.num_envs, None)
        self._components.copy_(torch.where(done, fresh, self._components))
        self._steps.masked_fill_(done, 0)
        return torch.where(done.reshape(-1, *([1] * (final_obs.dim() - 1))), self.observe(fresh), final_obs)


# Torch's CPU kernels for comparisons are slower than NumPy's, and for a few thousand elements torch's
# dispatch costs more than NumPy's. A CPU tensor shares its memory with `tensor.numpy()`, so on the CPU
# `beyond` lets NumPy do the work; the result is the same. Elsewhere it is the torch ops.


def beyond(rows: torch.Tensor, limits: Sequence[float]) -> torch.Tensor:
    """Return, per column of `rows` `[k, n]`, whether `|rows[i]| > limits[i]` for some i: a new bool tensor `[n]`.

    `|v| > limit` is exactly Gymnasium's `v < -limit or v > limit` (false for NaN).
    """
    if rows.device.type == "cpu":
        return torch.from_numpy(any_beyond(rows.numpy(), limits))
    return any_beyond(rows, limits)


def any_beyond(rows: Any, limits: Sequence[float]) -> Any:
    """`beyond` for a NumPy array or a tensor `rows`, returning the same kind."""
    result = abs(rows[0]) > limits[0]
    for row, limit in zip(rows[1:], limits[1:], strict=True):
        result |= abs(row) > limit
    return result
