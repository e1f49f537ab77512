"""Serving an ASGI app with uvicorn on a socket bound beforehand: ``bind`` claims the address (a port in use
is a ServeError before anything is compiled), ``serve`` runs until SIGTERM or Ctrl-C and returns once the
requests in flight are answered or their time is up; ``serving`` runs it on a thread, for tests and
benchmarks.

    sock = bind("127.0.0.1", 8000)
    serve(make_app(backend, metrics, max_body_bytes), sock)      # returns after SIGTERM / Ctrl-C
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from ...errors import ServeError
from .head_guard import head_guarded

#: how long ``serving`` waits for its server to start or stop, in seconds
THREAD_WAIT_S = 30.0
#: how long a stop waits, at most, for the answers already made to be sent, in seconds
FLUSH_S = 5.0


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
    (uvicorn re-raises it, which would end the command with the signal's status rather than 0); ``on_stop``
    is called on the event loop when its stop begins, and once the requests in flight have had their
    time, the connections left (a client that stalls) are closed, so that nothing waits on them."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_stop: Callable[[], None] | None = None,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.on_stop = on_stop
        self.on_started = on_started
        self.closed_unfinished = 0  # connections the stop closed with a request or an answer on them

    def handle_exit(self, sig: int, frame: Any) -> None:
        if self.should_exit:
            self.force_exit = True  # a second signal: stop without waiting for the requests in flight
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit and self.on_started is not None:
            self.on_started()  # it listens, and SIGTERM is this server's to take now

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_stop is not None:
            self.on_stop()
        try:
            await super().shutdown(sockets)
        finally:
            await self._flushed(FLUSH_S)
            for connection in list(self.server_state.connections):
                transport = getattr(connection, "transport", None)
                if transport is not None:
                    self.closed_unfinished += 1
                    transport.abort()

    async def _flushed(self, limit_s: float) -> None:
        """Wait up to ``limit_s`` for the connections closing after their answer to send what they hold
        (a second signal does not wait for them, but an answer made is not to be cut in half)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + limit_s
        while loop.time() < until and any(
            getattr(c, "transport", None) is not None and c.transport.is_closing()
            for c in self.server_state.connections
        ):
            await asyncio.sleep(0.02)


def make_server(
    app: Any,
    *,
    log_level: str = "warning",
    graceful_s: float | None = None,
    on_stop: Callable[[], None] | None = None,
    on_started: Callable[[], None] | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``app`` that calls ``on_started`` (on its event loop) once it serves and, once
    told to stop, ``on_stop``, then waits up to ``graceful_s`` seconds (None: until they are done) for the
    requests in flight and closes the connections left."""
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=graceful_s,
        lifespan="off",
        http=head_guarded(),  # each request's head bounded in time and size
    )
    return _Server(config, on_stop, on_started)


def serve(
    app: Any,
    sock: socket.socket,
    *,
    graceful_s: float | None = None,
    on_stop: Callable[[], None] | None = None,
    on_started: Callable[[], None] | None = None,
) -> int:
    """Serve ``app`` on ``sock`` (from ``bind``) until SIGTERM or Ctrl-C (on the main thread), calling
    ``on_started`` once it serves (its signal handlers are in place then); then call ``on_stop`` (on the
    event loop), give the requests in flight up to ``graceful_s`` seconds (None: all the time they take;
    a second signal: none), close what is left and return how many connections were closed with a
    request or an answer still on them; the socket is closed."""
    server = make_server(app, graceful_s=graceful_s, on_stop=on_stop, on_started=on_started)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return server.closed_unfinished


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
        deadline = time.monotonic() + THREAD_WAIT_S
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not server.started:
            raise RuntimeError("the server did not start: run with log_level='info' to see why")
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(THREAD_WAIT_S)
        sock.close()
