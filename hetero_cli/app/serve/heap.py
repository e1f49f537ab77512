"""The server's memory after a large request: glibc's malloc keeps the pages a request's arrays freed (in
the worker thread's arena, or below a later allocation on the heap) for the process to reuse, so a served
or refused 60 MiB body left the server's resident memory 135 MiB higher than before it. ``GiveBack``, an
ASGI middleware, hands those free pages back to the system (``malloc_trim``) once such a request has been
answered and its arrays freed.

    app.add_middleware(GiveBack)     # and a route marks a large request: mark_large(request)
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("hetero_cli")

#: a request that reads or writes this many bytes or more gives the freed memory back once answered
LARGE_BYTES = 8 << 20
_MARK = "hetero_large"  # the key mark_large sets in the request's state


def _malloc_trim() -> Any:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS: their free gives pages back
    itself, or keeps them as glibc would with no remedy from here)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:  # a C library ctypes cannot load: nothing to trim with
        log.debug("no C library to trim the heap with (%s)", name)
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim.argtypes = [ctypes.c_size_t]
        trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def mark_large(request: Request, size: int) -> None:
    """Mark ``request`` as one to give memory back after, where ``size`` (bytes it read or writes) is
    LARGE_BYTES or more."""
    if size >= LARGE_BYTES:
        setattr(request.state, _MARK, True)


class GiveBack:
    """ASGI middleware: after a request ``mark_large`` marked has been answered (its response sent, its
    exception handled, so its arrays are freed), malloc_trim hands the C heap's free pages (every arena's)
    back to the system, on a worker thread (where the C library has it: glibc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if _TRIM is not None and scope.get("state", {}).get(_MARK):
                await asyncio.to_thread(_TRIM, 0)
