"""A SIGTERM that stops a call made from Python reaches the caller's own disposition once rlrun has saved and
restored: by default the caller's process ends with it; a handler of the caller's runs, once."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import os, signal, sys, threading, time
from pathlib import Path
import rlrun
from rlrun.errors import TrainingStopped

log_root, how, handler = sys.argv[1], sys.argv[2], sys.argv[3]
heard = []
if handler == "mine":
    signal.signal(signal.SIGTERM, lambda number, frame: heard.append(number))
words = ["--task", "rlrun/Pendulum-v1", "--library", "rsl_rl", "--num_envs", "4", "--max_iterations", "100000",
         "--log_root", log_root, "agent.num_steps_per_env=8", "agent.actor.hidden_dims=[16]",
         "agent.critic.hidden_dims=[16]"]

def terminate_once_training():
    while not any(Path(log_root).rglob("metrics.csv")):
        time.sleep(0.05)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)

print("before", flush=True)
if how == "api":
    sent = []
    def on_iteration(row):
        if row.iteration == 3 and not sent:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))
    try:
        rlrun.train(rlrun.TrainRequest(task="rlrun/Pendulum-v1", library="rsl_rl", num_envs=4, max_iterations=100000,
                    log_root=log_root, overrides=tuple(words[-3:])), on_iteration=on_iteration)
    except TrainingStopped as stop:
        print("stopped", stop.reason, flush=True)
else:
    threading.Thread(target=terminate_once_training, daemon=True).start()
    print("code", rlrun.main(["train", *words]), flush=True)
print("after", heard, signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, flush=True)
"""


def run(tmp_path: Path, how: str, handler: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "logs"), how, handler],
        capture_output=True,
        text=True,
        timeout=300,
    )


def status(tmp_path: Path) -> str:
    (manifest,) = (tmp_path / "logs").rglob("run.json")
    return json.loads(manifest.read_text())["status"]


@pytest.mark.parametrize("how", ["api", "main"])
def test_by_default_the_callers_process_ends_with_the_sigterm_after_the_run_is_saved(how, tmp_path):
    done = run(tmp_path, how, "default")
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert done.stdout.split() == ["before"]  # the script did not carry on to its next line
    assert status(tmp_path) == "terminated"


@pytest.mark.parametrize("how", ["api", "main"])
def test_a_handler_of_the_callers_hears_the_sigterm_once_and_the_script_goes_on(how, tmp_path):
    done = run(tmp_path, how, "mine")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "before" and lines[-1] == f"after [{int(signal.SIGTERM)}] True"
    assert lines[1] == ("stopped terminated" if how == "api" else "code 143")
    assert status(tmp_path) == "terminated"
