"""SKRL's checkpoints: read without running code, written atomically through the run, loaded into an agent.

Checkpoints keep SKRL's names under `<run>/checkpoints/` (`agent_<timestep>.pt` for torch,
`agent_<timestep>.pickle` for JAX, and `best_agent.*`), written through rlrun's atomic writer and
recorded in run.json; the last timestep is always saved, and a training stopped early is saved as of its
last finished iteration.

SKRL's own loader (`agent.load(path)`) unpickles with `weights_only=False` (torch) or `pickle.load` (JAX), so
rlrun never hands it a path: it reads the file once (`rlrun.trust.checkpoints`), checks those bytes and loads
the modules it checked as `agent.load` would after its own read (`load_checkpoint`). Torch checkpoints are
loaded with `torch.load(weights_only=True)`. JAX checkpoints are SKRL's pickle of one flax msgpack blob per
module, which `torch.load` cannot read: rlrun unpickles them with an unpickler that refuses every global (so no
code can run) and parses each blob with msgpack before flax restores it.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import sys
import zipfile
from pathlib import Path
from typing import Any

from rlrun.errors import CorruptCheckpoint, InvalidArgument, MissingDependency, UnsupportedTask
from rlrun.libraries.base import TrainJob
from rlrun.trust.checkpoints import load_weights, read_bytes, unreadable

CHECKPOINT_DIRECTORY = "checkpoints"
EXTENSIONS = {"torch": ".pt", "jax": ".pickle"}


class _NoGlobals(pickle.Unpickler):
    """Unpickles plain containers only: any class or function reference is refused, so no code runs."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}")


def _jax_modules(path: Path, data: bytes) -> dict[str, bytes]:
    """SKRL's JAX checkpoint, `{module name: flax msgpack bytes}`, read without running any code, each blob
    checked to parse with msgpack. The pickle is checked before msgpack is needed, so that an installation
    without JAX still refuses a file that is none."""
    modules = _NoGlobals(io.BytesIO(data)).load()
    if not isinstance(modules, dict) or not all(isinstance(blob, bytes) for blob in modules.values()):
        raise pickle.UnpicklingError("not a dictionary of serialized modules")
    try:
        import msgpack  # what flax serializes with; importing it changes no process state (flax would import jax)
    except ImportError:
        raise MissingDependency(
            f"checkpoint {str(path)!r} is a SKRL checkpoint of JAX, and reading it needs JAX's packages, which are "
            "not installed: pip install 'rlrun[jax]'."
        ) from None
    for blob in modules.values():
        msgpack.unpackb(blob, strict_map_key=False)
    return modules


def checkpoint_framework(source: Path | bytes) -> str:
    """`torch` for a torch zip archive (a file, or its bytes), else `jax` (SKRL's pickle)."""
    return "torch" if zipfile.is_zipfile(io.BytesIO(source) if isinstance(source, bytes) else source) else "jax"


def read_checkpoint(path: Path, framework: str | None = None, map_location: Any = "cpu") -> dict[str, Any]:
    """The SKRL agent checkpoint at `path`, read once: `{module name: state}`, torch states loaded with
    `weights_only=True` onto `map_location`, JAX ones as flax's msgpack bytes. `InvalidArgument` when `framework`
    is given and the file holds the other framework's agent."""
    what = "a SKRL agent checkpoint"
    data = read_bytes(path, what)
    found = checkpoint_framework(data)
    if framework is not None and found != framework:
        raise InvalidArgument(
            f"checkpoint {str(path)!r} holds a SKRL {found} agent, not a {framework} one; pass --ml_framework {found}."
        )
    if found == "torch":
        modules = load_weights(data, path, what, map_location=map_location)
    else:
        try:
            modules = _jax_modules(path, data)
        except MissingDependency:
            raise
        except Exception as error:
            raise unreadable(path, len(data), what, error) from error
    if not isinstance(modules, dict) or "policy" not in modules:
        raise CorruptCheckpoint(f"checkpoint {str(path)!r} is not a SKRL agent checkpoint (no 'policy' module).")
    return modules


