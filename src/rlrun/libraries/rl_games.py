"""rl_games (`rl-games` 1.6.x): its `Runner` and PPO agents (`a2c_discrete`, `a2c_continuous`) on rlrun's envs.

rl_games changes more process state than any other library, and every change is either an import
effect (torch print options, `torch._dynamo` limits, two Gymnasium envs: `IMPORTS`) or undone by the
hermetic scope (TF32 and matmul precision, `cudnn.benchmark`, thread count, global RNGs). What the
adapter does on top:
- `algo.name` and `model.name` `auto` (rlrun's configurations) become the discrete or continuous
  agent and model for the task's action space, and only the matching `network.space` entry is kept;
- the env goes in through `config.vec_env` and `config.env_info` (an `IVecEnv` over rlrun's torch
  vector env), never through rl_games' global registries, which are guarded all the same;
- `torch_compile: false` and `torch_threads: 0` come with rlrun's configurations; `train_dir` is the
  run directory's parent and the run directory the experiment, so rl_games writes its `nn/` and
  `summaries/` inside the run (never `runs/` or `nn/` in the working directory);
- `--max_iterations` is rl_games' `max_epochs` (Isaac Lab's mapping), counted on from a resumed epoch;
- every seed is applied, 0 included (rl_games skips seeding when the seed is 0);
- the tensorboardX writer rl_games never closes is closed in `finally`;
- rl_games' checkpoint saves go through rlrun's atomic writer, in rl_games' own format and names
  (`nn/last_<name>_ep_<epoch>_rew_<return>.pth`, and `nn/<name>.pth` for its best so far); a training
  stopped early is saved under the first name as of its last finished epoch;
- a checkpoint is read once, as data, and its checked state restored into the agent or player: rl_games'
  own `restore(path)` is never given a path.

The parts: rl_games' `params` and their checks (`rlrun.libraries.rl_games_config`), the env
(`rl_games_env`), reading checkpoints safely (`rl_games_checkpoints`) and the exported policy module
(`rl_games_export`).
"""

from __future__ import annotations

import dataclasses
import operator
import os
import sys
from pathlib import Path
from typing import Any

from rlrun.errors import InvalidArgument
from rlrun.hermetic import Guard, module_loaded, register, torch_backend_flags
from rlrun.libraries.base import PlayJob, Policy, TrainJob, TrainOutcome
from rlrun.libraries.rl_games_checkpoints import check_checkpoint as check_checkpoint  # the adapter's member
from rlrun.libraries.rl_games_checkpoints import checkpoint_path, read_checkpoint, restore_agent, restore_player
from rlrun.libraries.rl_games_config import CODE_NAMES as CODE_NAMES  # the adapter's trust table
from rlrun.libraries.rl_games_config import env_steps_per_iteration as env_steps_per_iteration  # the adapter's member
from rlrun.libraries.rl_games_config import runner_params
from rlrun.libraries.rl_games_env import RlGamesVecEnv
from rlrun.libraries.rl_games_export import export_class

IMPORTS = {"torch": ("rl_games", "rl_games.torch_runner")}
ALGORITHMS = {"ppo": ("Box", "Discrete")}
DEFAULT_ALGORITHM = "ppo"
MINIBATCH_KEYS = {"ppo": "params.config.minibatch_size"}
"""PPO's minibatch size, fitted to `--num_envs` unless the user set it (`rlrun.api.fitting`)."""
LOGGERS: tuple[str, ...] = ()

# --- rl_games' global registries ----------------------------------------------------------------------------

_REGISTRIES = (
    ("rl_games.common.vecenv", "vecenv_config"),
    ("rl_games.common.env_configurations", "configurations"),
    ("rl_games.algos_torch.model_builder", "NETWORK_REGISTRY"),
    ("rl_games.algos_torch.model_builder", "MODEL_REGISTRY"),
)


def _capture_registries() -> dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]]:
    """Each registry: the dict object itself and a copy of its entries."""
    captured = {}
    for module, name in _REGISTRIES:
        registry = getattr(sys.modules[module], name)
        captured[module, name] = registry, dict(registry)
    return captured


