"""The typed surface every library adapter implements (`Adapter`), and what rlrun hands to it.

An adapter is a module, `rlrun.libraries.<name>`, that imports its library lazily inside its
functions (so a missing library breaks only its own row) and defines every member of `Adapter`.
`rlrun.libraries.load_adapter` checks a module against `Adapter` when it loads it and names what
is missing, so an incomplete adapter fails before any call starts, not in the middle of one.

Adapters never import rlrun's API or CLI, never create directories outside `job.run_dir`, and close
every writer or runner they create in `finally`; the environment is rlrun's to close. The recipe
for adding a library is in ARCHITECTURE.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rlrun.errors import CorruptCheckpoint
from rlrun.trust.names import Rule

if TYPE_CHECKING:
    from rlrun.envs import TorchVectorEnv


class Adapter(Protocol):
    """What rlrun reads from a library adapter module: four tables and six functions (and, optionally, the
    trust tables of `CODE_MEMBERS`)."""

    IMPORTS: dict[str, tuple[str, ...]]
    """Per ML framework it runs on (`torch`, `jax`): the modules to import before the hermetic scope
    captures (the library and what it imports lazily on first use)."""
    ALGORITHMS: dict[str, tuple[str, ...]]
    """Lower-case algorithm name (`ppo`, `sac`, ...) -> the Gymnasium action space classes it acts in."""
    DEFAULT_ALGORITHM: str
    """A key of `ALGORITHMS`."""
    LOGGERS: tuple[str, ...]
    """The `logging` loggers the library reports on (SKRL's `skrl`); without `--verbose` rlrun sends
    them, like the library's prints, to the run's console.log."""

    def env_steps_per_iteration(self, config: dict[str, Any], num_envs: int) -> int:
        """How many environment steps one `--max_iterations` unit is (the library's part of the agent
        configuration, `configs.library_config`); raise `InvalidArgument` for a configuration that
        the library would reject, so that the plan catches it before the run directory is made."""
        ...

    def check_checkpoint(self, path: Path) -> None:
        """Read the file without building anything; raise `CorruptCheckpoint` if it cannot be loaded."""
        ...

    def train(self, job: TrainJob) -> TrainOutcome:
        """Train on `job.env` with the library's own runner; write checkpoints through `job.save_checkpoint`.

        When a `KeyboardInterrupt` ends the training early (Ctrl-C, SIGTERM or a stop request: `TrainingStopped`),
        save the agent as it is (weights, optimiser, normaliser, counters) like a periodic checkpoint, numbered by
        the last iteration whose update ran, then re-raise it; a save that fails adds a note and never masks it.
        """
        ...

    def load_policy(self, job: PlayJob) -> Policy:
        """Rebuild the agent from `job.checkpoint` and return its policy."""
        ...

    def export_policy(self, job: PlayJob) -> Any:
        """The deterministic policy as a plain `torch.nn.Module` on the CPU, observations in, actions out
        (before clipping to the action space), observation normalisation included; rlrun traces it to
        TorchScript and ONNX. Raise `InvalidArgument` for a framework it cannot export."""
        ...


ADAPTER_MEMBERS: tuple[str, ...] = (
    "IMPORTS",
    "ALGORITHMS",
    "DEFAULT_ALGORITHM",
    "LOGGERS",
    "env_steps_per_iteration",
    "check_checkpoint",
    "train",
    "load_policy",
    "export_policy",
)
"""The members of `Adapter`, in the order its docs list them (a test keeps this list and the Protocol equal)."""

CODE_MEMBERS: tuple[str, ...] = ("CODE_NAMES", "CODE_SOURCE")
"""Optional members of an adapter module, its trust tables (`rlrun.trust.names`): `CODE_NAMES`, a mapping of
dotted key patterns of the library's configuration (`*` any one key or list index, `**` any number of them)
to what a value there may be (the names rlrun allows, an `Expression` or an `Identifier`), covering every key
whose value the library turns into code (imports, evaluates, writes into source); `CODE_SOURCE`, the sections
the library writes into source code. A module without them gets empty tables: every configuration is still
refused an import path."""


def minibatch_keys(adapter: Any) -> Mapping[str, str]:
    """The adapter's optional `MINIBATCH_KEYS`: algorithm -> the dotted key of the library configuration that sizes
    a minibatch, which rlrun fits to `--num_envs` (`rlrun.api.fitting`). Empty where it declares none."""
    return dict(getattr(adapter, "MINIBATCH_KEYS", {}))


def sees_images(adapter: Any) -> bool:
    """The adapter's optional `IMAGE_OBSERVATIONS`: whether it has a policy for image observations (uint8 frames,
    `rlrun.envs.contract.is_image`: an Atari task). False where it declares none; rlrun then refuses such tasks."""
    return bool(getattr(adapter, "IMAGE_OBSERVATIONS", False))


def code_tables(adapter: Any) -> tuple[Mapping[str, Rule], tuple[str, ...]]:
    """The adapter's `CODE_NAMES` and `CODE_SOURCE` (see `CODE_MEMBERS`), empty where it declares none."""
    return dict(getattr(adapter, "CODE_NAMES", {})), tuple(getattr(adapter, "CODE_SOURCE", ()))


