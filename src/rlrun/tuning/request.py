"""What a tune is: its request (`TuneRequest`), its result, and its YAML spec file (`load_spec`).

The request's field docstrings are the `rlrun tune` command line's help.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun import runs
from rlrun.api.requests import checked_fields
from rlrun.errors import InvalidArgument, MissingDependency
from rlrun.sweep import EXECUTOR_NAMES, MAX_RETRIES, read_spec, shown_url

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
    num_cpus: float = field(default=1.0, metadata={"above": 0.0})
    """CPUs per trial (Ray)."""
    num_gpus: float = field(default=0.0, metadata={"at_least": 0.0})
    """GPUs per trial (Ray)."""
    heartbeat_s: int = field(default=10, metadata={"minimum": 1})
    """Seconds between a running trial's heartbeats in the storage."""
    grace_s: int = field(default=120, metadata={"minimum": 1})
    """A trial whose heartbeat is older than this is failed as interrupted (its process on another host died)."""
    retries: int = field(default=0, metadata={"minimum": 0, "maximum": MAX_RETRIES})
    """Run a failed trial again with the same parameters, up to this many times: one whose training raised, or
    whose process or node died. The retry (a trial enqueued with Optuna's `enqueue_trial`, as Optuna's
    `RetryHeartbeatStaleTrialCallback` does) takes the failed one's place in `n_trials` and trains from the start."""
    report: bool = field(default=True, metadata={"flag": "--no_report", "negate": True})
    """`--no_report` (`report=False`): write only `trials.csv` and `best.yaml` at the end, not the plots and
    `report.md`."""


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
    """Trials that failed on their own and were not run again (interrupted ones are not counted)."""
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
    lost_slots: int = 0
    """Worker slots that died (a process killed, a Ray node lost); each one's trial failed as interrupted, and a
    spare slot took its place while spares lasted (as many as `workers`)."""
    retried: int = 0
    """Failed trials that were run again (`retries`): the user attribute `rlrun_retry_of` of each retry names the
    first trial of its line, `rlrun_attempt` which attempt it is."""


SPEC_KEYS = tuple(item.name for item in dataclasses.fields(TuneRequest))


def load_spec(path: str | Path, *, trust: bool = False, **overrides: Any) -> TuneRequest:
    """A `TuneRequest` from a YAML spec (its keys are the request's fields); keyword arguments that are not
    None replace the spec's values.

    A spec is data: an `out`, `log_root` or SQLite `storage` file outside its folder, a database server's
    `storage` URL, a Ray `address` or a task's `module:` part is refused unless the same key is given as a
    keyword or `trust` is set (`rlrun.sweep.check_reach`). The storage URL's database driver must be installed
    (`check_storage`)."""
    spec = read_spec(
        path,
        "tune spec",
        SPEC_KEYS,
        overrides,
        not_a_file="pass a YAML spec such as tune.yaml.",
        example="task, search_space",
        trust=trust,
    )
    check_storage(spec.get("storage"))
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


STORAGE_DRIVERS = {
    "pysqlite": ("sqlite3", "(Python's own sqlite3)"),
    "psycopg2": ("psycopg2", "psycopg2-binary"),
    "psycopg": ("psycopg", "'psycopg[binary]'"),
    "pg8000": ("pg8000", "pg8000"),
    "psycopg2cffi": ("psycopg2cffi", "psycopg2cffi"),
    "mysqldb": ("MySQLdb", "mysqlclient"),
    "pymysql": ("pymysql", "PyMySQL"),
    "mysqlconnector": ("mysql.connector", "mysql-connector-python"),
    "mariadbconnector": ("mariadb", "mariadb"),
    "cymysql": ("cymysql", "cymysql"),
    "cx_oracle": ("cx_Oracle", "cx_Oracle"),
    "oracledb": ("oracledb", "oracledb"),
    "pyodbc": ("pyodbc", "pyodbc"),
    "pymssql": ("pymssql", "pymssql"),
}
"""SQLAlchemy's synchronous database drivers: the driver's name in a URL (`postgresql+psycopg2://`) -> the module
it imports and the pip package that installs it."""

STORAGE_DIALECTS = {
    "sqlite": ("pysqlite",),
    "postgresql": ("psycopg2", "psycopg", "pg8000", "psycopg2cffi"),
    "mysql": ("mysqldb", "pymysql", "mysqlconnector", "cymysql"),
    "mariadb": ("mysqldb", "pymysql", "mariadbconnector", "mysqlconnector"),
    "oracle": ("oracledb", "cx_oracle"),
    "mssql": ("pyodbc", "pymssql"),
}
"""The databases SQLAlchemy itself speaks to and their drivers; `_default_driver` says which a URL without one gets."""


def check_storage(url: Any) -> None:
    """Refuse, in one line, a storage URL whose database SQLAlchemy does not know (`postgres://`, `foo://`) or
    whose driver is not installed (`postgresql://` without its driver), naming the pip package, before any
    folder exists. Databases and drivers that installed packages add (the `sqlalchemy.dialects` entry points)
    are taken as they are; a value that is no URL is left to planning, which refuses it."""
    if not isinstance(url, str) or "://" not in url or importlib.util.find_spec("sqlalchemy") is None:
        return
    scheme = url.partition("://")[0].lower()
    dialect, _, driver = scheme.partition("+")
    url = shown_url(url)  # printed below: no password
    if _plugin_dialect(dialect, driver):
        return
    if dialect not in STORAGE_DIALECTS:
        raise InvalidArgument(
            f"--storage {url!r}: {dialect!r} is not a database SQLAlchemy knows; use sqlite:///path/study.db, "
            "postgresql://user@host/db or mysql://user@host/db (or leave it out for <out>/study.db)."
        )
    if driver and driver not in STORAGE_DIALECTS[dialect]:
        raise InvalidArgument(
            f"--storage {url!r}: {driver!r} is not a {dialect} driver rlrun can use; use one of "
            f"{', '.join(f'{dialect}+{name}://' for name in STORAGE_DIALECTS[dialect])}."
        )
    module, package = STORAGE_DRIVERS[driver or _default_driver(dialect)]
    if importlib.util.find_spec(module.partition(".")[0]) is None:
        raise MissingDependency(
            f"--storage {url!r} needs the {dialect} driver {module!r}, which is not installed: pip install {package} "
            f"(or name an installed driver: {dialect}+DRIVER://)."
        )


def _default_driver(dialect: str) -> str:
    """The driver SQLAlchemy takes for a URL that names none: psycopg (version 3) and oracledb from
    SQLAlchemy 2.1 on, psycopg2 and cx_Oracle before; the first listed for the others."""
    from importlib.metadata import version

    major, minor = (int(part) for part in re.findall(r"\d+", version("sqlalchemy"))[:2])
    if dialect in ("postgresql", "oracle") and (major, minor) < (2, 1):
        return {"postgresql": "psycopg2", "oracle": "cx_oracle"}[dialect]
    return {"postgresql": "psycopg", "oracle": "oracledb"}.get(dialect, STORAGE_DIALECTS[dialect][0])


def _plugin_dialect(dialect: str, driver: str) -> bool:
    """Whether an installed package adds this database (and driver) to SQLAlchemy through an entry point."""
    from importlib.metadata import entry_points

    names = {point.name for point in entry_points(group="sqlalchemy.dialects")}
    return (f"{dialect}.{driver}" if driver else dialect) in names


__all__ = ["SPEC_KEYS", "TuneRequest", "TuneResult", "check_storage", "load_spec"]
