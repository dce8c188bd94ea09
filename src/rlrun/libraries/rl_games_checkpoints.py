"""rl_games' checkpoints: read once as data, restored into rl_games' agent or player, named as rl_games names them.

rl_games' own loader (`restore(path)`) unpickles with `weights_only=False`, so rlrun never hands it a path: it
reads the file once with `torch.load(weights_only=True)` (`rlrun.trust.checkpoints`), allowing the NumPy scalars
rl_games stores besides tensors and nothing else, and restores the state it checked as rl_games' `restore` would
after its own read (`restore_agent`, `restore_player`). torch and NumPy are imported inside the functions.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from rlrun.libraries.base import require_count, require_keys
from rlrun.trust.checkpoints import read_weights

CHECKPOINT_KEYS = ("model", "epoch", "optimizer")


def _numpy_globals() -> list[Any]:
    """What rl_games' checkpoints pickle besides tensors: NumPy scalars (its mean return) and their dtypes."""
    import numpy

    core = "numpy._core" if hasattr(numpy, "_core") else "numpy.core"  # NumPy 2.x, 1.x
    scalar = importlib.import_module(f"{core}.multiarray").scalar
    dtypes = [getattr(numpy.dtypes, name) for name in numpy.dtypes.__all__]
    # Files written under NumPy 1.x name the scalar constructor `numpy.core...`, under 2.x `numpy._core...`.
    return [(scalar, "numpy.core.multiarray.scalar"), (scalar, "numpy._core.multiarray.scalar"), numpy.dtype, *dtypes]


def read_checkpoint(path: Path, map_location: str = "cpu") -> dict[str, Any]:
    """An rl_games checkpoint read once and loaded with `weights_only=True` onto `map_location`, allowing the
    NumPy scalars rl_games stores; its model's keys as rl_games' loader gives them (no `_orig_mod.` prefix)."""
    what = "an rl_games agent checkpoint"
    state = read_weights(path, "an rl_games checkpoint", map_location=map_location, allowed=_numpy_globals())
    require_keys(path, state, CHECKPOINT_KEYS, what)
    require_count(path, state, "epoch", what)
    if "frame" in state:
        require_count(path, state, "frame", what)
    if isinstance(state["model"], dict):  # saved from a compiled model: the names rl_games' loader strips
        state["model"] = {_unprefixed(key): value for key, value in state["model"].items()}
    return state


def _unprefixed(key: Any) -> Any:
    return key.removeprefix("_orig_mod.") if isinstance(key, str) else key


def restore_agent(agent: Any, state: dict[str, Any], set_epoch: bool = True) -> None:
    """rl_games' `agent.restore(path, set_epoch)` from a checked state: weights, normalisers, optimiser, epoch
    and frame counters, best return so far."""
    state.setdefault("frame", 0)
    agent.set_full_state_weights(state, set_epoch=set_epoch)


def restore_player(player: Any, state: dict[str, Any]) -> None:
    """rl_games' `player.restore(path)` from a checked state: the network and its input normaliser."""
    player.model.load_state_dict(state["model"])
    if player.normalize_input and "running_mean_std" in state:
        player.model.running_mean_std.load_state_dict(state["running_mean_std"])
    if player.env is not None and state.get("env_state") is not None:
        player.env.set_env_state(state["env_state"])


def check_checkpoint(path: Path) -> None:
    """Read the file with `weights_only=True` and check it holds an rl_games agent's state."""
    read_checkpoint(path)


def checkpoint_path(agent: Any, epoch: int) -> str:
    """rl_games' name for a periodic checkpoint of `epoch` (`nn/last_<name>_ep_<epoch>_rew_<mean return>`)."""
    rewards = agent.game_rewards.get_mean()[0] if agent.game_rewards.current_size > 0 else float("-inf")
    return os.path.join(agent.nn_dir, f"last_{agent.config['name']}_ep_{epoch}_rew_{rewards}")
