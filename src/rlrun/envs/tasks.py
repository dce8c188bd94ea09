"""Task registry and env factory: rlrun's native torch tasks and any registered Gymnasium id.

Native tasks are registered with Gymnasium under a string `vector_entry_point`, so registering them
imports no torch; Gymnasium imports the env module when it builds one. Every env `make_env` returns
satisfies the same contract: a Gymnasium `VectorEnv` in SAME_STEP autoreset mode whose reset and
step take and return torch tensors on its `device`.

Tasks come from three places: rlrun's own (`BUILTIN_TASKS`), installed packages' `rlrun.tasks` entry
points, and any module named in Gymnasium's own `module:id` form (`my_package.envs:MyTask-v0`), which is
imported so that its registrations run, as `gymnasium.make` does.

A package adds native tasks by naming, in its metadata, a `NativeTask` record or a tuple or list of them:

    [project.entry-points."rlrun.tasks"]
    point_mass = "my_package.tasks:POINT_MASS"

The records are data, like `BUILTIN_TASKS`: the module that holds them should import no torch. The group is
read once per process, on first need (a task resolved or listed, or a call's import phase), never at
`import rlrun`. A plugin that fails to load (its module does not import, its value is not a record, its id is
taken) is left out and named in `BROKEN` with the reason, for `rlrun list` and the unknown-task message.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import gymnasium
from gymnasium.envs.registration import EnvSpec, VectorEnvCreator, load_env_creator
from gymnasium.vector import AutoresetMode, VectorEnv

from rlrun.envs import atari
from rlrun.envs.requirements import guarded_imports
from rlrun.errors import InvalidArgument, MissingDependency, UnknownTask, did_you_mean

if TYPE_CHECKING:
    import torch

VECTORIZATION_MODES = ("sync", "async", "envpool", "auto")
"""How `make_env` runs the sub-envs of a Gymnasium (non-native) task: in this process, one process each, in
EnvPool's C++ thread pool (the ids of `rlrun.envs.envpool.ENVPOOL_TASKS`), or `auto`: EnvPool where it can run the
task (`envpool_usable`), else sync."""


@dataclass(frozen=True)
class NativeTask:
    """A task that rlrun implements as a batched torch vector env: registration is this record, data only.

    Like Gymnasium's `EnvSpec`, the env class is named by a lazy "module:Class" entry point, imported
    only when an env is built, so registering (and `import rlrun.envs`) imports no torch.
    """

    id: str
    """Gymnasium id, e.g. 'rlrun/CartPole-v1'."""
    vector_entry_point: str
    """'module:Class' of the torch `VectorEnv`."""
    max_episode_steps: int
    """Time limit: episodes are truncated after this many steps."""
    default_library: str
    """RL library used when the user names none."""
    reward_threshold: float | None = None
    """Mean return at which the task counts as solved."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Constructor keyword arguments that define the task (e.g. `continuous=True`); do not mutate."""

    def load(self) -> Callable[..., VectorEnv]:
        """Import and return the env class (or factory) that `vector_entry_point` names."""
        # Gymnasium's loader is typed for both kinds of entry point; this one is a vector entry point.
        return cast(VectorEnvCreator, load_env_creator(self.vector_entry_point))


BUILTIN_TASKS: tuple[NativeTask, ...] = (
    NativeTask(
        "rlrun/CartPole-v1",
        "rlrun.envs.cartpole:CartPoleVectorEnv",
        max_episode_steps=500,
        default_library="sb3",
        reward_threshold=475.0,
    ),
    NativeTask(
        "rlrun/CartPoleContinuous-v1",
        "rlrun.envs.cartpole:CartPoleVectorEnv",
        max_episode_steps=500,
        default_library="rsl_rl",
        reward_threshold=475.0,
        kwargs={"continuous": True},
    ),
    NativeTask(
        "rlrun/Pendulum-v1",
        "rlrun.envs.pendulum:PendulumVectorEnv",
        max_episode_steps=200,
        default_library="rsl_rl",
    ),
)
"""rlrun's own tasks, registered when `rlrun.envs` is imported."""

NATIVE_TASKS: dict[str, NativeTask] = {}
"""Native tasks by id, in registration order: `BUILTIN_TASKS`, then those registered later."""


def register(task: NativeTask) -> NativeTask:
    """Register `task` with Gymnasium and in `NATIVE_TASKS`; registering the same record again changes nothing."""
    _register_with_gymnasium(task)
    NATIVE_TASKS[task.id] = task
    return task


def register_task(
    id: str,
    vector_entry_point: str,
    *,
    max_episode_steps: int,
    default_library: str,
    reward_threshold: float | None = None,
    kwargs: Mapping[str, Any] | None = None,
) -> NativeTask:
    """Build a `NativeTask` from these fields and `register` it; repeating a call is a no-op."""
    return register(
        NativeTask(
            id=id,
            vector_entry_point=vector_entry_point,
            max_episode_steps=max_episode_steps,
            default_library=default_library,
            reward_threshold=reward_threshold,
            kwargs=dict(kwargs or {}),
        )
    )


