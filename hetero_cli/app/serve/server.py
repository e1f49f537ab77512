"""Serving an ASGI app with uvicorn on a socket bound beforehand: ``bind`` claims the address (a port in use
is a ServeError before anything is compiled), ``serve`` runs until SIGTERM or Ctrl-C and returns once the
requests in flight are answered; ``serving`` runs it on a thread, for tests and benchmarks.

    sock = bind("127.0.0.1", 8000)
    serve(make_app(backend, metrics, max_body_bytes), sock)      # returns after SIGTERM / Ctrl-C
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from ...errors import ServeError

#: how long ``serving`` waits for its server to start or stop, in seconds
THREAD_WAIT_S = 30.0


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (port 0: any free one; read it with
    ``sock.getsockname()[1]``). Raises ServeError for a port in use or an address this machine cannot
    listen on, saying what to give instead."""
    if not 0 <= port <= 65535:
        raise ServeError(f"--port {port} is no TCP port: give one from 1 to 65535 (0: any free port)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(
            f"--host {host!r} is no address of this machine ({exc.strerror}): give one, e.g. 127.0.0.1"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(
                f"port {port} on {host} is in use by another program: give another --port (0: any free one)"
            ) from None
        raise ServeError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}: give another --host or --port"
        ) from None
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, but a SIGTERM or Ctrl-C that stops it gracefully is not raised again afterwards
    (uvicorn re-raises it, which would end the command with the signal's status rather than 0)."""

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.should_exit:
            self.force_exit = True  # a second signal: stop without waiting for the requests in flight
        self.should_exit = True


def make_server(app: Any, *, log_level: str = "warning", graceful_s: float | None = None) -> uvicorn.Server:
    """A uvicorn server for ``app`` that, once told to stop, waits up to ``graceful_s`` seconds (None:
    until they are done) for the requests in flight."""
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=graceful_s,
        lifespan="off",
    )
    return _Server(config)


def serve(app: Any, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Serve ``app`` on ``sock`` (from ``bind``) until SIGTERM or Ctrl-C (on the main thread), then answer
    the requests in flight and return; the socket is closed."""
    server = make_server(app, log_level=log_level)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


@contextlib.contextmanager
def serving(app: Any, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` on a thread for the ``with`` block; yields its base URL (``http://127.0.0.1:PORT``)
    and stops it (requests in flight answered) on leaving. ServeError for an address in use, RuntimeError
    when the server does not start within THREAD_WAIT_S."""
    sock = bind(host, port)
    server = make_server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="hetero-serve", daemon=True)
    thread.start()
    try:
        if not _wait(lambda: server.started or not thread.is_alive()) or not server.started:
            raise RuntimeError("the server did not start: run with log_level='info' to see why")
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(THREAD_WAIT_S)
        sock.close()


def _wait(condition: Any) -> bool:
    event = threading.Event()
    for _ in range(int(THREAD_WAIT_S * 100)):
        if condition():
            return True
        event.wait(0.01)
    return bool(condition())
