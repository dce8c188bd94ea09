"""Reading a bench's `results.jsonl` and each cell's learning curve (`metrics.csv` in its run directory).

Standard library only: importing this module stays cheap.

The results file is appended to as cells end, so it is read leniently: a line that does not parse (a
torn last line, written when the bench was killed mid-append) is skipped and counted, and a later row
for the same `key` (a rerun with `--force`) replaces the earlier one, keeping the earlier one's place.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun.errors import UserError
from rlrun.trust import paths
from rlrun.trust.limits import file_size_within, parse_json, read_json

RESULTS_FILE = "results.jsonl"
MAX_RESULTS_BYTES = 256 << 20
"""The largest results.jsonl read (256 MiB): a row is under a kilobyte, and a bench has at most 100,000 cells."""
METRICS_FILE = "metrics.csv"
MANIFEST_FILE = "run.json"
MAX_MANIFEST_BYTES = 1 << 20
STATUSES = ("completed", "failed", "skipped")


@dataclass(frozen=True)
class Curve:
    """One training's learning curve: the points of `metrics.csv` where a mean return was known."""

    env_steps: tuple[float, ...]
    wall_s: tuple[float, ...]
    mean_return: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.mean_return)


@dataclass(frozen=True)
class CellResult:
    """One row of `results.jsonl`: a finished cell of the bench (task x run x seed)."""

    key: str
    task: str
    run: str
    seed: int
    status: str
    library: str = ""
    algorithm: str = ""
    ml_framework: str = ""
    variant: str = ""
    error: str | None = None
    note: str | None = None
    env_steps: int | None = None
    iterations: int | None = None
    wall_s: float | None = None
    steps_per_s: float | None = None
    final_return: float | None = None
    eval_return: float | None = None
    threshold: float | None = None
    time_to_threshold_s: float | None = None
    steps_to_threshold: int | None = None
    run_dir: Path | None = None
    config: str | None = None
    """Where the agent configuration came from (`rlrun: sb3/ppo/default.yaml`, `rl_zoo3: ...`, `file: ...`): the
    row's `config_source`, else the run directory's run.json `agent_config`; None when neither says."""
    curve: Curve | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Results:
    """The rows of one results file (the last per key, in the order keys first appeared)."""

    path: Path
    cells: tuple[CellResult, ...]
    unreadable_lines: tuple[int, ...] = ()  # 1-based line numbers that were skipped


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer of more than 308 digits
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    number = _float(value)
    return None if number is None else int(number)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _run_dir(value: Any, base: Path) -> Path | None:
    """The run directory: as written if absolute, else relative to the results file's folder if it is there."""
    if not value:
        return None
    path = Path(str(value)).expanduser()
    if path.is_absolute():
        return path
    beside = base / path
    return beside if beside.exists() else path


def _cell(row: dict[str, Any], base: Path) -> CellResult:
    variant = row.get("variant") or ""
    library = str(row.get("library") or "")
    algorithm = str(row.get("algorithm") or "")
    run = row.get("run")
    if not run:  # rows without a run label: library/algorithm[variant]
        run = "/".join(part for part in (library, algorithm) if part) + (f"[{variant}]" if variant else "")
    return CellResult(
        key=str(row["key"]),
        task=str(row.get("task") or "?"),
        run=str(run or "?"),
        seed=_int(row.get("seed")) or 0,
        status=str(row.get("status") or "failed"),
        library=library,
        algorithm=algorithm,
        ml_framework=str(row.get("ml_framework") or ""),
        variant=str(variant),
        error=_str(row.get("error")),
        note=_str(row.get("note")),
        env_steps=_int(row.get("env_steps")),
        iterations=_int(row.get("iterations")),
        wall_s=_float(row.get("wall_s")),
        steps_per_s=_float(row.get("steps_per_s")),
        final_return=_float(row.get("final_return")),
        eval_return=_float(row.get("eval_return")),
        threshold=_float(row.get("threshold")),
        time_to_threshold_s=_float(row.get("time_to_threshold_s")),
        steps_to_threshold=_int(row.get("steps_to_threshold")),
        run_dir=_run_dir(row.get("run_dir"), base),
        config=config_text(row.get("config_source")),
    )


