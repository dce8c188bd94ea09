"""The generic guards of the simulation packages' module state: NumPy's error and print options, Gymnasium's
env registry, MuJoCo's warning callback.

Every task runs on NumPy and Gymnasium whatever the library (RL libraries register their own guards in their
adapters); MuJoCo where a task is made with it. Registered after `rng_guards`, in this order.
"""

from __future__ import annotations

import _thread
import operator
import sys
import warnings
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

# --- MuJoCo -------------------------------------------------------------------------------------------------


_mujoco_shown: dict[Any, Any] = {}
"""The warnings registry of MuJoCo's messages in one call: each is shown once (one per env made otherwise)."""


def _mujoco_warning(message: str) -> None:
    """MuJoCo's warning callback during a call: the message becomes a Python warning (`RuntimeWarning`, from
    module `mujoco`), shown, recorded or filtered as the caller's warning settings say.

    With no callback set, MuJoCo prints the warning and appends it to `MUJOCO_LOG.TXT` in the current
    directory, a file the call would leave behind (Gymnasium's MuJoCo v5 models trigger one as they compile:
    `settotalmass` is deprecated in MuJoCo 4). An exception must not leave this function: MuJoCo calls it from
    C++, where one ends the process. A warning the caller's filters turn into an error is dropped (a warning is
    not worth the run); a Ctrl-C that lands here is delivered again once MuJoCo returns.
    """
    try:
        warnings.warn_explicit(f"MuJoCo: {message}", RuntimeWarning, "mujoco", 0, registry=_mujoco_shown)
    except KeyboardInterrupt:
        _thread.interrupt_main()
    except BaseException:  # see the docstring: nothing may propagate into MuJoCo
        pass


def _capture_mujoco() -> Any:
    mujoco = sys.modules["mujoco"]
    saved = mujoco.get_mju_user_warning()
    _mujoco_shown.clear()
    mujoco.set_mju_user_warning(_mujoco_warning)
    return saved


def _restore_mujoco(saved: Any) -> None:
    sys.modules["mujoco"].set_mju_user_warning(saved)


register(
    Guard(
        "mujoco warning callback",
        "`mujoco.get_mju_user_warning()`. During a call MuJoCo's warnings become Python warnings instead of lines "
        "appended to `MUJOCO_LOG.TXT` in the working directory; the caller's callback comes back after.",
        _capture_mujoco,
        _restore_mujoco,
        observe=lambda: sys.modules["mujoco"].get_mju_user_warning(),
        category="mujoco",
        available=module_loaded("mujoco"),
    )
)
