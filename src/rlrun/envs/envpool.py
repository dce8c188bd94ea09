"""EnvPool's C++ thread pool as an rlrun torch vector env, for the Gymnasium MuJoCo ids rlrun has checked and the
Atari ids (`rlrun.envs.atari`: the game behind the standard preprocessing, as on Gymnasium's vector envs).

`make_env(task, n, vectorization="envpool")` builds `EnvPoolTorchVectorEnv`: the same `TorchVectorEnv` contract
as Gymnasium's sync and async vector envs behind `GymnasiumTorchVectorEnv` (SAME_STEP autoreset with the final
observation kept, terminated and truncated apart, env `i` seeded with `seed + i`), stepped by EnvPool's
`make_gymnasium` pool. EnvPool resets an ended env on the *next* step (NEXT_STEP); this wrapper resets the ended
envs in the step they end instead, so that every library sees the same contract.

Which ids EnvPool runs, and which `env.` keyword arguments it takes with Gymnasium's meaning and default, is
`ENVPOOL_TASKS`: rlrun's data, checked against both packages by the tests (`tests/envs/test_envpool.py`), the
dynamics of each id compared step for step with Gymnasium's own env. `vectorization="auto"` picks EnvPool where
`envpool_usable` says it can run the call, else Gymnasium's sync env.

EnvPool's worker threads are native threads that `close()` leaves running; they stop when the pool object is
destroyed, so `close` drops the only reference to it (docs/hermetic.md).
"""

from __future__ import annotations

import functools
import importlib.util
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlrun.envs import atari
from rlrun.envs.contract import is_image
from rlrun.errors import InvalidArgument, MissingDependency, UnsupportedTask, did_you_mean

if TYPE_CHECKING:
    import torch

_LOCOMOTION = frozenset(
    {"ctrl_cost_weight", "exclude_current_positions_from_observation", "forward_reward_weight", "frame_skip"}
)
_HEALTHY = frozenset({"healthy_reward", "terminate_when_unhealthy"})

ENVPOOL_TASKS: dict[str, frozenset[str]] = {
    "HalfCheetah-v5": _LOCOMOTION | {"reset_noise_scale"},
    "Hopper-v5": _LOCOMOTION | _HEALTHY | {"reset_noise_scale"},
    "Walker2d-v5": _LOCOMOTION | _HEALTHY | {"reset_noise_scale"},
    "Swimmer-v5": _LOCOMOTION | {"reset_noise_scale"},
    "InvertedPendulum-v5": frozenset({"frame_skip", "reset_noise_scale"}),
    "InvertedDoublePendulum-v5": frozenset({"frame_skip", "healthy_reward", "reset_noise_scale"}),
}
"""Gymnasium id -> the `env.` keyword arguments that EnvPool's env of the same id takes with the same meaning and
default (`max_episode_steps` too, for every id). Only ids whose dynamics match Gymnasium's are listed: Ant-v5 and
Humanoid-v5 compute contact forces otherwise, Reacher-v5 and Pusher-v5 draw their targets otherwise."""

ENVPOOL_ATARI_MISSING = frozenset({"ALE/TicTacToe3D-v5"})
"""The Gymnasium Atari ids (`atari.is_atari`) whose game EnvPool lacks; it runs every other one."""

IMPORTS = ("envpool",)
"""What a call imports before its capture: `import envpool` imports Matplotlib, dm_env and more, and registers
exit hooks (import effects, not the call's)."""

EXTRA = "envpool"
"""The pip extra that installs EnvPool."""

_MAX_SEED = 2**31  # EnvPool seeds are int32


def envpool_installed() -> bool:
    """Whether EnvPool can be imported (found without importing it)."""
    return importlib.util.find_spec("envpool") is not None


def unused_defaults(task: str) -> dict[str, Any]:
    """The keyword arguments of Gymnasium's `task` that EnvPool does not take, with Gymnasium's defaults: a value
    equal to its default may be passed (rlrun passes the whole env configuration) and is left out."""
    from rlrun.envs.signatures import env_config

    accepted = ENVPOOL_TASKS.get(task, frozenset()) | {"max_episode_steps"}
    return {key: value for key, value in env_config(task).items() if key not in accepted}


def covered(task: str) -> bool:
    """Whether EnvPool runs `task`: a MuJoCo id of `ENVPOOL_TASKS` or an Atari id whose game it has."""
    return task in ENVPOOL_TASKS or (atari.is_atari(task) and task not in ENVPOOL_ATARI_MISSING)


