"""CPU seconds until rlrun answers: a user error's one line, and a training's first env step, per library.

Each figure is a fresh interpreter's CPU time (user + system, its children included), `--repeats` times, the
median printed with the spread:
- a mistyped library, task, algorithm, framework, agent override key (of rlrun's configuration, and of RL Zoo's
  entry for SB3 on a Gymnasium id), env override key (of a Gymnasium id and of a native task) and a missing
  checkpoint, as console commands (`rlrun train ...`, exit 2): goal <= 0.5 s each, since these are answered
  from data before torch or any RL library is imported;
- per library and framework, `rlrun train` up to its first env step (a task that records the CPU time at its
  first `step` and ends the process there), against `python -c "import torch, <the library's imports>"` (and,
  for a torch library, one `torch.optim.Adam` built, as the library's own training builds its optimizer before
  its first step: `TORCH_OPTIMIZER`; for JAX, its CPU backend started by one array, as any JAX program's first
  operation starts it: `JAX_BACKEND`) in the same run, in pairs whose order alternates after one untimed run of
  each: the median of the pairs' differences, goal at most + 0.3 s.

Every process runs with its modules' bytecode cached, as an installed package has it: the children get a
temporary `PYTHONPYCACHEPREFIX` (whatever `PYTHONDONTWRITEBYTECODE` says here) and each command one untimed
run first, so that no figure counts compiling sources that a user's install compiled once.

    python benchmarks/time_to_answer.py [--repeats 3] [--libraries rsl_rl sb3 ...] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import alternating
import results as records
from rlrun.libraries import LIBRARIES, load_adapter

RLRUN = str(Path(sys.executable).with_name("rlrun"))
TORCH_OPTIMIZER = "torch.optim.Adam([torch.zeros(1, requires_grad=True)])"
"""What the bare side of a torch library does beyond its imports: build an optimizer, as every torch library's own
training does before its first env step. Its constructor imports `torch._dynamo` (1 to 1.5 s of CPU here), which
rlrun imports before the call's capture: without it the bare side would leave out what the library itself pays."""
JAX_BACKEND = "jax.numpy.zeros(1).block_until_ready()"
"""What the bare side of a JAX library does beyond its imports: start JAX's CPU backend (its XLA client and
devices), which JAX does lazily at a program's first array, and every JAX training does before its first step."""
ERRORS = {
    "a mistyped library": ["train", "--task", "rlrun/CartPole-v1", "--library", "sb"],
    "a mistyped task": ["train", "--task", "rlrun/CartPol-v1"],
    "a mistyped algorithm": ["train", "--task", "rlrun/CartPole-v1", "--library", "sb3", "--algorithm", "ppx"],
    "a mistyped framework": ["train", "--task", "rlrun/CartPole-v1", "--library", "skrl", "--ml_framework", "jx"],
    "a mistyped override key": ["train", "--task", "rlrun/CartPole-v1", "--library", "rsl_rl", "agent.gama=0.9"],
    "a mistyped override key of RL Zoo's entry": [
        "train",
        "--task",
        "CartPole-v1",
        "--library",
        "sb3",
        "agent.gama=0.9",
    ],
    "a mistyped env override key": ["train", "--task", "Pendulum-v1", "--library", "rsl_rl", "env.gravty=9"],
    "a mistyped env override key of a native task": [
        "train",
        "--task",
        "rlrun/Pendulum-v1",
        "--library",
        "rsl_rl",
        "env.gravty=9",
    ],
    "a missing checkpoint": ["play", "--task", "rlrun/CartPole-v1", "--library", "sb3", "--checkpoint", "no.pt"],
}
FIRST_STEP = """
import os, sys, time
import rlrun
from rlrun.envs import register_task
from rlrun.envs.pendulum import PendulumVectorEnv

class FirstStep(PendulumVectorEnv):
    def step(self, actions):
        times = os.times()  # written to a file: rlrun sends the library's console output to the run's console.log
        with open(sys.argv[4], "w") as file:
            file.write(str(times.user + times.system + times.children_user + times.children_system))
        os._exit(0)

register_task("bench/FirstStep-v0", "__main__:FirstStep", max_episode_steps=200, default_library="rsl_rl")
rlrun.train(rlrun.TrainRequest(task="bench/FirstStep-v0", library=sys.argv[1], ml_framework=sys.argv[2],
                               num_envs=4, max_iterations=1, log_root=sys.argv[3]))
"""


