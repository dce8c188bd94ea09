"""Trials per minute: an inline `rlrun tune` study against one `rlrun train` process per trial, same budget.

The study's trials are hermetic calls in this warm process; the reference runs the same trials (the same
sampled hyperparameters, read back from the study) as one fresh `rlrun train` interpreter each, one after
another, as a tuner that starts a process per trial does (RL Zoo, most Ray Tune setups). Pruning is off so that
both sides train every trial to its full budget. The sides alternate over `--rounds` rounds; the script prints
trials per minute for each and their ratio (in-process / processes), with the machine's load.

    python benchmarks/tune_trials.py [--trials 8] [--rounds 2] [--iterations 4] [--save [PATH]]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

import results as records
import rlrun

TASK = "rlrun/CartPole-v1"
SHORT = ("agent.n_steps=8", "agent.batch_size=16", "agent.policy_kwargs.net_arch=[16,16]")
SPACE = {"agent.learning_rate": "loguniform(1e-4, 1e-2)", "agent.n_epochs": "int(1, 10)"}


def inline(trials: int, iterations: int, out: Path) -> tuple[float, list[dict]]:
    """Run the study; return its wall time and each trial's sampled params."""
    start = time.perf_counter()
    result = rlrun.tune(
        rlrun.TuneRequest(
            task=TASK,
            library="sb3",
            num_envs=4,
            iterations=iterations,
            n_trials=trials,
            overrides=SHORT,
            search_space=SPACE,
            pruner="none",
            out=str(out),
            report=False,
        )
    )
    wall = time.perf_counter() - start
    storage = optuna.storages.RDBStorage(result.storage)
    try:
        params = [trial.params for trial in optuna.load_study(study_name=result.study, storage=storage).get_trials()]
    finally:
        storage.remove_session()
        storage.engine.dispose()
    return wall, params


def processes(params: list[dict], iterations: int, root: Path) -> float:
    start = time.perf_counter()
    for index, values in enumerate(params):
        searched = [f"{key}={value}" for key, value in values.items()]
        command = [sys.executable, "-m", "rlrun", "train", "--task", TASK, "--library", "sb3", "--seed", "0",
                   "--max_iterations", str(iterations), "--num_envs", "4", "--log_root", str(root),
                   "--run_name", f"trial{index}", "--json", *SHORT, *searched]  # fmt: skip
        subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=4)
    records.add_argument(parser)
    args = parser.parse_args()
    record = records.Record.start(__file__)
    print(f"{args.trials} SB3 trials of {TASK}, {args.iterations} iterations each; load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        inline(1, args.iterations, root / "warm-up")  # imports, as a notebook would have paid them
        ratios, rates = [], []
        for round_ in range(args.rounds):
            study_s, params = inline(args.trials, args.iterations, root / f"study{round_}")
            loop_s = processes(params, args.iterations, root / f"loop{round_}")
            in_process, per_process = 60 * len(params) / study_s, 60 * len(params) / loop_s
            ratios.append(in_process / per_process)
            rates.append((in_process, per_process))
            print(
                f"round {round_}: inline study {in_process:6.1f} trials/min ({study_s:.1f} s), "
                f"one process per trial {per_process:6.1f} trials/min ({loop_s:.1f} s), ratio {ratios[-1]:.2f}x"
            )
    print(
        f"ratio (inline / processes): median {statistics.median(ratios):.2f}x, "
        f"range {min(ratios):.2f}-{max(ratios):.2f}x; load {os.getloadavg()[0]:.2f}"
    )
    if args.save:
        record.add(
            f"trials per minute, inline study / one process per trial ({args.trials} SB3 trials of {TASK}, "
            f"{args.iterations} iterations each)",
            statistics.median(ratios),
            unit="x",
            digits=2,
            spread=(min(ratios), max(ratios)),
            spread_kind=f"min-max of {args.rounds} round{'s' * (args.rounds != 1)}",
            note=f"inline {statistics.median(rate for rate, _ in rates):.1f} trials/min, one process per trial "
            f"{statistics.median(rate for _, rate in rates):.1f} trials/min",
        )
        record.save(args.save)


if __name__ == "__main__":
    main()
