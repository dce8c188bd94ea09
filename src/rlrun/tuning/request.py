"""What a tune is: its request (`TuneRequest`), its result, and its YAML spec file (`load_spec`).

The request's field docstrings are the `rlrun tune` command line's help.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.api.requests import checked_fields
from rlrun.errors import InvalidArgument
from rlrun.sweep import EXECUTOR_NAMES, read_spec

OBJECTIVES = ("final_return", "eval_return")
DIRECTIONS = ("maximize", "minimize")
SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "hyperband", "none")
BEST_FILE = "best.yaml"


@checked_fields
@dataclass(frozen=True)
class TuneRequest:
    """A hyperparameter search with Optuna: a task, a library, a budget per trial, a search space, n trials."""

    task: str
    """Task id, native or Gymnasium."""
    library: str | None = None
    """None: the task's default library."""
    algorithm: str | None = None
    """None: the library's default."""
    ml_framework: str | None = None
    """None: the library's default (torch)."""
    search_space: dict[str, str] = field(default_factory=dict, metadata={"cli": False})
    """`agent.`/`env.` keys to `loguniform(a, b)`, `uniform(a, b)`, `int(a, b)` or `choice([x, y])`."""
    overrides: tuple[str, ...] = field(default=(), metadata={"cli": False})
    """Fixed `agent.`/`env.` overrides of every trial (the searched keys come after)."""
    enqueue: tuple[dict[str, Any], ...] = field(default=(), metadata={"cli": False})
    """Trials to run first, as mappings of searched keys to values (a known, or deliberately poor, start)."""
    n_trials: int = field(default=20, metadata={"minimum": 1})
    """Trials in the study, in total over every run of the same command (a rerun resumes up to it)."""
    env_steps: int | None = field(default=None, metadata={"minimum": 1})
    """Budget per trial and seed in env steps (converted with each trial's iteration size)."""
    iterations: int | None = field(default=None, metadata={"minimum": 1})
    """Budget per trial and seed in library iterations."""
    seconds: float | None = field(default=None, metadata={"above": 0.0})
    """Optional cap per trial in seconds of training (it stops at the first iteration boundary past them)."""
    seeds: tuple[int, ...] | str = (0,)
    """Training seeds of every trial, or a string such as `0-2`; a trial's value is the mean over them."""
    objective: str = field(default="final_return", metadata={"choices": OBJECTIVES})
    """`final_return` (mean training return of the last metrics rows) or `eval_return` (deterministic episodes)."""
    eval_episodes: int = field(default=10, metadata={"minimum": 1})
    """Episodes of `eval_return`."""
    direction: str = field(default="maximize", metadata={"choices": DIRECTIONS})
    """`maximize` or `minimize` the objective."""
    sampler: str = field(default="tpe", metadata={"choices": SAMPLERS})
    """`tpe` (Optuna's TPESampler) or `random`."""
    pruner: str = field(default="median", metadata={"choices": PRUNERS})
    """`median`, `hyperband` or `none`: stops hopeless trials from their live training curve."""
    startup_trials: int | None = field(default=None, metadata={"minimum": 0})
    """Trials sampled at random, and not pruned, before TPE and the pruner start; None: n_trials // 4, 2 to 10."""
    seed: int = field(default=0, metadata={"minimum": 0})
    """The sampler's seed."""
    num_envs: int | None = None
    """Environments per trial; None: the tuned default."""
    device: str | None = None
    """Device of every trial; None: `cuda` when available, else `cpu`."""
    out: str = "tune"
    """Folder of `study.db`, `trials.csv`, `best.yaml`, the plots and `report.md`."""
    storage: str | None = None
    """An SQLAlchemy URL of the study's database; None: SQLite `<out>/study.db`."""
    study: str | None = None
    """The study's name in the storage; None: the out folder's name."""
    log_root: str | None = None
    """Trials' run directories' root; None: `<out>/runs`."""
    executor: str = field(default="inline", metadata={"choices": EXECUTOR_NAMES})
    """`inline` (hermetic calls in this process), `process` (a spawn pool) or `ray`."""
    workers: int | None = field(default=None, metadata={"minimum": 1})
    """Trials at once for `process` and `ray` (default 2); inline runs one."""
    address: str | None = None
    """Ray cluster address; None starts a local Ray instance."""
    heartbeat_s: int = field(default=10, metadata={"minimum": 1})
    """Seconds between a running trial's heartbeats in the storage."""
    grace_s: int = field(default=120, metadata={"minimum": 1})
    """A trial whose heartbeat is older than this is failed as interrupted (its process on another host died)."""
    report: bool = field(default=True, metadata={"flag": "--no_report", "negate": True})
    """Write `trials.csv`, `best.yaml`, the plots and `report.md` at the end (`--no_report`: only the first two)."""


@dataclass(frozen=True)
class TuneResult:
    """What a study holds after this call."""

    out: Path
    storage: str
    """The study's SQLAlchemy URL (`optuna-dashboard` takes it)."""
    study: str
    n_trials: int
    """The study's counted trials (see `rlrun.tuning.storage`)."""
    completed: int
    pruned: int
    failed: int
    """Trials that failed on their own (interrupted ones are not counted)."""
    ran: int
    """Trials this call ran."""
    best_trial: int | None
    best_value: float | None
    best_params: dict[str, Any]
    best_config: Path | None
    """`<out>/best.yaml`: the best trial's complete agent configuration (`--agent_config` takes it)."""
    trials: Path
    """`<out>/trials.csv`."""
    report: Path | None


SPEC_KEYS = tuple(item.name for item in dataclasses.fields(TuneRequest))


def load_spec(path: str | Path, **overrides: Any) -> TuneRequest:
    """A `TuneRequest` from a YAML spec (its keys are the request's fields); keyword arguments that are not
    None replace the spec's values."""
    spec = read_spec(
        path,
        "tune spec",
        SPEC_KEYS,
        overrides,
        not_a_file="pass a YAML spec such as tune.yaml.",
        example="task, search_space",
    )
    for key in ("overrides", "enqueue"):
        value = spec.get(key)
        if isinstance(value, str) and key == "overrides":
            value = [part for part in value.split(",") if part.strip()]
        if isinstance(value, dict) and key == "enqueue":
            value = [value]
        if isinstance(value, list):
            spec[key] = tuple(value)
    if isinstance(spec.get("seeds"), list):
        spec["seeds"] = tuple(spec["seeds"])
    if "task" not in spec:
        source = runs.check_path(path, "tune spec")
        raise InvalidArgument(f"tune spec {str(source)!r} names no task; add task: rlrun/CartPole-v1 (or --task).")
    return TuneRequest(**spec)


__all__ = ["SPEC_KEYS", "TuneRequest", "TuneResult", "load_spec"]