def make_env(
    task: str,
    num_envs: int,
    *,
    device: str | torch.device = "cpu",
    vectorization: str = "sync",
    env_kwargs: Mapping[str, Any] | None = None,
    render_mode: str | None = None,
) -> VectorEnv:
    """Build `num_envs` copies of `task` as a torch vector env on `device` (not reset yet).

    Native tasks are built by their own batched class (`vectorization` does not apply to them). Any
    other registered Gymnasium id is vectorized by Gymnasium (`vectorization` "sync" or "async") and
    wrapped in `GymnasiumTorchVectorEnv`, or run by EnvPool ("envpool", `EnvPoolTorchVectorEnv`; "auto":
    EnvPool where it can, else sync). `env_kwargs` go to the env's constructor and may include
    `max_episode_steps`. With `render_mode="rgb_array"`, `render()` returns one image per sub-env.
    """
    spec = task_spec(task)
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise InvalidArgument(f"num_envs must be a positive integer, got {num_envs!r}.")
    if vectorization not in VECTORIZATION_MODES:
        raise InvalidArgument(f"vectorization must be one of {', '.join(VECTORIZATION_MODES)}, got {vectorization!r}.")
    env_kwargs = dict(env_kwargs or {})
    if render_mode is not None:
        env_kwargs["render_mode"] = render_mode
    if vectorization in ("envpool", "auto"):
        from rlrun.envs.envpool import check_envpool, envpool_usable

        if vectorization == "envpool":
            check_envpool(spec.id, env_kwargs, video=render_mode is not None)
        if envpool_usable(spec.id, env_kwargs, video=render_mode is not None):
            from rlrun.envs.envpool import EnvPoolTorchVectorEnv  # imports torch

            return EnvPoolTorchVectorEnv(spec.id, num_envs, device=device, env_kwargs=env_kwargs)
        vectorization = "sync"
    if spec.id in NATIVE_TASKS:
        return gymnasium.make_vec(
            spec.id, num_envs, vectorization_mode="vector_entry_point", device=device, **env_kwargs
        )

    from rlrun.envs.gymnasium_torch import GymnasiumTorchVectorEnv  # imports torch

    wrappers = None
    if atari.is_atari(spec.id, spec.entry_point):
        env_kwargs, wrappers = atari.gymnasium_options(env_kwargs)
    env = gymnasium.make_vec(
        spec.id,
        num_envs,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        wrappers=wrappers,
        **env_kwargs,
    )
    try:
        return GymnasiumTorchVectorEnv(env, device=device)
    except BaseException:
        env.close()
        raise


def _register_with_gymnasium(task: NativeTask) -> None:
    """Register `task` with Gymnasium unless it holds this very spec already (overriding warns)."""
    spec = EnvSpec(
        id=task.id,
        vector_entry_point=task.vector_entry_point,
        max_episode_steps=task.max_episode_steps,
        reward_threshold=task.reward_threshold,
        kwargs=dict(task.kwargs),
    )
    if gymnasium.registry.get(task.id) != spec:
        gymnasium.register(
            id=task.id,
            vector_entry_point=task.vector_entry_point,
            max_episode_steps=task.max_episode_steps,
            reward_threshold=task.reward_threshold,
            kwargs=dict(task.kwargs),
        )


def forget(task_id: str) -> None:
    """Take a native task out of `NATIVE_TASKS` and Gymnasium's registry (a plugin's, read again)."""
    NATIVE_TASKS.pop(task_id, None)
    gymnasium.registry.pop(task_id, None)


def task_module(task: str) -> tuple[str | None, str]:
    """Split Gymnasium's `module:id` form into the module to import and the id; a plain id, or one whose part
    before ':' is no module name, has no module."""
    if ":" not in task or task in gymnasium.registry:
        return None, task
    module, _, name = task.partition(":")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module):
        return None, task
    return module, name


def _import_each(modules: Iterable[str]) -> None:
    for module in modules:
        importlib.import_module(module)


