"""A native task's configuration read from its env class's source, without importing the class.

A native task's env module imports torch (its class is a torch vector env), and so checking an `env.` override
key against the constructor's keywords would cost the 3 s of CPU torch takes to import, before a user hears that
`env.gravty` is a typo. The constructor's keywords and their literal defaults are data in the source file:
`static_env_config` reads them with `ast` (the module's file is found by `importlib.util.find_spec`, which runs
no code of the module itself) and gives what `rlrun.envs.env_config` gives once the class is imported, or None
where the source does not say it plainly (an `__init__` inherited or taking `**kwargs`, a default that is not a
literal, a file that is not Python source): then planning checks the keys after the imports, as before.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from typing import Any

from rlrun.envs.tasks import NATIVE_TASKS, SET_BY_RLRUN, as_data

__all__ = ["static_env_config"]


def static_env_config(task: str) -> dict[str, Any] | None:
    """`env_config(task)` of a registered native task, read from its env class's source; None when it cannot be."""
    native = NATIVE_TASKS.get(task)
    if native is None or ":" not in native.vector_entry_point:
        return None
    module, _, name = native.vector_entry_point.partition(":")
    keywords = _init_keywords(module, name)
    if keywords is None:
        return None
    config = {key: value for key, value in keywords.items() if key not in SET_BY_RLRUN}
    config.update(native.kwargs)
    config["max_episode_steps"] = native.max_episode_steps
    return {key: as_data(value) for key, value in config.items()}


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
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
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
