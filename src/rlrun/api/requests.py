"""Requests and results: frozen dataclasses whose field docstrings are the command line's help.

A request says what to do; `None` means the tuned default of the task (and library). The command
line (`rlrun.cli`) is generated from these classes: every field is a flag of the same name, with
its default and its docstring as help, except where a field's `metadata` says otherwise:

- `aliases`: more flag names (Isaac Lab's `--rl_library`, `--experiment_name`);
- `flag` and `negate`: a differently named flag that stores the opposite (`--stochastic` for
  `deterministic=True`);
- `cli=False`: not a flag (`overrides` are the trailing `key=value` words; `argv` is set by the CLI);
- `choices`: the valid values, checked by the CLI and by planning alike.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rlrun.errors import UnknownField, did_you_mean

RequestType = TypeVar("RequestType", bound=type[Any])

VECTORIZATION_MODES = ("sync", "async", "envpool", "auto")
EXPORT_FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.pt"}
"""Export format -> the file it writes in `<run_dir>/exported/`."""


def checked_fields(cls: RequestType) -> RequestType:
    """Make building a request with a field it lacks, or without a required one, a `UnknownField` user error
    naming the nearest field, instead of the dataclass's bare `TypeError`. (Also used for the bench's
    request types.)"""
    init = cls.__init__
    fields = dataclasses.fields(cls)
    names = [item.name for item in fields]
    required = [item.name for item in fields if item.default is dataclasses.MISSING]

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        unknown = [key for key in kwargs if key not in names]
        if unknown:
            raise UnknownField(
                f"{cls.__name__} has no field {unknown[0]!r}.{did_you_mean(unknown[0], names, listing=0)} "
                f"Its fields: {', '.join(names)}."
            )
        missing = [name for name in required[len(args) :] if name not in kwargs]
        if missing:
            raise UnknownField(f"{cls.__name__} needs {missing[0]}: {cls.__name__}({missing[0]}=..., ...).")
        init(self, *args, **kwargs)

    cls.__init__ = checked_init
    return cls


@checked_fields
@dataclass(frozen=True)
class TaskRequest:
    """What every call that runs a task is told. `None` means the tuned default of the task (and library)."""

    task: str
    """A Gymnasium id: rlrun's native tasks (`rlrun/CartPole-v1`, ...) or any registered id (rlrun list)."""
    num_envs: int | None = None
    """Parallel environments; None: the configuration's."""
    seed: int | None = None
    """Seeds this call's RNGs and environments; -1 draws one from the OS (recorded in run.json)."""
    device: str | None = None
    """`cpu`, `cuda` or `cuda:N`; None: `cuda` when available, else `cpu`."""
    overrides: tuple[str, ...] = field(default=(), metadata={"cli": False})
    """`agent.<key>=<value>` and `env.<key>=<value>` words (OmegaConf dotlists)."""
    log_root: str = "logs"
    """Root of the run directories."""
    vectorization: str = field(default="sync", metadata={"choices": VECTORIZATION_MODES})
    """How a Gymnasium (non-native) task runs its sub-envs: `sync` (one process), `async` (one process each),
    `envpool` (EnvPool's C++ threads; Gymnasium MuJoCo ids such as HalfCheetah-v5, Hopper-v5) or `auto` (EnvPool
    where it runs the task, else sync; run.json records which)."""
    video: bool = False
    """Record mp4 clips of the first environment (see each command for where and when)."""
    video_length: int = 200
    """Steps per clip."""
    threads: int | None = None
    """torch intra-op threads inside the call; None: rlrun picks from the device, the batch and the cores it
    may use (one on a CPU with 2 cores or a small batch, where more threads thrash when the cores are shared)."""
    argv: tuple[str, ...] | None = field(default=None, metadata={"cli": False})
    """The command line that made this request (set by the CLI; recorded in run.json)."""


@checked_fields
@dataclass(frozen=True)
class LibraryRequest(TaskRequest):
    """What every call that drives an RL library is told, besides the task."""

    library: str | None = field(default=None, metadata={"aliases": ("--rl_library",)})
    """`rsl_rl`, `skrl`, `sb3`, `rl_games`, `torchrl` (rlrun list); None: the task's default library."""
    algorithm: str | None = None
    """The library's algorithm (`ppo`, `sac`, ...); None: the library's default, or the checkpoint's."""
    ml_framework: str | None = None
    """`torch` or `jax` for libraries that run on both (SKRL); None: torch, or the checkpoint's."""
    checkpoint: str | None = None
    """`latest`, `best`, a path, or a checkpoint file name inside `load_run`."""
    load_run: str | None = None
    """The run directory name (or a regex) to take the checkpoint from."""
    experiment: str | None = field(default=None, metadata={"aliases": ("--experiment_name",)})
    """Folder under `<log_root>/<library>/`; None: the task id made path-safe."""
    verbose: bool = False
    """Pass the library's own console output through instead of writing it to `console.log`."""