def check_checkpoint(path: Path) -> None:
    """Read the file (torch: `weights_only=True`; JAX: no globals) and check it holds a SKRL agent."""
    read_checkpoint(path)


def _write_modules(framework: str, modules: dict[str, Any], path: str) -> None:
    """Write module states as SKRL's `write_checkpoint` does for a whole agent."""
    if framework == "torch":
        import torch

        torch.save(modules, path)
        return
    from flax import serialization

    with open(path, "wb") as file:
        pickle.dump({name: serialization.to_bytes(value) for name, value in modules.items()}, file, protocol=4)


def _written_once(framework: str, modules: dict[str, Any], best: dict[str, Any]) -> tuple[Any, Any]:
    """`(write best, write current)` for a best agent found at this moment, whose weights are the current agent's
    (SKRL copies them just before it writes both): the current agent's file is written once and the best's
    temporary is a hard link to it, in the same batch, so one `torch.save` and one file's fsync fewer. The file
    is the current one's bytes (torch names its archive after the file: `agent_<timestep>/`, which `torch.load`
    does not read). Where the folder takes no hard link, the best agent is written as SKRL writes it.
    The best's write only records its temporary path, so it must come first in the batch, as `__call__` puts it
    (a batch writes its files in the order given)."""
    best_paths: list[str] = []

    def write_current(path: str) -> None:
        _write_modules(framework, modules, path)
        for best_path in best_paths:
            try:
                os.link(path, best_path)
            except OSError:  # a file system without hard links
                _write_modules(framework, best, best_path)

    return best_paths.append, write_current


class CheckpointWriter:
    """SKRL's `agent.write_checkpoint`, writing through `job.save_checkpoints` (atomic, recorded in run.json).

    `best_agent` and `agent_<timestep>`, saved at the same moment, are one batch (one run.json lists both),
    `best_agent` first, so that the newest checkpoint in run.json is the newest state. A best agent found at
    this moment holds the current agent's weights: its file is a hard link to the current one's
    (`_written_once`). SKRL's trainer counts timesteps from 0 in every run; a resumed run's names and
    iterations continue the parent's. A training stopped early is saved by `at_stop` as of the last timestep
    whose update ran.
    """

    def __init__(self, agent: Any, job: TrainJob, per_iteration: int) -> None:
        self.agent, self.job, self.per_iteration = agent, job, per_iteration
        self.first_timestep = job.resume_iteration * per_iteration
        self.extension = EXTENSIONS[job.ml_framework]
        self.saved: list[Path] = []
        self.last_timestep: int | None = None
        self.finished = 0
        """Timesteps of this run whose `post_interaction` ran (see `count_timesteps`)."""
        (job.run_dir / CHECKPOINT_DIRECTORY).mkdir(exist_ok=True)  # SKRL makes it only for periodic checkpoints

    def __call__(self, *, timestep: int, timesteps: int) -> None:
        agent = self.agent
        framework = self.job.ml_framework
        best = agent.checkpoint_best_modules
        current = {name: agent._get_internal_value(module) for name, module in agent.checkpoint_modules.items()}
        write_current = functools.partial(_write_modules, framework, current)
        checkpoints = []
        if best["modules"] and not best["saved"]:
            modules = {name: best["modules"][name] for name in agent.checkpoint_modules}
            if best["timestep"] == timestep:  # found now: SKRL copied the current weights just before this call
                write_best, write_current = _written_once(framework, current, modules)
            else:
                write_best = functools.partial(_write_modules, framework, modules)
            checkpoints.append(self.checkpoint("best_agent", write_best, best["timestep"]))
        checkpoints.append(self.checkpoint("agent_{}", write_current, timestep))
        save_checkpoints = self.job.save_checkpoints
        assert save_checkpoints is not None  # `TrainJob.__post_init__` fills it in
        self.saved.extend(save_checkpoints(checkpoints))  # one batch: one run.json lists both
        if len(checkpoints) > 1:
            best["saved"] = True
        self.last_timestep = timestep

    def checkpoint(self, name: str, write: Any, timestep: int) -> tuple[str, Any, int]:
        """`(file name, write, iteration)` for `job.save_checkpoints`: `name` with `{}` the timestep counted over
        resumed runs; `timestep` is this run's."""
        timestep += self.first_timestep
        file_name = f"{CHECKPOINT_DIRECTORY}/{name.format(timestep)}{self.extension}"
        return file_name, write, timestep // self.per_iteration

    def count_timesteps(self) -> None:
        """Count the timesteps whose `post_interaction` (where SKRL's agents update) ran, in `self.finished`."""
        agent, post_interaction = self.agent, self.agent.post_interaction

        def counted_post_interaction(*, timestep: int, timesteps: int) -> None:
            post_interaction(timestep=timestep, timesteps=timesteps)
            self.finished = timestep + 1

        agent.post_interaction = counted_post_interaction

    def at_stop(self, stop: BaseException, timesteps: int) -> None:
        """Save the agent as it is when the training stops early, named as of the last iteration whose update
        ran (an iteration is `per_iteration` timesteps); a fresh agent that has not finished one is not saved."""
        timestep = self.finished // self.per_iteration * self.per_iteration
        if self.first_timestep + timestep > 0:
            try:
                self(timestep=timestep, timesteps=timesteps)
            except BaseException as failure:  # a failed write or a second Ctrl-C: the stop goes on
                stop.add_note(f"rlrun: the checkpoint at the stop was not saved: {failure!r}")


