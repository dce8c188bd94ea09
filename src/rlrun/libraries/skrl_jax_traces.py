"""What a SKRL-on-JAX call leaves in JAX's in-memory caches, and how the call lets go of it at its end.

SKRL's JAX agents jit module-level functions with the call's own objects as static arguments
(`_update_policy(policy_act=policy.act)`, `_update_value(value_act=...)`, the Adam step's optax
`transformation`). JAX keys its caches on static arguments and holds them strongly, so without eviction
every call's models, optimizer state and compiled executables would stay alive for the life of the
process. `forget_jax_traces` evicts what the call added, function by function, and leaves the caller's
own jitted functions and SKRL's array-only ones (`ARRAY_ONLY`) compiled.
"""

from __future__ import annotations

import sys
from typing import Any

ARRAY_ONLY = frozenset(
    {
        "skrl.agents.jax.ddpg.ddpg._apply_exploration_noise",
        "skrl.agents.jax.ppo.ppo._compute_gae",
        "skrl.agents.jax.td3.td3._apply_exploration_noise",
        "skrl.agents.jax.td3.td3._apply_smooth_regularization_noise",
        "skrl.memories.jax.base._copyto",
        "skrl.memories.jax.base._copyto_i",
        "skrl.memories.jax.base._copyto_i_j",
        "skrl.models.jax.base._unvectorize_leaves",
        "skrl.models.jax.base._vectorize_leaves",
        "skrl.models.jax.categorical._categorical",
        "skrl.models.jax.categorical._entropy",
        "skrl.models.jax.gaussian._entropy",
        "skrl.models.jax.gaussian._gaussian",
        "skrl.models.jax.multicategorical._categorical",
        "skrl.models.jax.multicategorical._entropy",
        "skrl.resources.preprocessors.jax.running_standard_scaler._copyto",
        "skrl.resources.preprocessors.jax.running_standard_scaler._inverse",
        "skrl.resources.preprocessors.jax.running_standard_scaler._parallel_variance",
        "skrl.resources.preprocessors.jax.running_standard_scaler._standardization",
    }
)
"""SKRL's jitted functions whose arguments are arrays, plain numbers and flags only (read in SKRL 2.x's
source): their compiled entries are keyed on shapes, dtypes and those values and hold none of a call's
objects, so they stay compiled across calls, as the caller's own jitted functions do (bounded: one entry
per shape and flag). Every other SKRL function that gains entries in a call is cleared at its end: those
that take a model's `act` or `apply`, an optax transformation or a state dict (whose tree carries the
model's `apply`), and any this list does not name, such as one a new SKRL version adds."""


def skrl_jitted_functions() -> dict[int, tuple[Any, int]]:
    """SKRL's module-level jitted functions that may hold a call's objects (not in `ARRAY_ONLY`), by id, with
    the number of compiled entries each holds now."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "skrl" or name.startswith("skrl.")):
            continue
        for value in list(vars(module).values()):
            if type(value).__name__ == "PjitFunction" and hasattr(value, "clear_cache"):
                function = getattr(value, "_fun", None)  # the jitted Python function, where it was defined
                if f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', '')}" in ARRAY_ONLY:
                    continue
                size = getattr(value, "_cache_size", None)
                found[id(value)] = (value, size() if callable(size) else -1)
    return found


def forget_jax_traces(before: dict[int, tuple[Any, int]]) -> None:
    """Make JAX's caches let go of this call's agent; `before` is `skrl_jitted_functions()` from the start.

    For every SKRL function that gained compiled entries in the call, except those of `ARRAY_ONLY`: its
    executables (`_clear_cache`), its traced jaxprs and its entries in pjit's parameter-inference cache (both
    caches are keyed weakly on the function, and evicted for it alone); then two memos of `jax._src.pjit`
    whose keys carry the argument tree (`_process_in_axis_resources`, `_check_and_canonicalize_out_shardings`)
    are emptied. The caller's own jitted functions, and SKRL's array-only ones, keep their executables and
    inferred parameters, so they need not be traced and compiled again. JAX's public `clear_cache()` on a
    function would also empty the inference cache of every function, the caller's included.
    Where a JAX version lacks these names, `jax.clear_caches()` is used instead: correct, but every jitted
    function then compiles again on its next call. Never raises (it runs in `finally`).
    """
    jax = sys.modules.get("jax")
    if jax is None:
        return
    try:
        from jax._src import pjit
        from jax._src.interpreters import partial_eval

        memos = (pjit._process_in_axis_resources, pjit._check_and_canonicalize_out_shardings)
        caches = (partial_eval.trace_to_jaxpr, pjit._infer_params_cached)  # weakly keyed on the function
        for key, (function, size) in skrl_jitted_functions().items():
            if size < 0 or size > before.get(key, (None, 0))[1]:
                function._clear_cache()
                for cache in caches:
                    cache.evict_weakref(function._fun)
        for memo in memos:
            memo.cache_clear()
    except Exception:  # JAX's internals moved: clear everything rather than keep every call's agent
        jax.clear_caches()