@checked_fields
@dataclass(frozen=True)
class TrainRequest(LibraryRequest):
    """What to train. `checkpoint` and `load_run` apply with `resume` only."""

    max_iterations: int | None = None
    """Library iterations (RSL-RL: rollouts of `num_steps_per_env` steps per env, then an update)."""
    resume: bool = False
    """Continue from `checkpoint` (default `latest`): weights, optimiser, normaliser, counters."""
    agent_config: str | None = None
    """A YAML agent configuration in the library's own layout (as a run's `params/agent.yaml`); it replaces the
    shipped one, and `agent.` overrides apply on top. None: rlrun's tuned configuration (for sb3, RL Zoo's)."""
    run_name: str | None = None
    """Suffix of the run directory name."""
    video_interval: int = 2000
    """With `video`: vector steps between the starts of two clips, saved in `<run_dir>/videos/train/`."""
    deterministic: bool = False
    """Ask torch for deterministic algorithms (slower; CUDA needs it to be reproducible)."""


@checked_fields
@dataclass(frozen=True)
class PlayRequest(LibraryRequest):
    """What to evaluate: a trained checkpoint, run for `num_episodes` episodes (video: the first steps)."""

    checkpoint: str | None = "latest"
    """`latest`, `best` (the highest training return), a path, or a checkpoint file name inside `load_run`."""
    num_episodes: int = 10
    """Episodes to play."""
    max_steps: int | None = None
    """Stop after this many vector steps even if fewer episodes finished (None: 100 episode lengths)."""
    deterministic: bool = field(default=True, metadata={"flag": "--stochastic", "negate": True})
    """Act with the policy's mean action; False (`--stochastic`) samples from the policy's distribution."""


@checked_fields
@dataclass(frozen=True)
class ExportRequest(LibraryRequest):
    """What to export: a trained checkpoint's deterministic policy, observation normalisation included."""

    checkpoint: str | None = "latest"
    """`latest`, `best` (the highest training return), a path, or a checkpoint file name inside `load_run`."""
    num_envs: int | None = 8
    """Parallel environments of the validation rollout."""
    device: str | None = "cpu"
    """Where the policy is rebuilt: `cpu`, `cuda` or `cuda:N`."""
    format: str = field(default="both", metadata={"choices": (*EXPORT_FORMATS, "both")})
    """`onnx`, `torchscript` or `both`."""
    validation_steps: int = 16
    """Steps of the task whose observations check each exported file against the live policy."""


@checked_fields
@dataclass(frozen=True)
class AgentRequest(TaskRequest):
    """Run a task with zero or random actions, no library involved: a smoke test of the task itself."""

    num_envs: int | None = 4
    """Parallel environments."""
    num_episodes: int | None = None
    """Episodes to run; None: 10, unless `max_steps` is given."""
    max_steps: int | None = None
    """Vector steps to run at most; None: until `num_episodes` episodes finished (at most 100 episode lengths)."""


@dataclass(frozen=True)
class TrainResult:
    """What a training call produced."""

    task: str
    library: str
    run_dir: Path
    checkpoint: Path | None
    """The last checkpoint written."""
    seed: int
    num_envs: int
    iterations: int
    env_steps: int
    episodes: int
    mean_return: float | None
    """Mean return of the last 100 finished training episodes."""
    steps_per_s: float
    wall_time_s: float
    videos: tuple[Path, ...] = ()
    status: str = "completed"
    """`completed`, or `stopped` when `on_iteration` asked the training to stop early (a pruned trial)."""
    agent_config: dict[str, Any] = field(default_factory=dict)
    """Where the agent configuration came from: run.json's `agent_config` (`from`, `path`, the overrides, what was
    fitted to `num_envs`, the params files' SHA-256)."""


@dataclass(frozen=True)
class ExportResult:
    """The exported files and how closely they reproduce the live policy."""

    task: str
    library: str
    checkpoint: Path
    files: tuple[Path, ...]
    max_abs_error: dict[str, float]
    """Per file name: the largest difference from the live policy's actions on the validation observations."""


@dataclass(frozen=True)
class PlayResult:
    """Episode returns and lengths of a trained policy."""

    task: str
    library: str
    """The library, or `zero` / `random` for the agents that need none."""
    checkpoint: Path | None
    run_dir: Path | None
    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    mean_return: float | None
    std_return: float | None
    mean_length: float | None
    env_steps: int
    steps_per_s: float
    videos: tuple[Path, ...] = ()
    checkpoint_saved: dict[str, Any] | None = None
    """The run's record of the checkpoint played (`iteration`, `env_steps`, `mean_return` when it was saved), or
    None for a checkpoint outside a run: what `--checkpoint best` chose it by."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass and its bases (the nearest class's wins), read from source."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0]
        assert isinstance(body, ast.ClassDef)
        for statement, after in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[statement.target.id] = " ".join(after.value.value.split())
    return docs
