"""rlrun: train, play and compare RL agents with the major libraries, one hermetic call at a time.

    import rlrun
    result = rlrun.train(rlrun.TrainRequest(task="rlrun/CartPoleContinuous-v1", library="rsl_rl"))
    played = rlrun.play(rlrun.PlayRequest(task="rlrun/CartPoleContinuous-v1", library="rsl_rl"))
    exit_code = rlrun.main(["list"])

Every call leaves the process as it found it (see `rlrun.hermetic`). Importing rlrun imports no
torch, JAX or RL library: the public names below are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_PUBLIC = {
    "TrainRequest": "rlrun.api",
    "AgentRequest": "rlrun.api",
    "ExportRequest": "rlrun.api",
    "ExportResult": "rlrun.api",
    "export": "rlrun.api",
    "zero_agent": "rlrun.api",
    "random_agent": "rlrun.api",
    "PlayRequest": "rlrun.api",
    "TrainResult": "rlrun.api",
    "PlayResult": "rlrun.api",
    "train": "rlrun.api",
    "play": "rlrun.api",
    "BenchRequest": "rlrun.benching",
    "BenchResult": "rlrun.benching",
    "BenchRun": "rlrun.benching",
    "bench": "rlrun.benching",
    "TuneRequest": "rlrun.tuning",
    "TuneResult": "rlrun.tuning",
    "tune": "rlrun.tuning",
    "main": "rlrun.cli",
    "errors": "rlrun.errors",
}

if TYPE_CHECKING:
    from rlrun import errors
    from rlrun.api import (
        AgentRequest,
        ExportRequest,
        ExportResult,
        PlayRequest,
        PlayResult,
        TrainRequest,
        TrainResult,
        export,
        play,
        random_agent,
        train,
        zero_agent,
    )
    from rlrun.benching import BenchRequest, BenchResult, BenchRun, bench
    from rlrun.cli import main
    from rlrun.tuning import TuneRequest, TuneResult, tune

__all__ = [
    "AgentRequest",
    "BenchRequest",
    "BenchResult",
    "BenchRun",
    "ExportRequest",
    "ExportResult",
    "PlayRequest",
    "PlayResult",
    "TrainRequest",
    "TrainResult",
    "TuneRequest",
    "TuneResult",
    "bench",
    "errors",
    "export",
    "main",
    "play",
    "random_agent",
    "train",
    "tune",
    "zero_agent",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'rlrun' has no attribute {name!r}")
    loaded = importlib.import_module(module)
    value = loaded if name == "errors" else getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
