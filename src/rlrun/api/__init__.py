"""The typed API: requests in, results out, every call hermetic.

    result = rlrun.train(rlrun.TrainRequest(task="rlrun/CartPoleContinuous-v1", library="rsl_rl"))
    played = rlrun.play(rlrun.PlayRequest(task="rlrun/CartPoleContinuous-v1", library="rsl_rl"))

One role per module:

- `requests`: the request and result dataclasses (their field docstrings are the CLI's help);
- `planning`, `checks`, `resolution`: each request validated into a complete, typed plan before anything
  changes (its own values checked, then what it resolves to: checkpoint, algorithm, configurations);
- `session`: the guarded session every call runs its body in (scope, torch state, seeds, env);
- `training`, `playing`, `exporting`, `agents`: one call body each, with its public function and
  its `*_in_call` form for a caller that already holds a hermetic call (the CLI);
- `metrics`: a training's rows, their `metrics.csv` columns and `rlrun/*` curves; `clock`: what a training
  does at each step (rows, progress, stop requests); `signals`: Ctrl-C and SIGTERM during a training.

Benches (`rlrun.benching`) and studies (`rlrun.tuning`) call this package as any user would; it imports neither.

Each call runs in three phases (see `rlrun.hermetic.scope`): plan (parse and validate the request,
import what it needs; nothing else changes and no directory is made), run (inside the guarded
session: the library may change any global), restore. User mistakes raise `rlrun.errors.UserError`
subclasses; nothing here calls `sys.exit`. Nothing here imports an RL library: adapters are looked
up in `rlrun.libraries.LIBRARIES`.
"""

from rlrun.api.agents import agent_in_call, random_agent, zero_agent
from rlrun.api.exporting import export, export_in_call
from rlrun.api.imports import CORE_IMPORTS, EXPORT_IMPORTS
from rlrun.api.planning import AGENTS
from rlrun.api.playing import play, play_in_call
from rlrun.api.requests import (
    AgentRequest,
    ExportRequest,
    ExportResult,
    LibraryRequest,
    PlayRequest,
    PlayResult,
    TaskRequest,
    TrainRequest,
    TrainResult,
)
from rlrun.api.training import train, train_in_call
from rlrun.errors import UserError

__all__ = [
    "AGENTS",
    "CORE_IMPORTS",
    "EXPORT_IMPORTS",
    "AgentRequest",
    "ExportRequest",
    "ExportResult",
    "LibraryRequest",
    "PlayRequest",
    "PlayResult",
    "TaskRequest",
    "TrainRequest",
    "TrainResult",
    "UserError",
    "agent_in_call",
    "export",
    "export_in_call",
    "play",
    "play_in_call",
    "random_agent",
    "train",
    "train_in_call",
    "zero_agent",
]
