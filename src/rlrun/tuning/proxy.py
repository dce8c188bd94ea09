"""A SQLite study served to the worker slots of a Ray cluster through Optuna's gRPC storage proxy.

A SQLite `study.db` is a file on the driver's disk, which the slots on other nodes cannot open. For a tune on a Ray
cluster of several nodes, the driver serves it: `serve` starts a child process that opens the study's RDB storage
and runs `optuna.storages.run_grpc_proxy_server` on a free port of every interface; the slots open
`grpc://<driver's node address>:<port>` (`optuna.storages.GrpcStorageProxy`, `rlrun.tuning.storage.open_storage`).
The driver itself keeps reading the file directly. `stop` ends the child (SIGTERM, then SIGKILL) when the slots are
done. The proxy is unauthenticated, as Optuna's is: any process that reaches the port reads and writes the study
while the tune runs.

Without the file lock beside the database, slots on different nodes may ask a trial at the same moment at the end
of the study; the one asked later fails itself as interrupted (`rlrun.tuning.storage.surplus`), so the count stays
`n_trials`. Optuna's heartbeats are not served by the proxy: a slot records `rlrun_beat` on its trial instead.

When the proxy cannot start, `serve` says so in one line that quotes the child's last line and names the fix:
`MissingDependency` when it lacks grpcio or protobuf (checked here before the child starts, and read from its
last line), else `ProxyFailed` (a failure of this machine, not of the request). Either way the child is ended
and reaped first.

Run as `python -m rlrun.tuning.proxy <rdb url> <port>` (the child).
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO

from rlrun.errors import Failure, MissingDependency

START_S = 60.0
"""How long the driver waits for the proxy to listen."""

GRPC_MODULES = ("grpc",)
"""The modules the proxy needs that a Ray installation may lack, checked here before the child starts (protobuf,
under the `google` namespace, is not imported here to check it: the child's last line names it if missing)."""

LINE_CHARS = 300
"""The most characters of the child's last line a message quotes."""

_INSTALL = "pip install grpcio protobuf (Optuna's gRPC storage proxy needs them)"
_NO_PROXY = (
    "or pass --storage with a database server every node reaches (postgresql://..., mysql://...), which the slots "
    "open themselves, with no proxy"
)
_MISSING = re.compile(r"(?:No module named|Tried to import) '((?:grpc|google)[\w.]*)'")


class ProxyFailed(Failure):
    """The study's gRPC proxy did not start or did not listen: a failure (not a user error), whose message is one
    line that quotes the child's last line and names what to do."""


@dataclass
class Proxy:
    process: subprocess.Popen[bytes]
    url: str
    """What the slots open: `grpc://host:port`."""
    log: IO[bytes] | None = None
    """The child's stderr (a temporary file: a pipe that nobody reads could fill and stop the child)."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def _host() -> str:
    """This node's address as the other nodes of the connected Ray cluster reach it (Ray's own pick)."""
    import ray

    return str(ray.util.get_node_ip_address())


def _command(url: str, port: int) -> list[str]:
    """The child's command line."""
    return [sys.executable, "-m", "rlrun.tuning.proxy", url, str(port)]


def serve(url: str) -> Proxy:
    """Start the proxy of the RDB storage at `url` and wait until it listens, named by this node's address as the
    other nodes reach it. Raises `MissingDependency` when grpcio or protobuf is missing, `ProxyFailed` when the
    child ends at start or does not listen within `START_S` (each one line, the child ended and reaped)."""
    for module in GRPC_MODULES:
        if importlib.util.find_spec(module) is None:
            raise MissingDependency(
                f"serving the SQLite study {url!r} to the other nodes of the Ray cluster needs Optuna's gRPC proxy, "
                f"and {module!r} is not installed: {_INSTALL}, {_NO_PROXY}."
            )
    host = _host()
    port = _free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - the proxy owns it until `stop`
    try:
        process = subprocess.Popen(_command(url, port), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    except BaseException:
        log.close()
        raise
    proxy = Proxy(process, f"grpc://{host}:{port}", log)
    try:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise _failure(proxy, url, f"ended at start (exit code {process.returncode})")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return proxy
            time.sleep(0.1)
        raise _failure(proxy, url, f"did not listen on port {port} within {START_S:g} s")
    except BaseException:  # the failures above, and a Ctrl-C while it waits: the child goes too
        stop(proxy)
        raise


def _failure(proxy: Proxy, url: str, what: str) -> Exception:
    """The one-line error of a proxy that `what`, quoting the child's last line of stderr."""
    line = _last_line(proxy.log)
    said = f": {line!r}" if line else " (it wrote nothing on stderr)"
    head = f"the gRPC proxy that serves the SQLite study {url!r} to the other nodes of the Ray cluster {what}{said}"
    missing = _MISSING.search(line)
    if missing is not None:
        return MissingDependency(f"{head}; {missing.group(1)!r} is not installed: {_INSTALL}, {_NO_PROXY}.")
    return ProxyFailed(f"{head}; fix what that line says, {_NO_PROXY}.")


def _last_line(log: IO[bytes] | None) -> str:
    """The last line the child wrote on stderr, at most `LINE_CHARS` long ('' when none)."""
    if log is None:
        return ""
    try:
        log.flush()
        size = log.seek(0, 2)
        log.seek(max(0, size - 65536))
        text = log.read().decode(errors="replace")
    except (OSError, ValueError):
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= LINE_CHARS else last[: LINE_CHARS - 3] + "..."


def stop(proxy: Proxy) -> None:
    """End the proxy's process and reap it."""
    process = proxy.process
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if proxy.log is not None:
        proxy.log.close()


def _main(url: str, port: int) -> None:
    import warnings

    import optuna

    from rlrun.tuning.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    storage = open_storage(url, heartbeat_s=60, grace_s=120)
    optuna.storages.run_grpc_proxy_server(storage, host="0.0.0.0", port=port)


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]))
