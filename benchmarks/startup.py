"""Start-up: `rlrun --help` and `rlrun list` wall time, and what the first call of each library pays in imports.

Each figure is a fresh interpreter (`--repeats` times, the median printed with the spread):
- `rlrun --help` and `rlrun list` as console commands (goal <= 0.3 s each), with Python's bytecode cache as an
  installed package has it (pip compiles it at install; an editable install writes `__pycache__` on first
  use, which a warm-up run here does even when the caller's environment sets `PYTHONDONTWRITEBYTECODE`;
  without any cache every rlrun module is compiled from source at every start, about 0.05 s more);
- `import rlrun` (goal: no torch imported);
- per library and framework, the imports a first call does before its capture (rlrun's core imports,
  `torch._dynamo` among them, then the adapter's `IMPORTS`), each group timed on its own.

    python benchmarks/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rlrun.api.planning import CORE_IMPORTS
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
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}")
    cached = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([RLRUN, "list"], check=True, capture_output=True, env=cached)  # writes an editable install's cache
    for command in ("--help", "list"):
        show(f"rlrun {command}", timed([RLRUN, command], args.repeats, cached), "  goal <= 0.3 s")
    show("python -c 'import rlrun'", timed([sys.executable, "-c", "import rlrun"], args.repeats))
    core = tuple(name for name in CORE_IMPORTS if name != "torch._dynamo")
    for library in LIBRARIES.values():
        if not library.installed:
            continue
        for framework, names in load_adapter(library).IMPORTS.items():
            groups = imports_cost([core, ("torch._dynamo",), tuple(names)], args.repeats)
            label = f"first {library.name} ({framework}) call:"
            show(f"{label} numpy, torch, gymnasium, rlrun.envs", groups[0])
            show(f"{label} torch._dynamo", groups[1])
            show(f"{label} the library", groups[2])
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
