"""A two-node Ray cluster on this machine, for the Ray engine's tests and bench/serve_ray.py.

    with two_node_cluster() as cluster:
        cluster.address             # "127.0.0.1:PORT", for ray.init / hetero serve --address

The head declares the custom resource OPENVINO and no CPU (so only stages that ask for OPENVINO, and Serve's
own actors, which ask for no CPU, run there); the second node declares CPUs and no OPENVINO. Every port is
a free one and the temporary folder is the cluster's own, so it collides with no other Ray on the machine.
Each ``ray start`` runs in a session of its own: leaving the block ends those two process groups (SIGTERM,
then SIGKILL), never any other Ray process (``ray stop`` would end every Ray of this user).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hetero_cli.app.serve.engines import THROUGHPUT_MODE

#: how long the cluster's processes get to end after SIGTERM before SIGKILL, in seconds
STOP_GRACE_S = 5.0
#: how often a node's ``ray start`` is tried
START_ATTEMPTS = 2
#: the object store of each node, in bytes (Ray's minimum is 75 MiB): the tests pass small tensors
OBJECT_STORE_BYTES = 100 * 1024 * 1024


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Cluster:
    """A running cluster: ``address`` for ray.init, the process groups it started, its folder."""

    address: str
    folder: Path
    groups: list[int] = field(default_factory=list)

    def stop(self) -> None:
        """End every process of the two ``ray start`` sessions, and nothing else."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for group in self.groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
            deadline = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < deadline and any(_alive(g) for g in self.groups):
                time.sleep(0.1)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _ray_start(args: list[str], folder: Path, extra: Mapping[str, str]) -> subprocess.Popen[bytes]:
    ray = Path(sys.executable).with_name("ray")
    # no token authentication: every process is on 127.0.0.1, and a token file some other Ray left in ~/.ray
    # would otherwise be read by one node and not another; Serve's throughput mode, as docs/serving.md
    # tells a cluster's nodes to start
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
        THROUGHPUT_MODE: os.environ.get(THROUGHPUT_MODE, "1"),
        **extra,
    }
    log = (folder / f"start-{len(list(folder.glob('start-*')))}.log").open("wb")
    return subprocess.Popen(
        [str(ray), "start", *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def _start_node(cluster: Cluster, args: list[str], extra: Mapping[str, str]) -> None:
    """``ray start args`` (``extra`` in its environment), tried again once where it fails: Ray gives a node
    30 s to register, which a loaded machine can miss. RuntimeError with the log's tail where it fails
    twice."""
    for _ in range(START_ATTEMPTS):
        process = _ray_start(args, cluster.folder, extra)
        if process.wait(timeout=180) == 0:
            cluster.groups.append(process.pid)
            return
        Cluster(cluster.address, cluster.folder, [process.pid]).stop()  # what the failed start left
    logs = "".join(p.read_text(errors="replace") for p in sorted(cluster.folder.glob("start-*.log")))
    raise RuntimeError(f"ray start {' '.join(args)} failed {START_ATTEMPTS} times:\n{logs[-3000:]}")


@contextlib.contextmanager
def two_node_cluster(cpus: int = 2, env: Mapping[str, str] | None = None) -> Iterator[Cluster]:
    """A head node declaring {"OPENVINO": 1} and no CPU, and a node declaring ``cpus`` CPUs, their processes
    started with ``env`` in their environment besides this one's; stopped on leaving. RuntimeError (with
    the log's tail) where a node does not start."""
    folder = Path(tempfile.mkdtemp(prefix="hray-", dir="/tmp"))  # short: Ray's socket paths must stay short
    port = free_port()
    cluster = Cluster(f"127.0.0.1:{port}", folder)

    def common() -> list[str]:  # each node its own ports
        return [
            "--node-ip-address=127.0.0.1",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--disable-usage-stats",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--metrics-export-port={free_port()}",
        ]

    head = [
        "--head",
        f"--port={port}",
        f"--temp-dir={folder}",
        "--num-cpus=0",
        "--resources=" + json.dumps({"OPENVINO": 1}),
        "--include-dashboard=false",
        f"--dashboard-port={free_port()}",
        f"--ray-client-server-port={free_port()}",
        *common(),
    ]
    worker = [f"--address={cluster.address}", f"--num-cpus={cpus}", *common()]
    try:
        for args in (head, worker):
            _start_node(cluster, args, env or {})
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
