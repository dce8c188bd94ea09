"""JAX's persistent compilation cache for SKRL-on-JAX calls: compiled once per machine, not once per call.

SKRL's JAX agents jit functions whose static arguments are the call's own models (`policy.act`, the
optax transformation, each model's `apply`), so every call misses JAX's in-memory caches and compiles
some 30 XLA executables again: about 6 s of an 8 s call at the bench's default cell on two cores (and
`rlrun.libraries.skrl` evicts them at the end of each call, so memory stays flat). The programs are the
same from call to call, and so are their HLO modules, which key JAX's on-disk cache: with it, a second
call loads its executables from disk (about 20 ms each) instead of compiling them (about 200 ms each),
and so does a fresh process after the first one on the machine.

- **Where:** `<rlrun's cache root>/jax` (`$RLRUN_CACHE_DIR`, else `$XDG_CACHE_HOME/rlrun`, else
  `~/.cache/rlrun`, as for `rlrun.envs.kernels`), one file per executable, about 1 MB per agent
  configuration and batch shape. JAX keys entries on the HLO, the compile options, the device and JAX's
  version, so a stale entry is never loaded; delete the folder to reclaim the space. Every executable is
  written, however small or quick to compile (the thresholds are 0).
- **When:** inside each SKRL-on-JAX call, unless the caller switched JAX's compilation cache off
  (`jax_enable_compilation_cache`, `JAX_ENABLE_COMPILATION_CACHE=false`): then nothing is cached.
- **What it changes, and how it is put back:** three `jax.config` values (the adapter's guard of every
  JAX config value restores them) and four globals of `jax._src.compilation_cache` (`_cache`, the open
  cache, and the flags that say whether it was initialised and checked), guarded here: a caller with a
  cache of their own gets it back, with its object and flags, and one without finds none.
"""

from __future__ import annotations

import sys
from typing import Any

from rlrun.hermetic import register
from rlrun.hermetic.registry import Guard, module_loaded

MODULE = "jax._src.compilation_cache"
GLOBALS = ("_cache", "_cache_initialized", "_cache_checked", "_cache_used")
"""What `jax._src.compilation_cache` keeps per process: the open cache and whether it was initialised, and
whether the backend's support for it was checked and found."""

FOLDER = "jax"
"""The cache's folder under rlrun's cache root."""


def _read() -> tuple[Any, ...]:
    module = sys.modules[MODULE]
    return tuple(getattr(module, name) for name in GLOBALS)


def _write(values: tuple[Any, ...]) -> None:
    module = sys.modules[MODULE]
    with module._cache_initialized_mutex:  # JAX's own lock around these flags
        for name, value in zip(GLOBALS, values, strict=True):
            if getattr(module, name) is not value:
                setattr(module, name, value)


register(
    Guard(
        "jax compilation cache",
        "The persistent compilation cache JAX has open and its flags (`_cache`, `_cache_initialized`, "
        "`_cache_checked`, `_cache_used` of `jax._src.compilation_cache`); the same objects are put back.",
        _read,
        _write,
        fingerprint=lambda saved: (id(saved[0]), *saved[1:]),
        category="skrl",
        available=module_loaded(MODULE),
        owner="skrl",
    )
)


def cache_folder() -> Any:
    """`<rlrun's cache root>/jax` (a `Path`)."""
    from rlrun.envs.kernels import cache_root  # kernels imports torch: load it inside the call only

    return cache_root() / FOLDER


def use_persistent_cache() -> None:
    """Point JAX's persistent compilation cache at rlrun's folder for the rest of the call (see the module
    docstring); the call's guards put the caller's cache and configuration back."""
    import jax

    if not jax.config.jax_enable_compilation_cache:
        return
    folder = str(cache_folder())
    if jax.config.jax_compilation_cache_dir != folder:
        jax.config.update("jax_compilation_cache_dir", folder)
    for name in ("jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes"):
        if getattr(jax.config, name) != 0:
            jax.config.update(name, 0)
    # Forget the caller's open cache (or none), so that the next compile opens rlrun's folder; what
    # `compilation_cache.reset_cache()` does, without its log line.
    _write((None, False, False, False))
