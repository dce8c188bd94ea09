"""Benchmark records: what a script measured, saved as data, from which `scripts/benchmark_page.py` writes the page.

A script that takes `--save` (added by `add_argument`) writes one record as JSON, to
`benchmarks/results/<script>.json` by default or to `--save PATH`; without `--save` it writes nothing. A record
holds the script and its exact command line, the date, how long the run took, the machine (CPU model, cores,
memory, Python, torch), the 1-minute load average before and after, and each figure: its value (a median, or
what the script prints), its spread (the interval the script computes: min-max over pairs, quartiles, blocks),
the 90% interval of the median where the script computes one, and the goal with its verdict where the script
has a goal. The printed output of a script does not change with `--save`.

    record = results.Record.start(__file__, argv)      # at the start of main: the load before
    record.add("figure", 0.98, goal=(">=", 0.98), spread=(0.95, 1.01), spread_kind="min-max of 5 pairs")
    if args.save:
        record.save(args.save)                            # the load after, the machine, the JSON
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alternating import Summary, load, sided

BENCHMARKS = Path(__file__).resolve().parent
RESULTS = BENCHMARKS / "results"
"""Where records go by default, one `<script>.json` each."""
DEFAULT = "default"
"""`--save` given without a path: the script's default record, `benchmarks/results/<script>.json`."""
GOALS = {">=": lambda value, goal: value >= goal, "<=": lambda value, goal: value <= goal}


def add_argument(parser: argparse.ArgumentParser) -> None:
    """`--save [PATH]`: save the figures as a record (to `benchmarks/results/<script>.json` without a PATH)."""
    parser.add_argument(
        "--save",
        nargs="?",
        const=DEFAULT,
        default=None,
        metavar="PATH",
        help="save the figures as a JSON record to PATH (default: benchmarks/results/<script>.json)",
    )


def machine() -> dict[str, Any]:
    """CPU model, cores, memory (GiB), Python and torch versions of this machine (torch's read from its
    distribution, not imported)."""
    cpu = platform.processor() or platform.machine()
    memory = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
        with open("/proc/meminfo", encoding="utf-8") as info:
            kib = next(int(line.split()[1]) for line in info if line.startswith("MemTotal:"))
        memory = round(kib / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "python": platform.python_version(),
        "torch": torch,
    }