def refused_kwarg(task: str, env_kwargs: Mapping[str, Any]) -> str | None:
    """The first `env.` keyword argument EnvPool's MuJoCo `task` cannot honour (not taken, and not Gymnasium's
    default); an Atari id's are `atari.refused_key`'s."""
    accepted = ENVPOOL_TASKS[task] | {"max_episode_steps"}
    defaults = unused_defaults(task)
    for key, value in env_kwargs.items():
        if key not in accepted and (key not in defaults or _plain(defaults[key]) != _plain(value)):
            return key
    return None


@functools.cache
def _in_order(count: int, dtype: str) -> bytes:
    """The bytes of env ids `0..count-1` of `dtype`."""
    return np.arange(count, dtype=dtype).tobytes()


def _by_env_id(env_ids: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """`arrays` (rows in the order EnvPool returned its envs, `env_ids`) in env order: row i is env i."""
    if env_ids.tobytes() == _in_order(len(env_ids), env_ids.dtype.str):  # the usual case, at a bytes compare's cost
        return arrays
    order = np.argsort(env_ids)
    return tuple(array[order] for array in arrays)


def _plain(value: Any) -> Any:
    """`value` with arrays and tuples as lists, as a configuration holds them once overrides were merged."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def check_envpool(task: str, env_kwargs: Mapping[str, Any], *, video: bool = False) -> None:
    """Raise the user error that stops `--vectorization envpool` for this task, if any (all checks of planning)."""
    if not covered(task):
        raise UnsupportedTask(
            f"--vectorization envpool does not run {task!r}.{did_you_mean(task, ENVPOOL_TASKS, listing=0)} "
            f"It runs {', '.join(ENVPOOL_TASKS)} and the Atari ids (ALE/<Game>-v5); use --vectorization sync "
            "(or auto) for other tasks."
        )
    if not envpool_installed():
        raise MissingDependency(
            f"--vectorization envpool needs 'envpool', which is not installed: pip install 'rlrun[{EXTRA}]'"
        )
    if atari.is_atari(task):
        atari.check_atari(task, env_kwargs, "envpool", video=video)
        return
    key = refused_kwarg(task, env_kwargs)
    if key is not None:
        taken = sorted(ENVPOOL_TASKS[task] | {"max_episode_steps"})
        raise InvalidArgument(
            f"--vectorization envpool: EnvPool's {task} does not take env.{key}={env_kwargs[key]!r} "
            f"(it takes {', '.join('env.' + name for name in taken)}); drop it or use --vectorization sync."
        )
    if video:
        raise InvalidArgument("--vectorization envpool does not record videos; use --vectorization sync with --video.")


def envpool_usable(task: str, env_kwargs: Mapping[str, Any], *, video: bool = False) -> bool:
    """Whether `--vectorization auto` runs `task` on EnvPool: installed, the id covered, every kwarg taken."""
    try:
        check_envpool(task, env_kwargs, video=video)
    except (InvalidArgument, MissingDependency, UnsupportedTask):
        return False
    return True


def resolve_vectorization(
    task: str,
    vectorization: str,
    env_kwargs: Mapping[str, Any],
    *,
    video: bool,
    import_modules: Callable[[Sequence[str]], object],
) -> str:
    """The vectorization a call runs `task` with: `envpool` checked whole (`check_envpool`), `auto` settled to
    `envpool` where `envpool_usable`, else `sync`; an Atari id checked on any (`rlrun.envs.atari.check_atari`).
    EnvPool is imported through `import_modules`, with the call's imports (its import registers exit hooks)."""
    resolved = vectorization
    if vectorization == "envpool":
        check_envpool(task, env_kwargs, video=video)
    elif vectorization == "auto":
        resolved = "envpool" if envpool_usable(task, env_kwargs, video=video) else "sync"
    if atari.is_atari(task) and resolved != "envpool":  # on EnvPool, `check_envpool` checked it
        atari.check_atari(task, env_kwargs, resolved, video=video)
    if resolved == "envpool":
        import_modules(IMPORTS)
    return resolved


class EnvPoolTorchVectorEnv(VectorEnv):
    """`num_envs` copies of a Gymnasium id stepped by an EnvPool pool, as a torch vector env on `device`.

    Observations are float32 `[num_envs, *obs_shape]` (uint8 images `[num_envs, 4, 84, 84]` for an Atari id, with
    Discrete actions), rewards float32, terminations and truncations bool, all
    on `device`; `info` holds "final_obs" and "_final_obs" only (EnvPool's own info keys are left out). The pool
    is built by the first `reset` and again by every `reset(seed=s)`, with env `i` seeded `s + i` (EnvPool fixes
    its seeds when it builds a pool); `reset()` without a seed first draws one from the OS.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self, task: str, num_envs: int, *, device: str | torch.device = "cpu", env_kwargs: Mapping[str, Any] | None
    ):
        check_envpool(task, dict(env_kwargs or {}))
        import envpool
        import gymnasium
        import torch

        if atari.is_atari(task):
            self._task, self._kwargs = atari.envpool_options(task, env_kwargs or {})
        else:
            defaults = unused_defaults(task)
            self._task = task
            self._kwargs = {key: value for key, value in (env_kwargs or {}).items() if key not in defaults}
        self.num_envs = num_envs
        self.device = torch.empty(0, device=device).device
        self.spec = gymnasium.spec(task)
        self.render_mode = None
        config = envpool.make_spec(self._task, num_envs=num_envs, **self._kwargs)
        obs_space, act_space = config.gymnasium_observation_space, config.gymnasium_action_space
        self._bounds: tuple[torch.Tensor, torch.Tensor] | None = None
        if is_image(obs_space):
            self.single_observation_space = obs_space
            self._obs_dtype = torch.uint8
        else:
            self.single_observation_space = spaces.Box(
                obs_space.low.astype(np.float32), obs_space.high.astype(np.float32), dtype=np.float32
            )
            self._obs_dtype = torch.float32
        if isinstance(act_space, spaces.Discrete):
            self.single_action_space = spaces.Discrete(int(act_space.n))
        else:
            self.single_action_space = spaces.Box(
                act_space.low.astype(np.float32), act_space.high.astype(np.float32), dtype=np.float32
            )
            low, high = (torch.as_tensor(bound, dtype=torch.float64) for bound in (act_space.low, act_space.high))
            self._bounds = (low, high)  # float64, as EnvPool takes its actions
            self._actions = torch.zeros((num_envs, *act_space.shape), dtype=torch.float64)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._pool: Any = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every env (a new pool when `seed` is given or none exists yet); return float32 observations."""
        if options:
            raise ValueError(f"EnvPoolTorchVectorEnv.reset takes no options, got {sorted(options)}.")
        if seed is not None or self._pool is None:
            import envpool

            base = secrets.randbelow(_MAX_SEED) if seed is None else seed
            seeds = [(base + index) % _MAX_SEED for index in range(self.num_envs)]
            self._drop_pool()
            self._pool = envpool.make_gymnasium(self._task, num_envs=self.num_envs, seed=seeds, **self._kwargs)

        obs, info = self._pool.reset()
        return self._tensor(_by_env_id(info["env_id"], obs)[0], self._obs_dtype), {}

    def step(
        self, actions: torch.Tensor | np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every env; reset those that ended in this step (see the class docstring)."""
        import torch

        if self._pool is None:
            raise RuntimeError("EnvPoolTorchVectorEnv.step called before reset.")
        if self._bounds is None:  # Discrete
            if isinstance(actions, torch.Tensor):
                actions = actions.detach().cpu().numpy()
            actions = np.asarray(actions, dtype=np.int32).reshape(self.num_envs)
        else:  # clipped into a buffer of EnvPool's float64 (torch's clamp: a few microseconds less than NumPy's)
            buffer = self._actions
            if isinstance(actions, torch.Tensor):
                buffer.copy_(actions.detach().reshape(buffer.shape))
            else:  # NumPy writes it: `torch.as_tensor` would warn about a read-only array
                buffer.numpy()[...] = np.reshape(np.asarray(actions), buffer.shape)
            buffer.clamp_(*self._bounds)
            actions = buffer.numpy()
        obs, reward, terminated, truncated, info = self._pool.step(actions)
        obs, reward, terminated, truncated = _by_env_id(info["env_id"], obs, reward, terminated, truncated)
        ended = terminated | truncated
        final_obs = self._tensor(obs, self._obs_dtype)
        if ended.any():
            new_obs, info = self._pool.reset(np.flatnonzero(ended).astype(np.int32))
            obs = np.array(obs)
            obs[info["env_id"]] = new_obs
            obs_tensor = self._tensor(obs, self._obs_dtype)
        else:
            obs_tensor = final_obs.clone()
        info_out = {"final_obs": final_obs, "_final_obs": self._tensor(ended, torch.bool)}
        return (
            obs_tensor,
            self._tensor(reward, torch.float32),
            self._tensor(terminated, torch.bool),
            self._tensor(truncated, torch.bool),
            info_out,
        )

    def close(self, **kwargs: Any) -> None:
        """Close the pool and drop it: EnvPool joins its worker threads when the pool object is destroyed."""
        self._drop_pool()
        self.closed = True

    def _drop_pool(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _tensor(self, array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        """A fresh tensor of `dtype` on `device` (EnvPool's arrays are views of buffers it reuses): one copy, made
        by `from_numpy(...).to`, which costs less per call than `torch.tensor` on arrays this small."""
        import torch

        return torch.from_numpy(np.asarray(array)).to(self.device, dtype, copy=True)
