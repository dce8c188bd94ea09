"""The hermetic core: every global a call may change, captured before it and restored after it.

- `registry`: the guard registry (`GUARDS`, `Guard`, `register`), the one list everything iterates over.
- `guards`, `process_guards`, `rng_guards`, `package_guards`, `torch_state`: the generic guards (Python
  runtime and logging, process hooks, RNGs, NumPy and Gymnasium, torch) and the explicit torch policy a call
  states inside its scope.
- `watched`: the watch-only entries, state that cannot be restored (threads, fds, children, ...).
- `census`: the leak detector, which compares every registry entry before and after a call.
- `scope`: `hermetic_call`, which ties them together: one call at a time, imports first, then
  capture, run, restore.

Nothing here imports torch, NumPy or an RL library; guards for a module that is not imported skip.
"""

from rlrun.hermetic import guards, process_guards, rng_guards, package_guards, torch_state, watched  # noqa: F401, I001 - importing registers the guards, in this order
from rlrun.hermetic import census  # noqa: F401
from rlrun.hermetic.census import leak_check_requested, snapshot
from rlrun.hermetic.registry import (
    GUARDS,
    MISSING,
    Guard,
    attributes_guard,
    identity_guard,
    list_guard,
    module_loaded,
    object_guard,
    register,
    registered,
    unregister,
)
from rlrun.hermetic.scope import Call, hermetic_call
from rlrun.hermetic.torch_state import fresh_torch_state, torch_backend_flags

__all__ = [
    "GUARDS",
    "MISSING",
    "Call",
    "Guard",
    "attributes_guard",
    "fresh_torch_state",
    "hermetic_call",
    "identity_guard",
    "leak_check_requested",
    "list_guard",
    "module_loaded",
    "object_guard",
    "register",
    "registered",
    "snapshot",
    "torch_backend_flags",
    "unregister",
]
