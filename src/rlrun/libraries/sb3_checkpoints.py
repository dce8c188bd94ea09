"""Stable-Baselines3's checkpoints: SB3's own model zip, read as data and loaded into a model rlrun builds.

A checkpoint is SB3's `.zip` (`model_<iterations>.zip`), written with SB3's `save` through rlrun's atomic
writer. SB3's `load` would unpickle (cloudpickle) the hyperparameters, spaces, policy class and schedules kept in
the zip's `data` entry, which can run any code, so rlrun never calls it. It reads the file once (`read_model`):
the zip's entries from those bytes, `data` as JSON text whose cloudpickled values (`:serialized:`) stay
undecoded, every tensor entry (`*.pth`) with `torch.load(weights_only=True)`. The model is built from rlrun's
agent configuration (the run's checked `params/agent.yaml` when there is one) and the task's env with SB3's
constructor, and the checked tensors are loaded into it (`build_model`): weights and optimiser states with
`set_parameters`, SB3's extra torch variables (SAC's entropy coefficient) by assignment. Of `data`, only plain
values are read, each checked: the policy class's module and the hyperparameter keys that tell the algorithm,
the spaces' shapes and the step and update counters. The callback that saves checkpoints during `learn` counts
iterations (rollouts). SB3 and torch are imported inside the functions.
"""

from __future__ import annotations

import functools
import io
import json
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.errors import CorruptCheckpoint, InvalidArgument, UnsupportedTask, UserError
from rlrun.libraries.sb3_config import CLASS_NAMES, algorithm_class, constructor_kwargs
from rlrun.trust.checkpoints import MAX_CHECKPOINT_BYTES, load_weights, read_bytes, unreadable

WHAT = "a Stable-Baselines3 model"
CHECKPOINT_ENTRIES = ("data", "policy.pth", "_stable_baselines3_version")
POLICY_MODULES = {
    "stable_baselines3.common.policies": "ppo",  # or A2C: the saved hyperparameters tell them apart
    "stable_baselines3.sac.policies": "sac",
    "stable_baselines3.td3.policies": "td3",
}
"""The module of a saved model's policy class -> the algorithm that uses it."""
COUNTERS = ("num_timesteps", "_n_updates", "_episode_num")
"""The model's counters that `data` holds as plain numbers and a resumed training continues."""
MAX_ENTRIES = 64
"""The most entries an SB3 zip may have (SB3 writes at most eight)."""
MAX_DATA_BYTES = 64 << 20
"""The largest `data` entry read (64 MiB): SB3 writes a few kilobytes, more with the last observations pickled."""


@dataclass(frozen=True)
class SavedModel:
    """An SB3 model zip as rlrun read it: nothing in it was unpickled but tensors and containers."""

    path: Path
    algorithm: str
    """The algorithm that saved it (`ppo`, `a2c`, `sac`, `td3`)."""
    data: dict[str, Any]
    """The `data` entry parsed as JSON: plain values, and the cloudpickled ones as undecoded text."""
    tensors: dict[str, Any]
    """Each `<name>.pth` entry by `<name>` (`policy`, `policy.optimizer`, `pytorch_variables`), loaded on the CPU
    with `torch.load(weights_only=True)`."""


def check_checkpoint(path: Path) -> None:
    """Check that the file is an SB3 model zip of a known algorithm, reading it without unpickling anything."""
    read_model(path)


def saved_algorithm(path: Path) -> str:
    """The algorithm (`ppo`, `a2c`, `sac`, `td3`) that saved the SB3 model at `path`; `CorruptCheckpoint` if none."""
    return read_model(path).algorithm