def _restore_registries(saved: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]]) -> None:
    for (module, name), (registry, contents) in saved.items():
        if getattr(sys.modules[module], name) is not registry:
            setattr(sys.modules[module], name, registry)
        if registry.keys() != contents.keys() or not all(map(operator.is_, registry.values(), contents.values())):
            registry.clear()
            registry.update(contents)


register(
    Guard(
        "rl_games registries",
        "rl_games' env registries (`vecenv.vecenv_config`, `env_configurations.configurations`) and "
        "network and model registries (`model_builder`): entries added, replaced or removed are put back.",
        _capture_registries,
        _restore_registries,
        fingerprint=lambda saved: {
            f"{module}.{name}": (id(registry), {key: id(value) for key, value in contents.items()})
            for (module, name), (registry, contents) in saved.items()
        },
        category="rl_games",
        available=module_loaded(*dict.fromkeys(module for module, _ in _REGISTRIES)),
        owner="rl_games",
    )
)

# --- training -----------------------------------------------------------------------------------------------


def _seed_globals(seed: int) -> None:
    """Seed what rl_games' `Runner.load_config` seeds, which it skips for seed 0 (`if self.seed:`)."""
    import random

    import numpy
    import torch

    torch.manual_seed(seed)
    numpy.random.seed(seed)
    random.seed(seed)


CHECKED_STATE = "<the checkpoint state rlrun read and checked>"
"""What rlrun passes as rl_games' `checkpoint` argument when resuming: not a path. The agent's `restore`, which
`AgentObserver` replaces, restores the checked state instead of reading a file."""


class AgentObserver:
    """rl_games' `DefaultAlgoObserver` that also keeps the agent and routes its checkpoint saves and restores.

    rl_games hands the agent to its observer only (`after_init`); rlrun needs it to close its writer, to send
    `agent.save(path)` through `save(agent, path)` and to make `agent.restore` restore `state` (the checkpoint
    rlrun read and checked) whatever it is passed. `epochs` is the last epoch whose `train_epoch` (rollout and
    update) ran in this call, None before the first: rl_games counts an epoch when it starts it, and a training
    stopped in the middle of one is saved at the one before.
    """

    def __init__(self, save: Any, state: dict[str, Any] | None = None) -> None:
        from rl_games.common.algo_observer import DefaultAlgoObserver

        self.inner = DefaultAlgoObserver()
        self.agent: Any = None
        self.epochs: int | None = None
        self._save = save
        self._state = state

    def after_init(self, agent: Any) -> None:
        self.agent = agent
        agent.save = lambda path: self._save(agent, path)
        state = self._state
        if state is not None:
            agent.restore = lambda _checkpoint, set_epoch=True: restore_agent(agent, state, set_epoch)
        train_epoch = agent.train_epoch

        def counted_train_epoch() -> Any:
            result = train_epoch()
            self.epochs = agent.epoch_num
            return result

        agent.train_epoch = counted_train_epoch
        self.inner.after_init(agent)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy and pickle probe dunders before `inner` exists
            raise AttributeError(name)
        return getattr(self.inner, name)


