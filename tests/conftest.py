"""Suite-wide set-up: the leak detector is on for every rlrun call, and the meddling test task exists.

With `RLRUN_CHECK_LEAKS=1`, any difference the detector finds after a call raises `LeakDetected`
(or is attached to the call's own exception, which the tests check), so every test fails on a leak.
"""

from __future__ import annotations

import os

import pytest

os.environ["RLRUN_CHECK_LEAKS"] = "1"
# onnxruntime's telemetry threads open and close an eventfd and sockets every few seconds once it is
# imported; the leak detector's fd census would see them come and go in unrelated tests.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
# Compiled env steps (rlrun.envs.kernels) are built once into this checkout's own cache, not the user's:
# a clean clone builds each kernel once (about 20-40 s on two cores), a second run of the suite reuses it.
os.environ.setdefault("RLRUN_CACHE_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), ".cache", "rlrun"))

import support

support.register()


@pytest.fixture
def log_root(tmp_path):
    """A fresh directory for run directories."""
    root = tmp_path / "logs"
    return root


def pytest_collection_modifyitems(config, items):
    """Run the slow tests (learning, subprocesses) last, so quick failures show first."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)