def config_text(source: Any) -> str | None:
    """A configuration source (run.json's `agent_config`: `{"from": ..., "path": ...}`, or a string) as short text:
    `from: file name` (RL Zoo's with its entry); None when it says nothing usable."""
    if isinstance(source, str):
        return source.strip()[:120] or None
    if not isinstance(source, dict) or not isinstance(source.get("from"), str):
        return None
    origin = source["from"].strip()[:40]
    path = source.get("path")
    name = "/".join(Path(path).parts[-3:]) if isinstance(path, str) and path else ""
    entry = source.get("entry")
    if isinstance(entry, str) and entry:
        name = f"{name} [{entry[:60]}]" if name else entry[:60]
    text = f"{origin}: {name}" if name else origin
    return f"{text} (minibatch fitted to num_envs)" if source.get("fitted") else text


def read_config_source(run_dir: Path | None) -> str | None:
    """The agent configuration's source in `run_dir/run.json` (see `config_text`), or None: no run directory, no
    run.json, one that is a link out of its folder, too large, not JSON or without `agent_config`."""
    if run_dir is None:
        return None
    manifest = run_dir / MANIFEST_FILE
    try:
        if not paths.is_inside(paths.real(manifest), paths.real(run_dir)):
            return None
        data = read_json(manifest, MANIFEST_FILE, max_bytes=MAX_MANIFEST_BYTES)
    except (OSError, ValueError, UserError):
        return None
    return config_text(data.get("agent_config")) if isinstance(data, dict) else None


def read_curve(run_dir: Path | str | None) -> Curve | None:
    """The learning curve in `run_dir/metrics.csv`, or None without that file or without any return in it.

    Rows before the first finished episode (an empty `mean_return`) and rows that do not parse (a torn last
    row of a killed run) are left out; the points keep the file's order."""
    if run_dir is None:
        return None
    path = Path(run_dir) / METRICS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    steps: list[float] = []
    wall: list[float] = []
    returns: list[float] = []
    for row in csv.DictReader(text.splitlines()):
        point = (_float(row.get("env_steps")), _float(row.get("wall_s")), _float(row.get("mean_return")))
        if None in point:
            continue
        steps.append(point[0] or 0.0)
        wall.append(point[1] or 0.0)
        returns.append(point[2] or 0.0)
    if not returns:
        return None
    return Curve(tuple(steps), tuple(wall), tuple(returns))


def read_results(path: Path | str, *, curves: bool = True) -> Results:
    """Read `results.jsonl`: the last row per key, each with its learning curve and, where the row does not name
    it, its configuration source from run.json when `curves` (see `read_curve`, `read_config_source`).

    Lines that are not a JSON object with a `key` (or nest deeper than `rlrun.trust.limits.MAX_DEPTH`) are
    skipped and their numbers kept in `unreadable_lines`; a file over `MAX_RESULTS_BYTES`, or one that is no
    regular file, is refused (`UnreadableFile`)."""
    path = file_size_within(path, RESULTS_FILE, MAX_RESULTS_BYTES)
    latest: dict[str, CellResult] = {}
    unreadable: list[int] = []
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = parse_json(line, f"{RESULTS_FILE} line {number}")  # nesting bounded (rlrun.trust.limits)
                if not isinstance(row, dict) or "key" not in row:
                    raise ValueError("not a results row")
                cell = _cell(row, path.parent)
            except (ValueError, TypeError):
                unreadable.append(number)
                continue
            latest[cell.key] = cell  # a rerun's row replaces the earlier one (dict keeps the first position)
    cells = tuple(latest.values())
    if curves:
        cells = tuple(_with_curve(cell) for cell in cells)
    return Results(path=path, cells=cells, unreadable_lines=tuple(unreadable))


def _with_curve(cell: CellResult) -> CellResult:
    from dataclasses import replace

    config = cell.config or read_config_source(cell.run_dir)
    return replace(cell, curve=read_curve(cell.run_dir), config=config)
