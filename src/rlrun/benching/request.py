"""What a bench is: its request (`BenchRequest`, made of `BenchRun`s), its result, and its YAML spec file
(`load_spec`).

The request's field docstrings are the `rlrun bench` command line's help.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun.api.requests import checked_fields
from rlrun.errors import InvalidArgument, did_you_mean
from rlrun.sweep import EXECUTOR_NAMES, MAX_RETRIES, read_spec


@checked_fields
@dataclass(frozen=True)
class BenchRun:
    """One row of a comparison: a library with its algorithm and framework, and optionally a named set of
    `agent.`/`env.` overrides (a variant: `lr=3e-4` against `lr=1e-3` is a bench too)."""

    library: str
    algorithm: str | None = None
    """None: the library's default."""
    ml_framework: str | None = None
    """None: the library's default (torch)."""
    variant: str = ""
    """The variant's name (required with `overrides`, so that two variants of one library differ in the report)."""
    overrides: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> BenchRun:
        """`library[:algorithm[:framework]]`, the command line's form (`sb3:sac`, `skrl:ppo:jax`)."""
        parts = text.strip().split(":")
        if len(parts) > 3 or not all(parts):
            raise InvalidArgument(
                f"run {text!r} is not of the form library[:algorithm[:framework]] "
                "(for example sb3:sac or skrl:ppo:jax)."
            )
        library, *rest = parts
        return cls(library, rest[0] if rest else None, rest[1] if len(rest) > 1 else None)  # checked by planning


@checked_fields
@dataclass(frozen=True)
class BenchRequest:
    """A bench: the product of tasks x runs x seeds, trained with one budget, run on one executor."""

    tasks: tuple[str, ...] = ()
    """Task ids, native or Gymnasium (comma-separated on the command line); or name a `suite` instead."""
    suite: str | None = None
    """A named task list with an env-step budget per task, from rlrun's reference table: `classic` (CartPole-v1,
    Pendulum-v1, Acrobot-v1, MountainCarContinuous-v0, and LunarLander-v3 when Box2D is installed), `mujoco`
    (HalfCheetah, Hopper, Walker2d, Ant, Humanoid -v5) or `atari-5` (Aitchison et al. 2023). It fills the tasks
    and, when no budget is given, each task's budget; a budget given applies to every task instead."""
    runs: tuple[BenchRun | str, ...] = field(default=(), metadata={"flag": "--libraries", "aliases": ("--runs",)})
    """Runs to compare: `BenchRun`s, or `library[:algorithm[:framework]]` strings (comma-separated on the command
    line: rsl_rl,sb3:sac,skrl:ppo:jax)."""
    seeds: tuple[int, ...] | str = (0,)
    """Seeds, or a string such as `0-4` or `0,3,7`."""
    env_steps: int | None = field(default=None, metadata={"minimum": 1})
    """Budget per cell in env steps (the same for every library: converted with each adapter's iteration size)."""
    iterations: int | None = field(default=None, metadata={"minimum": 1})
    """Budget per cell in library iterations."""
    seconds: float | None = field(default=None, metadata={"above": 0.0})
    """Budget per cell in seconds of training (it stops at the first iteration boundary past them)."""
    num_envs: int | None = None
    """Environments per cell; None: each run's tuned default."""
    overrides: tuple[str, ...] = field(default=(), metadata={"cli": False})
    """`agent.`/`env.` overrides for every cell (a run's own come after)."""
    eval_episodes: int = field(default=0, metadata={"minimum": 0})
    """Deterministic evaluation episodes after each training (0: none)."""
    out: str = "bench"
    """Folder of `results.jsonl`, `report.md` and `plots/`."""
    log_root: str | None = None
    """Run directories' root; None: `<out>/runs`. On Ray, cells on other nodes send their run folders back here."""
    storage: str | None = None
    """A folder every node reaches, where each cell uploads its run folder when it ends (a local or NFS path,
    file://, or any filesystem fsspec knows: s3://bucket/prefix, gs://..., its package on every node); the driver
    copies a cell's folder from there into its log root when the cell ran elsewhere. None: a cell on another Ray
    node sends its folder back through Ray's object store (256 MiB at most)."""
    executor: str = field(default="inline", metadata={"choices": EXECUTOR_NAMES})
    """`inline` (hermetic calls in this process), `process` (a spawn pool) or `ray`."""
    workers: int | None = field(default=None, metadata={"minimum": 1})
    """Pool size for `process` (default 2); on Ray, most cells queued or running (default: all); ignored inline."""
    address: str | None = None
    """Ray cluster address; None starts a local Ray instance."""
    num_cpus: float = field(default=1.0, metadata={"above": 0.0})
    """CPUs per cell (Ray)."""
    num_gpus: float = field(default=0.0, metadata={"at_least": 0.0})
    """GPUs per cell (Ray)."""
    device: str | None = None
    """Device of every cell; None: `cuda` when available, else `cpu`."""
    force: bool = False
    """Rerun every cell, finished or not."""
    retries: int = field(default=0, metadata={"minimum": 0, "maximum": MAX_RETRIES})
    """Run a failed cell again, up to this many times (a worker that died, an env or library that raised): from the
    last checkpoint its failed attempt left under the log root, else from the start. Rows count their `attempts`."""
    report: bool = field(default=True, metadata={"flag": "--no_report", "negate": True})
    """`--no_report` (`report=False`): leave `report.md` and `plots/` out (`rlrun report` writes them later)."""
    name: str | None = None
    """The bench's name (the run directories' experiment folder); None: the out folder's name."""


