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

Run as `python -m rlrun.tuning.proxy <rdb url> <port>` (the child).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

START_S = 60.0
"""How long the driver waits for the proxy to listen."""


@dataclass
class Proxy:
    process: subprocess.Popen[bytes]
    url: str
    """What the slots open: `grpc://host:port`."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def serve(url: str) -> Proxy:
    """Start the proxy of the RDB storage at `url` and wait until it listens, named by this node's address as the
    other nodes of the connected Ray cluster reach it (Ray's own pick). Raises `RuntimeError` with the child's last
    line when it does not start."""
    import ray

    host = ray.util.get_node_ip_address()
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "rlrun.tuning.proxy", url, str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    proxy = Proxy(process, f"grpc://{host}:{port}")
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            lines = (process.stderr.read() if process.stderr else b"").decode(errors="replace").strip().splitlines()
            stop(proxy)
            raise RuntimeError(f"the study's gRPC proxy ended at start: {lines[-1] if lines else process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return proxy
        time.sleep(0.1)
    stop(proxy)
    raise RuntimeError(f"the study's gRPC proxy did not listen on port {port} within {START_S:g} s")


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
    if process.stderr is not None:
        process.stderr.close()


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
