"""SKRL (JAX, CPU) row of `adapter_overhead.py`: SKRL's own `Runner` alone against `rlrun.train`, same env and config.

SKRL jits its agent's functions anew for every agent. Through rlrun they come from JAX's persistent compilation
cache (`rlrun.libraries.skrl_jax_cache`); the library alone gets the same cache here, as a user who turned it on
would (`jax_compilation_cache_dir` and its two thresholds, put back afterwards), so that the row measures
rlrun's own cost rather than the cache. Loading the executables is still a fixed cost of a second or so a side,
the reason this row runs fewer iterations than the PyTorch one.

What the library alone cannot have: through rlrun, a call takes the executables the previous call loaded from
memory instead of reading them from the disk again (about 140 ms of a call here). The row's ratio includes
that saving; `overhead_parts.py --library skrl_jax` also times rlrun without it ("no kept executables"), which
is rlrun's cost before what it saves.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import overhead_skrl

FRAMEWORK = "jax"
NUM_ENVS, ITERATIONS = overhead_skrl.NUM_ENVS, 5
LABEL = overhead_skrl.LABEL.replace("(torch)", f"({FRAMEWORK}, both sides with JAX's compilation cache)")
CACHE_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
CACHE_SETTINGS += ("jax_persistent_cache_min_entry_size_bytes",)


def direct(tmp: Path, iterations: int = ITERATIONS) -> None:
    """The library alone, with JAX's persistent compilation cache in the folder rlrun uses."""
    import jax
    from jax._src import compilation_cache

    from rlrun.libraries.skrl_jax_cache import cache_folder

    saved = {name: getattr(jax.config, name) for name in CACHE_SETTINGS}
    jax.config.update("jax_compilation_cache_dir", str(cache_folder()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()  # opened again, in that folder, by the next compile
    try:
        overhead_skrl.direct(tmp, iterations, framework=FRAMEWORK)
    finally:
        for name, value in saved.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()


through_rlrun = partial(overhead_skrl.through_rlrun, framework=FRAMEWORK)