@dataclass(frozen=True)
class BenchResult:
    """What a bench produced."""

    out: Path
    results: Path
    """`<out>/results.jsonl`."""
    report: Path | None
    rows: tuple[dict[str, Any], ...]
    """One row per cell of this bench (reused rows of an earlier run included), in cell order."""
    completed: int
    failed: int
    skipped: int
    reused: int
    """Cells not run again because an earlier run of the same bench completed them."""


SPEC_KEYS = tuple(item.name for item in dataclasses.fields(BenchRequest))
RUN_KEYS = tuple(item.name for item in dataclasses.fields(BenchRun))


def load_spec(path: str | Path, *, trust: bool = False, **overrides: Any) -> BenchRequest:
    """A `BenchRequest` from a YAML spec (its keys are the request's fields; `runs` entries are mappings with
    library, algorithm, ml_framework, variant, overrides, or `library[:algorithm[:framework]]` strings);
    keyword arguments that are not None replace the spec's values.

    A spec is data: an `out` or `log_root` outside its folder, a Ray `address` or a task's `module:` part is
    refused unless the same key is given as a keyword or `trust` is set (`rlrun.sweep.check_reach`)."""
    spec = read_spec(
        path,
        "bench spec",
        SPEC_KEYS,
        overrides,
        not_a_file="pass a YAML spec or use --tasks/--libraries.",
        example="tasks, runs, seeds",
        trust=trust,
    )
    spec["runs"] = tuple(_spec_run(entry) for entry in _sequence(spec.get("runs", ()), "runs"))
    for key in ("tasks", "overrides"):
        if key in spec:
            spec[key] = tuple(_sequence(spec[key], key))
    if isinstance(spec.get("seeds"), list):
        spec["seeds"] = tuple(spec["seeds"])
    return BenchRequest(**spec)


def _sequence(value: Any, key: str) -> list[Any]:
    if isinstance(value, str):
        return [part for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple):
        raise InvalidArgument(f"bench spec key {key!r} must be a list, not {value!r}.")
    return list(value)


def _spec_run(entry: Any) -> BenchRun | str:
    if isinstance(entry, str):
        return entry
    if not isinstance(entry, dict):
        raise InvalidArgument(f"a bench run must be a mapping (library: ...) or 'library[:algorithm]', not {entry!r}.")
    for key in entry:
        if key not in RUN_KEYS:
            raise InvalidArgument(
                f"bench run key {key!r} is unknown.{did_you_mean(str(key), RUN_KEYS, listing=0)} "
                f"Valid keys: {', '.join(RUN_KEYS)}."
            )
    if "library" not in entry:
        raise InvalidArgument(f"bench run {entry!r} names no library; add library: sb3 (or another, rlrun list).")
    fields = dict(entry)
    fields["overrides"] = tuple(_sequence(fields.get("overrides", ()), "overrides"))
    fields["variant"] = str(fields.get("variant") or "")
    return BenchRun(**fields)


__all__ = ["RUN_KEYS", "SPEC_KEYS", "BenchRequest", "BenchResult", "BenchRun", "load_spec"]