def command(script: str, argv: Sequence[str] | None = None) -> str:
    """The command line that ran `script` with `argv` (by default this process's arguments), as typed from the
    repository's root: `python benchmarks/adapter_overhead.py --pairs 5 --save`."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["python", f"benchmarks/{Path(script).name}", *arguments])


def finite(value: float | None) -> float | None:
    """`value`, or None for an infinity or NaN (JSON has neither: a time never reached is `None`)."""
    return None if value is None or not math.isfinite(value) else float(value)


class Record:
    """One run of a benchmark script: its command, load and figures, saved with the machine as JSON."""

    def __init__(self, script: str, command_line: str) -> None:
        self.script = Path(script).stem
        self.command = command_line
        self.started = time.time()
        self.load_before = load()
        self.figures: list[dict[str, Any]] = []

    @classmethod
    def start(cls, script: str, argv: Sequence[str] | None = None) -> Record:
        """A record of `script` (its `__file__`) run with `argv` (by default `sys.argv[1:]`), begun now."""
        return cls(script, command(script, argv))

    def add(
        self,
        name: str,
        value: float | None,
        *,
        unit: str = "",
        digits: int = 2,
        spread: tuple[float | None, float | None] | None = None,
        spread_kind: str = "",
        interval: tuple[float, float] | None = None,
        goal: tuple[str, float] | None = None,
        verdict: str | None = None,
        note: str = "",
        missing: str = "not reached",
    ) -> dict[str, Any]:
        """Add a figure. `value`: the figure as the script prints it; None: none, and `missing` says why (not
        reached, not measured). `spread`: (low, high) and what they are (`spread_kind`). `interval`: the 90%
        interval of the median, where the script computes one. `goal`: (">=" or "<=", the goal's value); the
        verdict is the value's against it unless given. `note`: what else the page shows beside the spread."""
        if goal is not None and verdict is None:
            verdict = "met" if value is not None and GOALS[goal[0]](value, goal[1]) else "not met"
        figure = {
            "name": name,
            "value": finite(value),
            "unit": unit,
            "digits": digits,
            "spread": None if spread is None else [finite(spread[0]), finite(spread[1])],
            "spread_kind": spread_kind,
            "interval": None if interval is None else [finite(interval[0]), finite(interval[1])],
            "goal": None if goal is None else {"op": goal[0], "value": goal[1]},
            "verdict": verdict,
            "note": note,
        }
        figure["missing"] = missing if figure["value"] is None else ""
        self.figures.append(figure)
        return figure

    def add_summary(self, name: str, summary: Summary, *, unit: str = "", digits: int = 3, word: str = "pair") -> None:
        """Add the median of an alternating comparison (`alternating.Summary`): its min-max spread, its 90% interval,
        its goal (>=) and the load during its pairs."""
        count = len(summary.ratios)
        self.add(
            name,
            summary.median,
            unit=unit,
            digits=digits,
            spread=(min(summary.ratios), max(summary.ratios)),
            spread_kind=f"min-max of {count} {word}{'s' * (count != 1)}",
            interval=summary.interval(),
            goal=(">=", summary.goal),
            note=f"load {summary.load_before:.2f} -> {summary.load_after:.2f} during this row{summary.unsettled()}",
        )

    def data(self) -> dict[str, Any]:
        """The record as saved: the load after and the machine are read now."""
        started = datetime.datetime.fromtimestamp(self.started, tz=datetime.UTC)
        return {
            "script": f"benchmarks/{self.script}.py",
            "command": self.command,
            "date": started.strftime("%Y-%m-%d %H:%M UTC"),
            "runtime_s": round(time.time() - self.started, 1),
            "machine": machine(),
            "load": {"before": round(self.load_before, 2), "after": round(load(), 2)},
            "figures": self.figures,
        }

    def save(self, path: str | os.PathLike[str] = DEFAULT) -> Path:
        """Write the record as JSON to `path` (`DEFAULT`: `benchmarks/results/<script>.json`); return the path."""
        target = RESULTS / f"{self.script}.json" if str(path) == DEFAULT else Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_text(json.dumps(self.data(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        temporary.replace(target)
        return target


def read(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A saved record."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def number(value: float, digits: int, goal: dict[str, Any] | None = None) -> str:
    """`value` at `digits` decimals, with thousands separators from 10,000, and with the digits that keep it on its
    verdict's side of `goal` (`alternating.sided`: 0.97996 against >= 0.98 is not shown as 0.980)."""
    thousands = abs(value) >= 10_000
    if goal is not None:
        return sided(value, goal["value"], digits=digits, higher_is_better=goal["op"] == ">=", thousands=thousands)
    return f"{value:{',' if thousands else ''}.{digits}f}"


def with_unit(text: str, unit: str) -> str:
    """`1.03x`, `0.2 ms`: units that are a sign (x, %) stick to the number."""
    if not unit:
        return text
    return f"{text}{unit}" if unit in ("x", "%") else f"{text} {unit}"


def shown_value(figure: dict[str, Any]) -> str:
    """The figure's value as the page shows it (`not reached` for none)."""
    if figure["value"] is None:
        return figure["missing"] or "not reached"
    return with_unit(number(figure["value"], figure["digits"], figure["goal"]), figure["unit"])


def shown_spread(figure: dict[str, Any]) -> str:
    """`0.95-1.01 (min-max of 5 pairs); 90% interval of the median 0.96-1.00; <note>`, or `-`."""
    parts = []
    unit, digits = figure["unit"], figure["digits"]
    if figure["spread"] is not None:
        low, high = figure["spread"]
        if low is not None and high is not None:
            text = with_unit(f"{number(low, digits)}-{number(high, digits)}", unit)
        else:
            text = " - ".join("not reached" if bound is None else with_unit(number(bound, digits), unit)
                              for bound in (low, high))  # fmt: skip
        kind = f" ({figure['spread_kind']})" if figure["spread_kind"] else ""
        parts.append(f"{text}{kind}")
    if figure["interval"] is not None:
        low, high = (number(bound, digits) for bound in figure["interval"])
        parts.append(f"90% interval of the median {with_unit(f'{low}-{high}', unit)}")
    if figure["note"]:
        parts.append(figure["note"])
    return "; ".join(parts) or "-"


def shown_goal(figure: dict[str, Any]) -> str:
    goal = figure["goal"]
    if goal is None:
        return "-"
    value = f"{goal['value']:g}"
    return f"{goal['op']} {with_unit(value, figure['unit'])}"


def shown_machine(record: dict[str, Any]) -> str:
    """`AMD EPYC 7B13, 2 cores, 23.4 GiB, Python 3.11.7, torch 2.13.0+cpu`."""
    found = record["machine"]
    parts = [found["cpu"], f"{found['cores']} cores"]
    if found.get("memory_gib") is not None:
        parts.append(f"{found['memory_gib']:g} GiB")
    parts.append(f"Python {found['python']}")
    if found.get("torch"):
        parts.append(f"torch {found['torch']}")
    return ", ".join(parts)


def shown_load(record: dict[str, Any]) -> str:
    return f"{record['load']['before']:.2f} -> {record['load']['after']:.2f}"
