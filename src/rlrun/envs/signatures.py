"""A task's configuration: the keyword arguments its env constructor takes, with their defaults.

`env_config` reads them from the constructor itself, imported (`inspect.signature`), with the spec's kwargs and
`max_episode_steps`: what `make_env(env_kwargs=...)` accepts, and what a run records in `params/env.yaml`.

A native task's env module imports torch (its class is a torch vector env), and so checking an `env.` override
key against the constructor's keywords would cost the 3 s of CPU torch takes to import, before a user hears that
`env.gravty` is a typo. The constructor's keywords and their literal defaults are data in the source file:
`static_env_config` reads them with `ast` (the module's file is found by `importlib.util.find_spec`, which runs
no code of the module itself) and gives what `env_config` gives once the class is imported, or None where the
source does not say it plainly (an `__init__` inherited or taking `**kwargs`, a default that is not a literal, a
file that is not Python source): then planning checks the keys after the imports, as before.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from typing import Any

from gymnasium.envs.registration import load_env_creator

from rlrun.envs.tasks import NATIVE_TASKS, task_spec

__all__ = ["SET_BY_RLRUN", "as_data", "env_config", "env_module", "static_env_config"]

SET_BY_RLRUN = frozenset({"num_envs", "device", "render_mode"})
"""Constructor parameters that a task's configuration leaves out: rlrun passes them itself."""


def env_config(task: str) -> dict[str, Any]:
    """Return the keyword arguments `task` accepts in `make_env(env_kwargs=...)`, with their defaults.

    That is `max_episode_steps` from the spec, the env constructor's keyword parameters with defaults
    (less `num_envs`, `device` and `render_mode`, which rlrun sets itself) and the spec's kwargs; arrays as lists.
    """
    spec = task_spec(task)
    creator = spec.vector_entry_point if spec.id in NATIVE_TASKS else spec.entry_point
    if isinstance(creator, str):
        creator = load_env_creator(creator)
    keywords: dict[str, Any] = {}
    if creator is not None:
        for name, parameter in inspect.signature(creator).parameters.items():
            keyword = parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            if keyword and parameter.default is not parameter.empty:
                keywords[name] = parameter.default
    return _configuration(keywords, spec.kwargs, spec.max_episode_steps)


def env_module(task: str) -> str | None:
    """The module of a Gymnasium id's entry point (`env_config` needs it alone); None for a native task (its env
    module imports torch) or an entry point that is not a `module:attr` string."""
    spec = task_spec(task)
    entry = None if spec.id in NATIVE_TASKS else spec.entry_point
    return entry.split(":", 1)[0] if isinstance(entry, str) and ":" in entry else None


def as_data(value: Any) -> Any:
    """`value` with NumPy arrays as lists, all the way down: a configuration is data that YAML writes (MuJoCo v5
    envs default `default_camera_config["lookat"]` to an array, and take a list as well)."""
    if hasattr(value, "tolist") and hasattr(value, "shape"):
        return value.tolist()
    if isinstance(value, dict):
        return {key: as_data(item) for key, item in value.items()}
    return value


def _configuration(
    keywords: Mapping[str, Any], kwargs: Mapping[str, Any], max_episode_steps: int | None
) -> dict[str, Any]:
    """A task's configuration: its constructor's `keywords` with defaults (less `SET_BY_RLRUN`), the spec's
    `kwargs` over them, and `max_episode_steps`; arrays as lists."""
    config = {key: value for key, value in keywords.items() if key not in SET_BY_RLRUN}
    config.update(kwargs)
    config["max_episode_steps"] = max_episode_steps
    return {key: as_data(value) for key, value in config.items()}


def static_env_config(task: str) -> dict[str, Any] | None:
    """`env_config(task)` of a registered native task, read from its env class's source; None when it cannot be."""
    native = NATIVE_TASKS.get(task)
    if native is None or ":" not in native.vector_entry_point:
        return None
    module, _, name = native.vector_entry_point.partition(":")
    keywords = _init_keywords(module, name)
    if keywords is None:
        return None
    return _configuration(keywords, native.kwargs, native.max_episode_steps)


def _init_keywords(module: str, name: str) -> dict[str, Any] | None:
    """The keyword parameters with defaults of `module`'s class `name`'s own `__init__`, as literals; None when
    the class or its `__init__` is not in the source, takes `**kwargs`, or has a default that is not a literal."""
    parent = module.rpartition(".")[0]
    if parent and parent not in sys.modules:  # `find_spec` would import it here, outside the call's import phase
        return None
    try:
        spec = importlib.util.find_spec(module)  # runs no code: the parent packages are imported already
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as file:
            tree = ast.parse(file.read(), filename=spec.origin)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError):
        return None  # a file `ast` cannot read: the keys are checked after the imports
    found = next((node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name), None)
    methods = found.body if found is not None else []
    init = next((node for node in methods if isinstance(node, ast.FunctionDef) and node.name == "__init__"), None)
    if init is None or init.args.kwarg is not None:
        return None
    positional = [*init.args.posonlyargs, *init.args.args]
    pairs = [
        *zip(positional[len(positional) - len(init.args.defaults) :], init.args.defaults, strict=True),
        *((argument, default) for argument, default in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True)),
    ]
    keywords: dict[str, Any] = {}
    for argument, default in pairs:
        if default is None or argument in init.args.posonlyargs:
            continue  # a keyword-only parameter without a default, or one that cannot be passed by name
        try:
            keywords[argument.arg] = ast.literal_eval(default)
        except ValueError:
            return None
    return keywords
