"""The generic guards of NumPy's and Gymnasium's module state: error and print options, the env registry.

Every task runs on these two packages whatever the library (RL libraries register their own guards in their
adapters). Registered after `rng_guards`, in this order.
"""

from __future__ import annotations

import operator
import sys
from typing import TYPE_CHECKING, Any, Protocol, cast

from rlrun.hermetic.registry import Guard, module_loaded, register

# --- NumPy --------------------------------------------------------------------------------------------------


def _numpy_options() -> tuple[dict[str, Any], dict[str, Any]]:
    numpy = sys.modules["numpy"]
    return numpy.geterr(), numpy.get_printoptions()


def _restore_numpy_options(saved: tuple[dict[str, Any], dict[str, Any]]) -> None:
    numpy = sys.modules["numpy"]
    errors, printoptions = saved
    if numpy.geterr() != errors:
        numpy.seterr(**errors)
    if numpy.get_printoptions() != printoptions:
        numpy.set_printoptions(**printoptions)


register(
    Guard(
        "numpy error and print options",
        "`np.geterr()` and `np.get_printoptions()`.",
        _numpy_options,
        _restore_numpy_options,
        fingerprint=lambda saved: (tuple(sorted(saved[0].items())), repr(sorted(saved[1].items()))),
        category="numpy",
        available=module_loaded("numpy"),
    )
)

# --- Gymnasium ----------------------------------------------------------------------------------------------


if TYPE_CHECKING:

    class _Registration(Protocol):
        """What the guard reads and writes of `gymnasium.envs.registration`."""

        registry: dict[str, object]
        current_namespace: str | None

    class _Logger(Protocol):
        """What the guard reads and writes of `gymnasium.logger`."""

        min_level: int


_SavedGymnasium = tuple[dict[str, object], str | None, int]


def _capture_gymnasium() -> _SavedGymnasium:
    registration = cast("_Registration", sys.modules["gymnasium.envs.registration"])
    logger = cast("_Logger", sys.modules["gymnasium.logger"])
    return dict(registration.registry), registration.current_namespace, logger.min_level


def _restore_gymnasium(saved: _SavedGymnasium) -> None:
    registration = cast("_Registration", sys.modules["gymnasium.envs.registration"])
    registry, namespace, min_level = saved
    current = registration.registry
    if current.keys() != registry.keys() or not all(map(operator.is_, current.values(), registry.values())):
        current.clear()
        current.update(registry)
    if registration.current_namespace != namespace:
        registration.current_namespace = namespace
    logger = cast("_Logger", sys.modules["gymnasium.logger"])
    if logger.min_level != min_level:
        logger.min_level = min_level


register(
    Guard(
        "gymnasium registry",
        "Gymnasium's environment registry (ids and spec objects), `current_namespace` and `logger.min_level`.",
        _capture_gymnasium,
        _restore_gymnasium,
        fingerprint=lambda saved: ({key: id(spec) for key, spec in saved[0].items()}, saved[1], saved[2]),
        category="gymnasium",
        available=module_loaded("gymnasium.envs.registration", "gymnasium.logger"),
    )
)
