"""The first call in a fresh process leaves the caller's random streams and warning filters as they were.

The first call of a library imports it, and importing SB3 or SKRL's JAX modules draws from `random` and
NumPy's global generator, while rl_games' import raises DeprecationWarnings; the scope's import phase keeps
both from reaching the caller (see `rlrun.hermetic.scope`). Each case is a fresh interpreter that seeds its
generators, turns every warning into an error, and trains once through the public API.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlrun.libraries import LIBRARIES
from support import CONTRACT_CASES

CALLER = """
import json, random, sys, warnings

import numpy as np
import torch


def seed():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


def draws():
    return [random.random(), float(np.random.random()), float(torch.rand(1))]


seed()
expected = draws()  # what the caller draws next when no call happens in between
seed()
warnings.simplefilter("error")
for message in sys.argv[2:]:  # the caller's own exceptions to its rule
    warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
filters, contents = warnings.filters, list(warnings.filters)

import rlrun

rlrun.train(rlrun.TrainRequest(**json.loads(sys.argv[1])))
print(json.dumps({
    "draws": draws(),
    "expected": expected,
    "filters": warnings.filters is filters and warnings.filters == contents,
    "added": [repr(entry) for entry in warnings.filters if entry not in contents],
}))
"""

CASES = {name: CONTRACT_CASES[name][0] for name in ("rsl_rl", "skrl", "skrl_jax", "sb3", "rl_games")}
IGNORED_BY_THE_CALLER = {
    # rl_games scripts its models with `torch.jit.script` in every call, which torch deprecates: a warning of the
    # call's own, under the caller's filters like any other. The one its import raises (`torch.jit.script_method`)
    # is the import phase's, and this filter does not cover it.
    "rl_games": ["`torch.jit.script` is deprecated"],
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_the_first_call_in_a_process_leaves_the_callers_streams_and_filters(case, tmp_path):
    arguments = CASES[case]
    pytest.importorskip(LIBRARIES[arguments["library"]].import_name)
    if arguments.get("ml_framework") == "jax":
        pytest.importorskip("jax")
    request = {**arguments, "task": "rlrun/Pendulum-v1", "max_iterations": 1, "log_root": str(tmp_path)}
    request["overrides"] = list(request["overrides"])
    completed = subprocess.run(
        [sys.executable, "-c", CALLER, json.dumps(request), *IGNORED_BY_THE_CALLER.get(case, [])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    outcome = json.loads(completed.stdout.splitlines()[-1])
    assert outcome["draws"] == outcome["expected"]  # random, NumPy's global generator, torch's CPU generator
    assert outcome["filters"], f"the call left warning filters behind: {outcome['added']}"