def missing_members(module: Any) -> list[str]:
    """The members of `Adapter` that `module` lacks, or that are not callable where a function is due."""
    functions = {name for name in ADAPTER_MEMBERS if not name.isupper()}
    return [
        name
        for name in ADAPTER_MEMBERS
        if not hasattr(module, name) or (name in functions and not callable(getattr(module, name)))
    ]


class Policy(Protocol):
    """Maps a batch of observations to a batch of actions, torch tensors on the run's device.

    A policy with memory (a recurrent network) also has `episodes_ended(done)`, which the rollout calls after
    each step where an episode ended (`done`: bool `[num_envs]`), so it forgets those envs' past."""

    def __call__(self, observations: Any) -> Any: ...


@dataclass
class TrainJob:
    """Everything an adapter needs to train: validated, resolved, with the run directory made."""

    env: TorchVectorEnv
    """rlrun's torch vector env (Gymnasium `VectorEnv`, SAME_STEP autoreset), already seeded."""
    stats: Any
    """The `EpisodeStatistics` wrapper around `env` (env steps, finished episode returns)."""
    config: dict[str, Any]
    """The library's configuration, a private deep copy the adapter may consume."""
    max_iterations: int
    seed: int
    device: str
    run_dir: Path
    save_checkpoint: Callable[[str, Callable[[str], None], int], Path]
    """`save_checkpoint(file_name, write(path), iteration)`: writes atomically and records it in run.json."""
    resume_from: Path | None = None
    """A checkpoint to continue from (`--resume`)."""
    resume_iteration: int = 0
    """The iteration the parent run recorded for `resume_from`: counters continue from it where the
    checkpoint does not hold them itself."""
    deterministic: bool = False
    """The user asked for deterministic torch algorithms; the adapter's flag policy must agree."""
    algorithm: str = ""
    """A key of the adapter's `ALGORITHMS`."""
    ml_framework: str = "torch"
    save_checkpoints: Callable[[Sequence[tuple[str, Callable[[str], None], int]]], list[Path]] | None = None
    """`save_checkpoints([(file_name, write(path), iteration), ...])`: several checkpoints of one moment (SKRL's
    best and current agent) written as one batch, listed by one run.json write; their paths in order. Left
    None, it saves each with `save_checkpoint`."""

    def __post_init__(self) -> None:
        if self.save_checkpoints is None:
            save = self.save_checkpoint
            self.save_checkpoints = lambda checkpoints: [save(*checkpoint) for checkpoint in checkpoints]


@dataclass(frozen=True)
class TrainOutcome:
    """What an adapter reports back after training."""

    iterations: int
    checkpoint: Path | None


@dataclass
class PlayJob:
    """Everything an adapter needs to rebuild a trained policy."""

    env: TorchVectorEnv
    config: dict[str, Any]
    checkpoint: Path
    device: str
    deterministic: bool
    """Act with the policy's deterministic action (its mean); False samples."""
    algorithm: str = ""
    ml_framework: str = "torch"
    seed: int | None = None
    """The call's seed (the API has seeded the global RNGs with it); for a library that seeds its own."""


def require_keys(path: Path, state: Any, keys: tuple[str, ...], what: str) -> None:
    """Raise `CorruptCheckpoint` unless the loaded `state` is a dict holding every key of `keys`."""
    missing = [key for key in keys if not isinstance(state, dict) or key not in state]
    if missing:
        raise CorruptCheckpoint(f"checkpoint {str(path)!r} is not {what} (missing {', '.join(missing)}).")


def require_count(path: Path, state: dict[str, Any], key: str, what: str) -> int:
    """The loaded `state[key]` as a count (an integer from 0 to 2**62); `CorruptCheckpoint` for anything else."""
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1 << 62:
        raise CorruptCheckpoint(f"checkpoint {str(path)!r} is not {what} ({key} {str(value)[:40]!r} is not a count).")
    return value