def train(job: TrainJob) -> TrainOutcome:
    """Run rl_games' `Runner` for `job.max_iterations` epochs, checkpointing atomically into the run."""
    import torch
    from rl_games.torch_runner import Runner

    saved: list[Path] = []

    def save(agent: Any, path: str, epoch: int | None = None) -> None:
        state = agent.get_full_state_weights()
        if epoch is not None:  # stopped in the middle of an epoch: the state is the last finished one's
            state["epoch"] = epoch
        name = os.path.relpath(f"{path}.pth", job.run_dir)
        saved.append(job.save_checkpoint(name, lambda temporary: torch.save(state, temporary), state["epoch"]))

    state = read_checkpoint(job.resume_from, map_location=job.device) if job.resume_from is not None else None
    observer = AgentObserver(save, state)
    runner = Runner(algo_observer=observer)  # sets TF32, matmul precision 'high' and cudnn.benchmark itself
    # rl_games' policy (TF32 on, cuDNN autotuning on), stated after its Runner sets it; off for determinism.
    torch_backend_flags(
        matmul_allow_tf32=not job.deterministic,
        cudnn_allow_tf32=not job.deterministic,
        deterministic=job.deterministic,
        benchmark=not job.deterministic,
    )
    params = runner_params(job.config, RlGamesVecEnv(job.env, job.seed), job.env.num_envs, job.device)
    start = int(state["epoch"]) if state is not None else 0
    params["seed"] = job.seed
    params["config"].update(
        train_dir=str(job.run_dir.parent), full_experiment_name=job.run_dir.name, max_epochs=start + job.max_iterations
    )
    try:
        runner.load_config(params)
        _seed_globals(job.seed)
        try:
            runner.run_train({"train": True, "play": False, "checkpoint": None if state is None else CHECKED_STATE})
        except KeyboardInterrupt as stop:  # Ctrl-C, SIGTERM or a stop request: keep what the agent has learned
            agent = observer.agent
            epoch = observer.epochs if observer.epochs is not None else start
            if agent is not None and 0 < epoch <= agent.epoch_num:  # trained, or restored from `start`
                try:
                    save(agent, checkpoint_path(agent, epoch), epoch)
                except BaseException as failure:  # a failed write or a second Ctrl-C: the stop goes on
                    stop.add_note(f"rlrun: the checkpoint at the stop was not saved: {failure!r}")
            raise
    finally:
        writer = getattr(observer.agent, "writer", None)
        if writer is not None:
            writer.close()  # rl_games never closes it: a thread, a queue and open files per call
    return TrainOutcome(iterations=observer.agent.epoch_num, checkpoint=saved[-1] if saved else None)


# --- playing ------------------------------------------------------------------------------------------------


def load_policy(job: PlayJob) -> Policy:
    """Rebuild the agent's network with rl_games' own player, load the checkpoint, return its actions."""
    shape = job.env.single_action_space.shape or ()  # a Box's, or a Discrete's `()`: never None here
    return PlayerPolicy(_player(job), job.env.num_envs, shape, job.deterministic)


class PlayerPolicy:
    """rl_games' player as rlrun's `Policy`. A recurrent network (`network.rnn`) keeps one state per env,
    which starts at zero and goes back to zero for the envs whose episode ended (`episodes_ended`, called by
    the rollout after each step), as rl_games' own `player.run` does."""

    def __init__(self, player: Any, num_envs: int, action_shape: tuple[int, ...], deterministic: bool) -> None:
        self.player = player
        self.action_shape = action_shape
        self.deterministic = deterministic
        player.batch_size = num_envs
        player.init_rnn()  # zero states of [layers, num_envs, units] for a recurrent network, else nothing

    def __call__(self, observations: Any) -> Any:
        actions = self.player.get_action(observations, is_deterministic=self.deterministic)
        return actions.reshape(observations.shape[0], *self.action_shape)

    def episodes_ended(self, done: Any) -> None:
        """Zero the recurrent states of the envs where `done` (a bool tensor of `[num_envs]`) is set."""
        if self.player.is_rnn and self.player.states is not None:
            mask = done.to(self.player.device).reshape(1, -1, 1)
            self.player.states = [state.masked_fill(mask, 0.0) for state in self.player.states]


def _player(job: PlayJob) -> Any:
    """rl_games' own player for the agent, with the checkpoint's checked state restored."""
    from rl_games.algos_torch import players

    vec_env = RlGamesVecEnv(job.env, None)
    params = runner_params(job.config, vec_env, job.env.num_envs, job.device)
    player_class = {"a2c_discrete": players.PpoPlayerDiscrete, "a2c_continuous": players.PpoPlayerContinuous}
    player = player_class[params["algo"]["name"]](params)
    restore_player(player, read_checkpoint(job.checkpoint, map_location=job.device))
    player.has_batch_dimension = True
    return player


# --- export -------------------------------------------------------------------------------------------------


def export_policy(job: PlayJob) -> Any:
    """The player's deterministic action on the CPU: input normalisation, network, mean action clipped to
    [-1, 1] and rescaled to the action space (rl_games' `clip_actions`), or the most likely discrete action."""
    player = _player(dataclasses.replace(job, device="cpu"))
    if player.is_rnn:
        raise InvalidArgument(
            "rlrun cannot export recurrent rl_games policies yet; drop agent.params.network.rnn to export."
        )
    return export_class()(player)
