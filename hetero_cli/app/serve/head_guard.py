"""A bound on each request's head (its request line and headers), which uvicorn's httptools protocol does
not set: a client that connects and sends no head, or part of one, is answered 408 and its connection
closed after HEAD_TIMEOUT_S; a head over HEAD_BYTES is answered 431 and closed. Without it, one client held
a connection forever with a head it never finished, and one that kept a header line growing held the
server's memory (hundreds of MiB) with it. The request's deadline (--request-timeout) starts once its head
is in.

    uvicorn.Config(app, http=head_guarded())
"""

from __future__ import annotations

import asyncio
from typing import Any

#: seconds a request's head may take to come in, from the connection or from the head's first byte
HEAD_TIMEOUT_S = 10.0
#: the most bytes a request's head may have (h11, uvicorn's other HTTP parser, takes 16 KiB)
HEAD_BYTES = 64 * 1024


def head_guarded() -> Any:
    """The HTTP protocol class for uvicorn.Config's ``http``: httptools' protocol with the bounds above, or
    "h11" where httptools is not installed (h11 bounds a head to 16 KiB itself; no head timeout then)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is optional for uvicorn
        return "h11"

    class HeadGuardedProtocol(HttpToolsProtocol):  # type: ignore[misc]
        """uvicorn's httptools protocol, each request's head bounded in time and size."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head = 0  # bytes of the head coming in; -1 while none is (a request under way)
            self._late = self.loop.call_later(HEAD_TIMEOUT_S, self._head_late)

        def connection_lost(self, exc: Exception | None) -> None:
            self._late.cancel()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            if self._head < 0:  # the next request on a kept-alive connection: its head starts now
                self._head = 0
                self._late = self.loop.call_later(HEAD_TIMEOUT_S, self._head_late)
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._head = -1
            self._late.cancel()
            super().on_headers_complete()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._head >= 0 and not self.transport.is_closing():
                self._head += len(data)
                if self._head > HEAD_BYTES:
                    self._refuse(
                        431,
                        "Request Header Fields Too Large",
                        f"the request's head is over {HEAD_BYTES} bytes",
                    )

        def timeout_keep_alive_handler(self) -> None:
            self._late.cancel()  # an idle kept-alive connection: uvicorn closes it
            super().timeout_keep_alive_handler()

        def _head_late(self) -> None:
            if self._head >= 0 and not self.transport.is_closing():
                self._refuse(
                    408, "Request Timeout", f"the request's head did not all come within {HEAD_TIMEOUT_S:g} s"
                )

        def _refuse(self, status: int, reason: str, message: str) -> None:
            self._head = -1
            self._late.cancel()
            body = message.encode()
            self.transport.write(
                f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                + body
            )
            self.transport.close()

    return HeadGuardedProtocol
