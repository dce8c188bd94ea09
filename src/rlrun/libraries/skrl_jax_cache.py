"""JAX's persistent compilation cache for SKRL-on-JAX calls: compiled once per machine, not once per call.

SKRL's JAX agents jit functions whose static arguments are the call's own models (`policy.act`, the
optax transformation, each model's `apply`), so every call misses JAX's in-memory caches and compiles
its XLA executables again, which is most of a short call's time (and `rlrun.libraries.skrl_jax_traces`
evicts them at the end of each call, so memory stays flat). The programs are the same from call to call,
and so are their HLO modules, which key JAX's on-disk cache: with it, a second call loads its executables
from disk, much faster than compiling them, and so does a fresh process after the first one on the machine.

- **Where:** `<rlrun's cache root>/jax` (`$RLRUN_CACHE_DIR`, else `$XDG_CACHE_HOME/rlrun`, else
  `~/.cache/rlrun`, as for `rlrun.envs.kernels`), one file per executable. JAX keys entries on the HLO, the
  compile options, the device and JAX's version, so a stale entry is never loaded; delete the folder to
  reclaim the space. Every executable is written, however small or quick to compile (the thresholds are 0).
- **When:** inside each SKRL-on-JAX call, unless the caller switched JAX's compilation cache off
  (`jax_enable_compilation_cache`, `JAX_ENABLE_COMPILATION_CACHE=false`): then nothing is cached.
- **What it changes, and how it is put back:** three `jax.config` values (the adapter's guard of every
  JAX config value restores them) and four globals of `jax._src.compilation_cache` (`_cache`, the open
  cache, and the flags that say whether it was initialised and checked), guarded here: a caller with a
  cache of their own gets it back, with its object and flags, and one without finds none.

**In memory, between calls of one process.** Loading an executable from the disk is a read and a
deserialization, paid by every call because every call traces anew. Within a call the cache's reads go
through `_read_kept`, which keeps each executable it loaded by its cache key (JAX's key of the HLO, compile
options, device and version), the backend and the devices. A later call that asks for the same key gets the
same executable, without a read.
- **How much stays:** the executables the latest SKRL-on-JAX call used, and no more: when the call ends (the
  guard of `compiler._cache_read` puts the caller's function back), those it did not use are let go. An XLA
  executable holds no Python object of the call (no model, no optimizer state), so the agent is still freed.
  `forget_kept_executables()` lets them all go.
- **Why it is safe:** the key is the persistent cache's own, so an executable is reused exactly where JAX
  would have loaded the same bytes from the disk. An XLA executable keeps no state from one run to the next
  (each run gets its own buffers), so the jitted functions of two calls can run the same one.
- **When:** only where the persistent cache is used (above), and only for what it read.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol, cast

from rlrun.hermetic import register
from rlrun.hermetic.registry import MISSING, Guard, module_loaded

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


COMPILER = "jax._src.compiler"
READER = "_cache_read"
"""The function of `jax._src.compiler` that reads an executable from the persistent cache (JAX 0.10: `(module_name,
cache_key, compile_options, backend, executable_devices) -> (executable or None, compile time)`)."""

_kept: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
"""Executables the persistent cache gave, by (cache folder, cache key, id of the backend, device ids): (executable,
compile time, backend; the backend is held so that its id names it)."""
_used: set[tuple[Any, ...]] = set()
"""The keys of `_kept` asked for in the current call."""
_inner: Any = None
"""The reader `_read_kept` stands in front of: what `compiler._cache_read` was when the call put it in."""
_folder = ""
"""The call's cache folder: an executable is kept for the folder it was read from (a call that points the cache
elsewhere reads, or compiles and writes, there)."""


def _read_kept(module_name: str, cache_key: str, compile_options: Any, backend: Any, executable_devices: Any) -> Any:
    """`compiler._cache_read` with the executables of earlier reads kept (see the module docstring)."""
    key = (_folder, cache_key, id(backend), tuple(device.id for device in executable_devices))
    found = _kept.get(key)
    if found is None:
        executable, compile_time = _inner(module_name, cache_key, compile_options, backend, executable_devices)
        if executable is None:  # not on the disk: JAX compiles it and writes it there
            return executable, compile_time
        found = _kept[key] = (executable, compile_time, backend)
    _used.add(key)
    return found[0], found[1]


def _reader() -> Any:
    return getattr(sys.modules[COMPILER], READER, MISSING)


def _put_reader(reader: Any) -> None:
    """Put `reader` back as `compiler._cache_read`; where that takes `_read_kept` out, let go of the executables
    the call did not use."""
    compiler = sys.modules[COMPILER]
    current = getattr(compiler, READER, MISSING)
    if current is reader:
        return
    if reader is MISSING:
        delattr(compiler, READER)
    else:
        setattr(compiler, READER, reader)
    if current is _read_kept:
        for key in [key for key in _kept if key not in _used]:
            del _kept[key]
        _used.clear()


register(
    Guard(
        "jax compiler cache read",
        "`jax._src.compiler._cache_read`, which a SKRL-on-JAX call replaces with rlrun's reader of kept "
        "executables; the same function is put back, and the kept executables the call did not use are let go.",
        _reader,
        _put_reader,
        category="skrl",
        available=module_loaded(COMPILER),
        owner="skrl",
    )
)


def forget_kept_executables() -> None:
    """Let go of every executable kept between calls (each is read from the disk again when next needed)."""
    _kept.clear()
    _used.clear()


def _keep_executables(folder: str) -> None:
    """Route the call's persistent-cache reads from `folder` through `_read_kept` (the guard above puts the reader
    back)."""
    global _inner, _folder
    compiler = sys.modules.get(COMPILER)
    reader = getattr(compiler, READER, None)
    if not callable(reader) or reader is _read_kept:
        return  # a JAX without this reader reads from the disk alone; or it is in already
    _inner, _folder = reader, folder
    _used.clear()
    setattr(compiler, READER, _read_kept)


def cache_folder() -> Any:
    """`<rlrun's cache root>/jax` (a `Path`)."""
    from rlrun.envs.kernels import cache_root  # kernels imports torch: load it inside the call only

    return cache_root() / FOLDER


class _CacheOptions(Protocol):
    """The two options of `jax.config` read here: JAX makes them attributes at run time, its type declares none."""

    jax_enable_compilation_cache: bool
    jax_compilation_cache_dir: str | None


def use_persistent_cache() -> None:
    """Point JAX's persistent compilation cache at rlrun's folder for the rest of the call (see the module
    docstring); the call's guards put the caller's cache and configuration back."""
    import jax

    options = cast(_CacheOptions, jax.config)
    if not options.jax_enable_compilation_cache:
        return
    folder = str(cache_folder())
    if options.jax_compilation_cache_dir != folder:
        jax.config.update("jax_compilation_cache_dir", folder)
    for name in ("jax_persistent_cache_min_compile_time_secs", "jax_persistent_cache_min_entry_size_bytes"):
        if getattr(jax.config, name) != 0:
            jax.config.update(name, 0)
    # Forget the caller's open cache (or none), so that the next compile opens rlrun's folder; what
    # `compilation_cache.reset_cache()` does, without its log line.
    _write((None, False, False, False))
    _keep_executables(folder)
