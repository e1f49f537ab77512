"""Ray connected for ``hetero serve --engine ray``: to a running cluster's address, or to a local instance
this run starts (declaring the plan's devices, in a folder of its own) and stops again.

    with connected(None, plan, replicas=1, starting=signals.deferred) as local:
        ...                          # ray.init has returned; on leaving, ray.shutdown and the folder removed

ray.init replaces the process's SIGTERM handler with its own (which raises SystemExit(15) wherever the
start has got to, leaving the processes it started), and its core worker installs a native one: while it
runs, ``connected`` keeps Ray from setting its Python handler, so the caller's stays in place (Ray's native
handler passes the signal on to it) and, through ``starting``, holds a stop back until ray.init has
returned and ray.shutdown can end everything it started.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ray
import ray._private.utils

from ...errors import ServeError
from ...placement.partition import Plan
from .ray_stages import GPU_FAMILIES, resource_name

log = logging.getLogger("hetero_cli")

#: how long a TCP connection to --address may take before the cluster counts as unreachable, in seconds
CONNECT_TIMEOUT_S = 5.0
#: the longest temporary folder a local Ray instance is started under (else /tmp): its socket paths grow
#: about 60 bytes longer, and a Unix socket's path is at most 107
SHORT_TEMP_ROOT = 40
#: what a local instance's processes start with, beyond this process's environment (which holds
#: engines.ENVIRONMENT's Serve throughput mode): no token authentication, since it listens on 127.0.0.1 only,
#: and ray.init would otherwise write a token file into ~/.ray, which outlives the run and which a later
#: ``ray start`` reads
LOCAL_ENVIRONMENT = {"RAY_AUTH_MODE": "disabled"}


@contextlib.contextmanager
def connected(
    address: str | None,
    plan: Plan,
    replicas: int = 1,
    starting: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
) -> Iterator[bool]:
    """Ray connected for the block: to ``address``, else a local instance declaring the plan's devices
    (in a folder of its own, removed afterwards), ray.init run within ``starting()`` with Ray's own SIGTERM
    handler kept out; yields whether it started a local instance (which ends with the block). Nothing is
    done where Ray is connected already. ServeError where neither can be had."""
    if ray.is_initialized():
        yield False
        return
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    with contextlib.ExitStack() as stack:
        if address is None:
            kwargs.update(_local_instance(plan, replicas))
            stack.callback(shutil.rmtree, kwargs["_temp_dir"], ignore_errors=True)
        else:
            check_reachable(address)
            kwargs["address"] = address
        try:
            with starting(), _ray_keeps_the_signal_handlers():
                stack.callback(ray.shutdown)  # what ray.init started, even where it fails part-way
                with _environment(LOCAL_ENVIRONMENT if address is None else {}):
                    ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            if address is None:
                raise ServeError(f"cannot start a local Ray instance: {first_line(exc)}") from None
            raise ServeError(unreachable(address, exc)) from None
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # its INFO lines say what hetero says
        yield address is None


@contextlib.contextmanager
def _ray_keeps_the_signal_handlers() -> Iterator[None]:
    """While the block runs, ray._private.utils.set_sigterm_handler (through which ray.init sets a handler
    that raises SystemExit(15) wherever the start has got to) does nothing; where a Ray release has no such
    function, nothing changes (its handler is replaced once ray.init returns)."""
    original = getattr(ray._private.utils, "set_sigterm_handler", None)
    if original is None:
        log.debug("this Ray has no set_sigterm_handler: its SIGTERM handler stands while ray.init runs")
        yield
        return
    ray._private.utils.set_sigterm_handler = _keep_handler
    try:
        yield
    finally:
        ray._private.utils.set_sigterm_handler = original


def _keep_handler(handler: Any) -> None:
    """In place of Ray's set_sigterm_handler: the handler in place stays."""
    log.debug("kept this process's SIGTERM handler in place of Ray's %r", handler)


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in os.environ while the block runs (while Ray starts: its processes inherit them)."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _local_instance(plan: Plan, replicas: int) -> dict[str, Any]:
    """ray.init's arguments for a local instance of this run's own: "local" (never one a ``ray start``
    left for ray.init() to find), one unit of each of the plan's non-GPU devices declared as a resource
    (its stages share it: ray_stages.plan_options), enough CPUs for ``replicas`` replicas of every stage,
    and a temporary folder short enough for Ray's socket paths (at most 107 bytes)."""
    devices = {resource_name(d) for d in plan.devices} - {"CPU", *GPU_FAMILIES}
    root = tempfile.gettempdir()
    folder = tempfile.mkdtemp(prefix="hetero-ray-", dir=root if len(root) <= SHORT_TEMP_ROOT else "/tmp")
    return {
        "address": "local",
        "include_dashboard": False,
        "_node_ip_address": "127.0.0.1",
        "resources": dict.fromkeys(sorted(devices), 1.0),
        "num_cpus": max(os.cpu_count() or 1, replicas * len(plan.subgraphs)),
        "_temp_dir": folder,
    }


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its class name where it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_reachable(address: str) -> None:
    """ServeError unless a TCP connection to ``address`` (host:port) opens within CONNECT_TIMEOUT_S."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ServeError(
            f"--address {address!r} is no host:port: give the address `ray start --head` printed"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ServeError(unreachable(address, exc)) from None


def unreachable(address: str, exc: BaseException) -> str:
    """The message for a cluster at ``address`` that could not be reached (``exc`` says why)."""
    reason = getattr(exc, "strerror", None) or first_line(exc)
    return (
        f"cannot reach the Ray cluster at {address} ({reason}): start one with `ray start --head --port=PORT` "
        "and give its address, or leave --address out to start a local Ray instance"
    )


def check_port(host: str, port: int) -> None:
    """ServeError where ``host``:``port`` is in use on this machine (the proxy would retry it forever)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ServeError(
                f"cannot listen on {host}:{port} ({exc.strerror}): give another --port or --host"
            ) from None
