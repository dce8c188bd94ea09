"""`rlrun.tuning.proxy.serve` when Optuna's gRPC proxy cannot start: one line that quotes the child's last line and
names the fix, and no process left behind. The child is a stand-in (`_command`) that fails at once or never
listens; the Ray node address (`_host`) is a constant, so no cluster is needed."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from rlrun.errors import MissingDependency, UserError
from rlrun.tuning import proxy

URL = "sqlite:////data/tune/study.db"


@pytest.fixture
def started(monkeypatch) -> list[subprocess.Popen]:
    """The processes `serve` starts (recorded), with this node's address a constant."""
    monkeypatch.setattr(proxy, "_host", lambda: "10.0.0.7")
    processes: list[subprocess.Popen] = []
    popen = subprocess.Popen

    def recording(*args, **kwargs):
        process = popen(*args, **kwargs)
        processes.append(process)
        return process

    monkeypatch.setattr(proxy.subprocess, "Popen", recording)
    return processes


def child(monkeypatch, code: str) -> None:
    """Make the proxy's child `python -c code`."""
    monkeypatch.setattr(proxy, "_command", lambda url, port: [sys.executable, "-c", code])


def assert_none_left(processes: list[subprocess.Popen], children_before: set[int]) -> None:
    assert processes, "serve started no child"
    for process in processes:
        assert process.returncode is not None, "the child was not reaped"
    left = {child.pid for child in psutil.Process().children(recursive=True)} - children_before
    assert not left, f"processes left behind: {left}"


def children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


def test_a_proxy_that_ends_at_start_is_one_line_quoting_its_last_line_and_naming_the_fix(monkeypatch, started):
    before = children()
    child(
        monkeypatch,
        "import sys; print('opening the study', file=sys.stderr); "
        "sys.exit('sqlite3.OperationalError: unable to open database file')",
    )
    with pytest.raises(proxy.ProxyFailed) as failed:
        proxy.serve(URL)
    message = str(failed.value)
    assert not isinstance(failed.value, UserError)  # a failure of this machine (exit 1), not the request's
    assert "\n" not in message
    assert message.startswith(f"the gRPC proxy that serves the SQLite study {URL!r} to the other nodes")
    assert "ended at start (exit code 1): 'sqlite3.OperationalError: unable to open database file'" in message
    assert "pass --storage with a database server every node reaches" in message
    assert_none_left(started, before)


def test_a_child_without_grpc_names_the_package_to_install(monkeypatch, started):
    before = children()
    child(
        monkeypatch,
        "import sys; sys.exit(\"ImportError: Tried to import 'grpc' but failed. Please make sure that the package "
        "is installed correctly to use this feature. Actual error: No module named 'grpc'.\")",
    )
    with pytest.raises(MissingDependency) as missing:
        proxy.serve(URL)
    message = str(missing.value)
    assert "\n" not in message
    assert "Tried to import 'grpc' but failed" in message  # the child's line, quoted
    assert "'grpc' is not installed: pip install grpcio protobuf" in message
    assert "--storage" in message
    assert_none_left(started, before)


def test_a_child_without_protobuf_names_the_package_to_install(monkeypatch, started):
    child(monkeypatch, "import sys; sys.exit(\"ModuleNotFoundError: No module named 'google.protobuf'\")")
    with pytest.raises(MissingDependency, match=r"'google\.protobuf' is not installed: pip install grpcio protobuf"):
        proxy.serve(URL)


def test_grpc_missing_here_is_said_before_any_child_starts(monkeypatch, started):
    monkeypatch.setattr(proxy, "GRPC_MODULES", ("rlrun_no_such_grpc_module",))
    with pytest.raises(MissingDependency, match=r"'rlrun_no_such_grpc_module' is not installed: pip install grpcio"):
        proxy.serve(URL)
    assert started == []


def test_a_proxy_that_never_listens_is_ended_and_said_in_one_line(monkeypatch, started):
    before = children()
    monkeypatch.setattr(proxy, "START_S", 0.5)
    child(monkeypatch, "import sys, time; print('still opening', file=sys.stderr, flush=True); time.sleep(60)")
    began = time.monotonic()
    with pytest.raises(proxy.ProxyFailed, match=r"did not listen on port \d+ within 0\.5 s: 'still opening'; fix"):
        proxy.serve(URL)
    assert time.monotonic() - began < 15
    assert_none_left(started, before)


def test_a_silent_child_is_said_to_have_written_nothing(monkeypatch, started):
    child(monkeypatch, "raise SystemExit(3)")
    with pytest.raises(proxy.ProxyFailed, match=r"ended at start \(exit code 3\) \(it wrote nothing on stderr\)"):
        proxy.serve(URL)
