"""rl_games' checkpoints: read safely before rl_games' own loader sees them, and named as rl_games names them.

rl_games' checkpoints hold NumPy scalars, so rlrun reads them with `torch.load(weights_only=True)` allowing
those NumPy types only, and refuses files that do not pass before rl_games' own loader (`weights_only=False`)
sees them. torch and NumPy are imported inside the functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlrun.libraries.base import require_keys, unreadable

CHECKPOINT_KEYS = ("model", "epoch", "optimizer")


def _numpy_globals() -> list[Any]:
    """What rl_games' checkpoints pickle besides tensors: NumPy scalars (its mean return) and their dtypes."""
    import numpy

    scalar = numpy._core.multiarray.scalar if hasattr(numpy, "_core") else numpy.core.multiarray.scalar
    dtypes = [getattr(numpy.dtypes, name) for name in numpy.dtypes.__all__]
    # Files written under NumPy 1.x name the scalar constructor `numpy.core...`, under 2.x `numpy._core...`.
    return [(scalar, "numpy.core.multiarray.scalar"), (scalar, "numpy._core.multiarray.scalar"), numpy.dtype, *dtypes]


def read_checkpoint(path: Path) -> dict[str, Any]:
    """Load an rl_games checkpoint with `weights_only=True`, allowing the NumPy scalars rl_games stores."""
    import torch

    try:
        with torch.serialization.safe_globals(_numpy_globals()):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise unreadable(path, "an rl_games checkpoint", error) from error
    require_keys(path, state, CHECKPOINT_KEYS, "an rl_games agent checkpoint")
    return state


def check_checkpoint(path: Path) -> None:
    """Read the file with `weights_only=True` and check it holds an rl_games agent's state."""
    read_checkpoint(path)


def checkpoint_path(agent: Any, epoch: int) -> str:
    """rl_games' name for a periodic checkpoint of `epoch` (`nn/last_<name>_ep_<epoch>_rew_<mean return>`)."""
    rewards = agent.game_rewards.get_mean()[0] if agent.game_rewards.current_size > 0 else float("-inf")
    return os.path.join(agent.nn_dir, f"last_{agent.config['name']}_ep_{epoch}_rew_{rewards}")