def task_spec(task: str, import_modules: Callable[[Iterable[str]], None] = _import_each) -> EnvSpec:
    """Return the Gymnasium spec of `task` (an id, or `module:id` after importing the module with
    `import_modules`), or raise `UnknownTask` naming the nearest registered id."""
    load_task_plugins(import_modules)
    module, task = task_module(task)
    if module is not None:
        with _module_errors(module, task):
            import_modules([module])
    native = NATIVE_TASKS.get(task)
    if native is not None and task not in gymnasium.registry:
        # The registry was restored to a state from before rlrun.envs was imported: put ours back.
        _register_with_gymnasium(native)
    if task not in gymnasium.registry and atari.is_atari(task):
        # ale-py registers Gymnasium's Atari ids when imported (Gymnasium does not import it itself).
        if importlib.util.find_spec(atari.MODULE) is None:
            raise MissingDependency(
                f"{task} is an Atari id, which needs ale-py (Gymnasium's Atari ids and ROMs): "
                f"pip install 'rlrun[{atari.EXTRA}]'"
            )
        import_modules([atari.MODULE])
    spec = gymnasium.registry.get(task)
    if spec is None:
        where = f" (module {module!r} registers no such id)" if module is not None else ""
        broken = "; ".join(f"{name}: {reason}" for name, reason in BROKEN.items())
        raise UnknownTask(
            f"unknown task {task!r}{where}.{did_you_mean(task, gymnasium.registry)} "
            "See `rlrun list tasks --gymnasium` for every registered id."
            + (f" Task plugins that failed to load: {broken}." if broken else "")
        )
    return spec


GROUP = "rlrun.tasks"

PROVIDERS: dict[str, str] = {}
"""Task id -> the distribution (package) whose entry point registered it."""

BROKEN: dict[str, str] = {}
"""'<entry point> (<distribution>)' -> why it was left out, one line."""

_loaded = False


def load_task_plugins(import_modules: Callable[[Iterable[str]], None] = _import_each, *, reload: bool = False) -> None:
    """Register the tasks of every `rlrun.tasks` entry point (once per process; `reload` forgets the tasks
    registered before and reads the group again, for packages installed since). Each entry point's module is
    imported with `import_modules` (a call passes its `Call.import_modules`: the imports are import effects)."""
    global _loaded
    if _loaded and not reload:
        return
    if reload:
        for task_id in PROVIDERS:
            forget(task_id)
        PROVIDERS.clear()
        BROKEN.clear()
        importlib.invalidate_caches()  # includes importlib.metadata's cached path listings
    _loaded = True
    for entry_point in importlib.metadata.entry_points(group=GROUP):
        distribution = entry_point.dist.name if entry_point.dist is not None else "unknown"
        try:
            import_modules([entry_point.module])
            tasks = _records(entry_point.load(), entry_point.value)
            for task in tasks:
                if task.id in NATIVE_TASKS and PROVIDERS.get(task.id) != distribution:
                    raise ValueError(f"its task {task.id!r} is already registered")
            for task in tasks:
                register(task)
                PROVIDERS[task.id] = distribution
        except Exception as error:  # a broken plugin must not take the others (or rlrun) down
            BROKEN[f"{entry_point.name} ({distribution})"] = " ".join(f"{type(error).__name__}: {error}".split())


def _records(value: Any, where: str) -> list[NativeTask]:
    """The NativeTask records an entry point names: one record, or a tuple or list of them."""
    records = [value] if isinstance(value, NativeTask) else value
    if isinstance(records, Iterable) and not isinstance(records, str | bytes | dict):
        records = list(records)
        if records and all(isinstance(record, NativeTask) for record in records):
            return records
    raise TypeError(f"{where} is {type(value).__name__}, not a rlrun.envs.NativeTask or a tuple of them")


def provider(task: NativeTask) -> str:
    """The package a native task comes from: `rlrun`, the plugin's distribution, or else the top-level module
    of its env class (a task registered by code with `rlrun.envs.register`)."""
    if task.id in PROVIDERS:
        return PROVIDERS[task.id]
    return task.vector_entry_point.partition(":")[0].partition(".")[0]


@contextlib.contextmanager
def _module_errors(module: str, task: str) -> Iterator[None]:
    """A `module:id` whose module cannot be found becomes one user error naming the module."""
    try:
        yield
    except ModuleNotFoundError as error:
        if error.name is not None and (module == error.name or module.startswith(f"{error.name}.")):
            raise UnknownTask(
                f"--task {module}:{task}: there is no module {module!r} to import (no module named "
                f"{error.name!r}); install the package that provides it, or fix the part before ':'."
            ) from None
        raise MissingDependency(
            f"--task {module}:{task}: module {module!r} imports {error.name!r}, which is not installed; install it."
        ) from None


def resolve_task(task: str, import_modules: Callable[[Iterable[str]], None] = _import_each) -> str:
    """Return the registered id of `task`, or raise `UnknownTask` naming the nearest registered id.

    `task` may be Gymnasium's `module:id`: the module is imported with `import_modules` (a call passes its
    `Call.import_modules`, so that the module's registrations are import effects, made before the capture)
    and the id it registers is returned. The simulator the task's env is made with, where rlrun guards its state
    (MuJoCo), is imported with `import_modules` too.
    """
    spec = task_spec(task, import_modules)
    import_modules(guarded_imports(spec))
    return spec.id


for _task in BUILTIN_TASKS:
    register(_task)
