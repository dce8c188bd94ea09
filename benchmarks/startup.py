"""Start-up: `rlrun --help` and `rlrun list` wall time, and what the first call of each library pays in imports.

Each figure is a fresh interpreter (`--repeats` times, the median printed with the spread):
- `rlrun --help` and `rlrun list` as console commands (goal <= 0.3 s each), with Python's bytecode cache as an
  installed package has it (pip compiles it at install; an editable install writes `__pycache__` on first
  use, which a warm-up run here does even when the caller's environment sets `PYTHONDONTWRITEBYTECODE`;
  without any cache every rlrun module is compiled from source at every start, about 0.05 s more);
- `import rlrun` (goal: no torch imported);
- per library and framework, the imports a first call does before its capture (rlrun's core imports,
  `torch._dynamo` among them, then the adapter's `IMPORTS`), each group timed on its own.

    python benchmarks/startup.py [--repeats 5] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import results as records
from rlrun.api.imports import CORE_IMPORTS
from rlrun.libraries import LIBRARIES, load_adapter

RLRUN = str(Path(sys.executable).with_name("rlrun"))


def timed(command: list[str], repeats: int, environment: dict[str, str] | None = None) -> list[float]:
    durations = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=environment)
        durations.append(time.perf_counter() - start)
    return durations


def imports_cost(groups: list[tuple[str, ...]], repeats: int) -> list[list[float]]:
    """Seconds each group of imports takes, one group after the other, in fresh interpreters."""
    code = (
        "import importlib, json, sys, time\n"
        f"groups = {groups!r}\n"
        "spent = []\n"
        "for group in groups:\n"
        "    start = time.perf_counter()\n"
        "    for name in group: importlib.import_module(name)\n"
        "    spent.append(time.perf_counter() - start)\n"
        "print(json.dumps(spent))\n"
    )
    import json

    runs = [json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
            for _ in range(repeats)]  # fmt: skip
    return [[run[index] for run in runs] for index in range(len(groups))]


def show(label: str, values: list[float], goal: str = "") -> None:
    print(f"{label:<52} {statistics.median(values):6.2f} s (spread {min(values):.2f}-{max(values):.2f}){goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)
    spread_kind = f"min-max of {args.repeats} fresh interpreter{'s' * (args.repeats != 1)}"

    def add(name: str, values: list[float], goal: tuple[str, float] | None = None, kind: str = spread_kind) -> None:
        median = statistics.median(values)
        record.add(name, median, unit="s", spread=(min(values), max(values)), spread_kind=kind, goal=goal)

    print(f"load {os.getloadavg()[0]:.2f}")
    cached = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([RLRUN, "list"], check=True, capture_output=True, env=cached)  # writes an editable install's cache
    for command in ("--help", "list"):
        durations = timed([RLRUN, command], args.repeats, cached)
        show(f"rlrun {command}", durations, "  goal <= 0.3 s")
        add(f"start-up: `rlrun {command}`, wall time", durations, ("<=", 0.3))
    durations = timed([sys.executable, "-c", "import rlrun"], args.repeats)
    show("python -c 'import rlrun'", durations)
    add("start-up: `python -c 'import rlrun'`, wall time", durations)
    core = tuple(name for name in CORE_IMPORTS if name != "torch._dynamo")
    shared: dict[str, list[float]] = {"numpy, torch, gymnasium, rlrun.envs": [], "torch._dynamo": []}
    own: dict[str, list[float]] = {}
    for library in LIBRARIES.values():
        if not library.installed:
            continue
        for framework, names in load_adapter(library).IMPORTS.items():
            groups = imports_cost([core, ("torch._dynamo",), tuple(names)], args.repeats)
            label = f"first {library.name} ({framework}) call:"
            show(f"{label} numpy, torch, gymnasium, rlrun.envs", groups[0])
            show(f"{label} torch._dynamo", groups[1])
            show(f"{label} the library", groups[2])
            shared["numpy, torch, gymnasium, rlrun.envs"] += groups[0]
            shared["torch._dynamo"] += groups[1]
            own[f"first-call imports of {library.name} ({framework}): the library's own"] = groups[2]
    for group, durations in shared.items():
        if durations:
            kind = f"min-max of {len(durations)} fresh interpreters, every library's"
            add(f"first-call imports of any library: {group}", durations, kind=kind)
    for name, durations in own.items():
        add(name, durations)
    print(f"load {os.getloadavg()[0]:.2f}")
    if args.save:
        record.save(args.save)


if __name__ == "__main__":
    main()