def load_checkpoint(agent: Any, path: Path, modules: dict[str, Any]) -> None:
    """Load `modules`, the checkpoint rlrun read from `path` and checked (`read_checkpoint`), into the agent as
    SKRL's `agent.load` does after its own read; a checkpoint of another task (other observation or action
    sizes) is refused in one line. Torch refuses such weights itself; flax takes them silently, so the JAX
    parameters' shapes are compared before and after."""
    before = _parameter_shapes(agent)
    try:
        _load_modules(agent, modules)
    except (RuntimeError, ValueError, KeyError) as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()] or [type(error).__name__]
        detail = next((line for line in lines[1:] if "mismatch" in line or "key(s)" in line), "")
        raise UnsupportedTask(
            f"checkpoint {str(path)!r} does not fit this task ({' '.join([lines[0], detail]).strip()[:300]}); "
            "pass the --task it was trained on, or another checkpoint."
        ) from None
    for name, shapes in _parameter_shapes(agent).items():
        if shapes != before.get(name, shapes):
            raise UnsupportedTask(
                f"checkpoint {str(path)!r} does not fit this task (its {name!r} parameters have other shapes); "
                "pass the --task it was trained on, or another checkpoint."
            )


def _load_modules(agent: Any, modules: dict[str, Any]) -> None:
    """SKRL's `agent.load(path)` after its read of the file: each module the agent checkpoints takes its state
    (torch: `load_state_dict`, then evaluation mode; JAX: flax's `from_bytes` into its parameters)."""
    from skrl import logger

    for name, data in modules.items():
        module = agent.checkpoint_modules.get(name)
        if module is None:
            logger.warning(f"Skipping module '{name}'. The agent doesn't have such an instance")
        elif isinstance(data, bytes):  # JAX
            if hasattr(module, "state_dict"):
                from flax import serialization

                params = serialization.from_bytes(module.state_dict.params, data)
                module.state_dict = module.state_dict.replace(params=params)
        elif hasattr(module, "load_state_dict"):
            module.load_state_dict(data)
            if hasattr(module, "eval"):
                module.eval()
        else:
            raise NotImplementedError(f"SKRL cannot load its {name!r} module from a checkpoint")


def _parameter_shapes(agent: Any) -> dict[str, Any]:
    """The shapes of the JAX agent's module parameters, by module name (empty for torch agents)."""
    jax = sys.modules.get("jax")
    shapes = {}
    for name, module in getattr(agent, "checkpoint_modules", {}).items():
        params = getattr(getattr(module, "state_dict", None), "params", None)
        if jax is not None and params is not None:
            shapes[name] = jax.tree_util.tree_map(lambda leaf: tuple(getattr(leaf, "shape", ())), params)
    return shapes