def cpu_of(command: list[str], expect: int | None = None) -> float:
    """CPU seconds (user + system) of a fresh process running `command`, its children included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if expect is not None and done.returncode != expect:
        raise SystemExit(f"{command}: exit {done.returncode}, expected {expect}:\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def first_step(library: str, framework: str) -> float:
    """CPU seconds of a fresh `rlrun.train` process up to its first env step."""
    with tempfile.TemporaryDirectory() as root:
        out = Path(root) / "cpu.txt"
        done = subprocess.run(
            [sys.executable, "-c", FIRST_STEP, library, framework, root, str(out)], capture_output=True, text=True
        )
        if done.returncode != 0 or not out.is_file():
            raise SystemExit(f"{library} ({framework}) did not reach its first step:\n{done.stderr[-2000:]}")
        return float(out.read_text())


def paired(library: str, framework: str, repeats: int) -> tuple[list[float], list[float]]:
    """`repeats` pairs of (bare imports, rlrun to the first step), the order alternating from pair to pair, after
    one untimed run of each: neither side pays alone for reading the library's files from a cold disk cache."""
    code = "import " + ", ".join(dict.fromkeys(("torch", *load_adapter(LIBRARIES[library]).IMPORTS[framework])))
    if framework == "torch":
        code += f"; {TORCH_OPTIMIZER}"
    if framework == "jax":
        code += f"; {JAX_BACKEND}"
    bare = [sys.executable, "-c", code]
    cpu_of(bare, expect=0)
    first_step(library, framework)
    pairs = [
        alternating.pair(index, lambda: cpu_of(bare, expect=0), lambda: first_step(library, framework))
        for index in range(repeats)
    ]
    return [imports for imports, _ in pairs], [step for _, step in pairs]


def show(label: str, values: list[float], goal: str = "") -> None:
    print(f"{label:<60} {statistics.median(values):6.2f} s (spread {min(values):.2f}-{max(values):.2f}){goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--libraries", nargs="*", default=None, help="library names (default: every installed)")
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)
    kind = f"min-max of {args.repeats} fresh interpreter{'s' * (args.repeats != 1)} (pairs, for the differences)"
    print(f"load {os.getloadavg()[0]:.2f}; CPU seconds (user + system) of fresh processes")
    with tempfile.TemporaryDirectory() as cache:
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = cache
        measure(args, record, kind)
    print(f"load {os.getloadavg()[0]:.2f}")
    if args.save:
        record.save(args.save)


def measure(args: argparse.Namespace, record: records.Record, kind: str) -> None:
    """Every figure, into `record` and onto stdout."""
    with tempfile.TemporaryDirectory() as root:
        for label, words in ERRORS.items():
            cpu_of([RLRUN, *words, "--log_root", root], expect=2)  # untimed: writes the bytecode
            values = [cpu_of([RLRUN, *words, "--log_root", root], expect=2) for _ in range(args.repeats)]
            show(f"to the error: {label}", values, "  goal <= 0.5 s")
            median = statistics.median(values)
            record.add(f"CPU to the error: {label}", median, unit="s", spread=(min(values), max(values)),
                       spread_kind=kind, goal=("<=", 0.5))  # fmt: skip
    for library in LIBRARIES.values():
        if not library.installed or (args.libraries and library.name not in args.libraries):
            continue
        for framework in load_adapter(library).IMPORTS:
            bare, steps = paired(library.name, framework, args.repeats)
            label = f"{library.name} ({framework})"
            show(f"bare imports: {label}", bare)
            differences = [step - imports for step, imports in zip(steps, bare, strict=True)]
            extra = statistics.median(differences)
            show(f"to the first step: {label}", steps, f"  +{extra:.2f} s over the imports, goal <= +0.3 s")
            spread = (min(differences), max(differences))
            name = f"CPU to the first step over the bare imports: {label}"
            record.add(name, extra, unit="s", spread=spread, spread_kind=kind, goal=("<=", 0.3))


if __name__ == "__main__":
    main()