def read_model(path: Path) -> SavedModel:
    """The SB3 model zip at `path`, read once (see the module docstring); `CorruptCheckpoint` for a file that is
    not one, or holds anything but tensors and containers in a tensor entry."""
    raw = read_bytes(path, WHAT)
    try:
        data, tensors = _entries(path, raw)
    except UserError:
        raise
    except Exception as error:  # a damaged zip or JSON text: anything from `BadZipFile` to `RecursionError`
        raise unreadable(path, len(raw), WHAT, error) from error
    policy_class = data.get("policy_class")
    module = policy_class.get("__module__") if isinstance(policy_class, dict) else None
    if not isinstance(module, str) or module not in POLICY_MODULES:
        raise CorruptCheckpoint(
            f"checkpoint {str(path)!r} is not a Stable-Baselines3 model of {', '.join(CLASS_NAMES.values())} "
            f"(policy class from {str(module)[:80]!r})."
        )
    algorithm = POLICY_MODULES[module]
    if algorithm == "ppo" and "clip_range" not in data:
        algorithm = "a2c"
    return SavedModel(path, algorithm, data, tensors)


def _entries(path: Path, raw: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The zip's `data` entry as JSON (its cloudpickled values stay undecoded text) and its tensor entries."""
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        entries = archive.infolist()
        names = [entry.filename for entry in entries]
        missing = [name for name in CHECKPOINT_ENTRIES if name not in names]
        if missing:
            raise CorruptCheckpoint(f"checkpoint {str(path)!r} is not {WHAT} (missing {', '.join(missing)}).")
        if (
            len(entries) > MAX_ENTRIES
            or sum(entry.file_size for entry in entries) > MAX_CHECKPOINT_BYTES
            or archive.getinfo("data").file_size > MAX_DATA_BYTES
        ):
            raise CorruptCheckpoint(
                f"checkpoint {str(path)!r} is not {WHAT} (more than {MAX_ENTRIES} entries, larger than "
                f"{MAX_CHECKPOINT_BYTES >> 30} GiB unpacked, or a data entry over {MAX_DATA_BYTES >> 20} MiB)."
            )
        data = json.loads(archive.read("data").decode("utf-8"))
        if not isinstance(data, dict):
            raise CorruptCheckpoint(f"checkpoint {str(path)!r} is not {WHAT} (its data entry is not a mapping).")
        tensors = {
            name.removesuffix(".pth"): load_weights(archive.read(name), path, f"{WHAT}'s {name}")
            for name in names
            if name.endswith(".pth")
        }
    return data, tensors


def check_saved_algorithm(saved: SavedModel, algorithm: str) -> None:
    """Raise `InvalidArgument` when the model was saved by another algorithm than `algorithm`."""
    if saved.algorithm != algorithm:
        raise InvalidArgument(
            f"checkpoint {str(saved.path)!r} holds an SB3 {CLASS_NAMES[saved.algorithm]} model, not "
            f"{CLASS_NAMES[algorithm]}; pass --algorithm {saved.algorithm}."
        )


def build_model(
    path: Path, config: dict[str, Any], algorithm: str, vec_env: Any, *, device: str, seed: int | None, play: bool
) -> Any:
    """The algorithm built from the agent configuration on `vec_env` with SB3's constructor, with the weights,
    optimiser states and counters of the model zip at `path` loaded into it. `play`: for acting only, so SB3's
    notes about the configuration's fit to this env (mini-batch sizes) and its device line stay unsaid."""
    saved = read_model(path)
    check_saved_algorithm(saved, algorithm)
    _check_spaces(saved, vec_env)
    kwargs = constructor_kwargs(config, algorithm, vec_env.action_space)
    policy = config.get("policy", "MlpPolicy")
    if play:
        kwargs["verbose"] = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = algorithm_class(algorithm)(policy, vec_env, seed=seed, device=device, **kwargs)
    else:
        model = algorithm_class(algorithm)(policy, vec_env, seed=seed, device=device, **kwargs)
    _restore(model, saved)
    return model


def _restore(model: Any, saved: SavedModel) -> None:
    """What SB3's `load` puts back after it built the model, from the checked entries: state dicts, the extra
    torch variables SB3 names for the algorithm (never names from the file) and the plain counters."""
    import torch
    from stable_baselines3.common.save_util import recursive_getattr

    state_dicts, variables = model._get_torch_save_params()
    missing = [f"{name}.pth" for name in state_dicts if name not in saved.tensors]
    stored = saved.tensors.get("pytorch_variables", {})
    if missing or not isinstance(stored, dict):
        what = f"an SB3 {CLASS_NAMES[saved.algorithm]} model"
        raise CorruptCheckpoint(
            f"checkpoint {str(saved.path)!r} is not {what} (missing {', '.join(missing) or 'pytorch_variables'})."
        )
    try:
        model.set_parameters({name: saved.tensors[name] for name in state_dicts}, exact_match=True)
        for name in variables:
            value, target = stored.get(name), recursive_getattr(model, name)
            if value is None:
                continue
            if not isinstance(value, torch.Tensor) or not isinstance(target, torch.Tensor):
                raise ValueError(f"{name} is not a tensor")
            if value.shape != target.shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, the model's {tuple(target.shape)}")
            target.data = value.data.to(target.device)
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as error:
        raise _misfit(saved.path, " ".join(str(error).split())[:300]) from None
    for name in COUNTERS:
        if name in saved.data:
            setattr(model, name, _count(saved, name))
    if model.use_sde:
        model.policy.reset_noise()


def _check_spaces(saved: SavedModel, vec_env: Any) -> None:
    """Refuse a model whose saved spaces' kinds or shapes (plain values in `data`) differ from the env's."""
    for key, space in (("observation_space", vec_env.observation_space), ("action_space", vec_env.action_space)):
        entry = saved.data.get(key)
        if not isinstance(entry, dict):
            continue
        kind, shape = entry.get(":type:"), entry.get("_shape")
        if isinstance(kind, str) and not kind.endswith(f".{type(space).__name__}'>"):
            raise _misfit(saved.path, f"its {key} is {kind[:80]!r}, this task's a {type(space).__name__}")
        if isinstance(shape, list) and all(type(size) is int for size in shape) and tuple(shape) != space.shape:
            raise _misfit(saved.path, f"its {key} has shape {tuple(shape)}, this task's {space.shape}")


def _count(saved: SavedModel, name: str) -> int:
    value = saved.data[name]
    if type(value) is not int or not 0 <= value <= 1 << 62:
        raise CorruptCheckpoint(f"checkpoint {str(saved.path)!r} is not {WHAT} ({name} {str(value)[:40]!r}).")
    return value


def _misfit(path: Path, reason: str) -> UnsupportedTask:
    return UnsupportedTask(
        f"checkpoint {str(path)!r} does not fit this task or agent configuration ({reason}); pass the --task and "
        "agent settings it was trained with (agent.policy_kwargs, agent.use_sde), or another checkpoint."
    )


def writer(model: Any) -> Any:
    """A writer for `job.save_checkpoint`: SB3's `save` into the open temporary file (no suffix is appended)."""

    def write(temporary: str) -> None:
        with open(temporary, "wb") as file:
            model.save(file)

    return write


class CheckpointCallbackMixin:
    """Counts iterations (one per rollout, on from `first`: a resumed run's parent's count) and saves every
    `save_interval` of them once their update is done."""

    def __init__(self, save: Any, save_interval: int, first: int = 0) -> None:
        super().__init__()
        self.save = save
        self.save_interval = save_interval
        self.iterations = self.first = first

    def _on_rollout_start(self) -> None:
        # The previous iteration's update has run: that is the model a checkpoint of it must hold.
        if self.iterations > self.first and self.iterations % self.save_interval == 0:
            self.save(self.iterations)

    def _on_rollout_end(self) -> None:
        self.iterations += 1

    def _on_step(self) -> bool:
        return True


@functools.cache
def callback_class() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    return type("Sb3Checkpoints", (CheckpointCallbackMixin, BaseCallback), {"__module__": __name__})
