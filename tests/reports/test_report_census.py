"""The first report a process draws leaves it as it found it: matplotlib's font files open with the import."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("rliable")  # the report is drawn with rliable and matplotlib
pytest.importorskip("matplotlib")


def test_the_first_report_of_a_fresh_process_is_census_clean(bench_out):
    env = {**os.environ, "RLRUN_CHECK_LEAKS": "1", "ORT_DISABLE_TELEMETRY": "1"}
    done = subprocess.run(
        [sys.executable, "-c", "import sys, rlrun; sys.exit(rlrun.main(['report', sys.argv[1]]))", str(bench_out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "left global state changed" not in done.stderr
    assert (bench_out / "report.md").is_file()
