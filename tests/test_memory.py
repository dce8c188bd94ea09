"""Memory over repeated calls: a process that trains again and again keeps its size.

The full figure for every library (50 calls each) is `benchmarks/memory_growth.py`, too slow for the
suite; this runs its SKRL-on-JAX row with fewer calls: a call that kept its agents' traces alive would grow the
process by tens of MB and thousands of objects each time (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "memory_growth.py"
MAX_MB_PER_CALL = 8.0
"""RSS swings by tens of MB between calls (the allocator returns memory in steps), so the bound on the
fitted slope is loose; the growth it guards against is tens of MB per call."""
MAX_OBJECTS_PER_CALL = 1_000
"""Objects the garbage collector tracks, a steadier signal: a few hundred per call remain (small caches that
stop growing), against thousands when every call's agent stays alive."""


@pytest.mark.slow
def test_skrl_jax_training_again_and_again_does_not_grow():
    pytest.importorskip("jax")
    completed = subprocess.run(
        [sys.executable, str(BENCHMARK), "--libraries", "skrl-jax", "--calls", "15", "--warmup", "5", "--json"],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr  # 1: over the benchmark's 5% limit, judged below
    result = json.loads(completed.stdout.splitlines()[-1])
    assert result["objects_per_call"] < MAX_OBJECTS_PER_CALL, result
    assert result["slope_mb_per_call"] < MAX_MB_PER_CALL, result
