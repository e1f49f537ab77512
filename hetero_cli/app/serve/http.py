"""The KServe v2 REST routes over a Backend, as a FastAPI app: the local engine serves it with uvicorn, the
Ray engine mounts it on its ingress deployment (``@serve.ingress(make_app(...))``).

    GET  /v2/health/live   /v2/health/ready   /v2                      server liveness, readiness, metadata
    GET  /v2/models/<m>[/versions/<v>]    /v2/models/<m>[/versions/<v>]/ready   model metadata, readiness
    POST /v2/models/<m>[/versions/<v>]/infer                            inference (JSON or binary tensors)
    GET  /metrics                                                        Prometheus text
    (each GET route answers HEAD too: its status and headers, no body)

Every error is KServe's ``{"error": "..."}`` with a 4xx/5xx status: 400 for a request the protocol or the
model refuses, 404 for an unknown model, version or route, 413 for a body over ``max_body_bytes``, 408 for
a body that has not all come within the request's deadline (``request_timeout_s``), 504 for an inference
not answered within it, 503 for a body a stop did not wait for (``stop_waiting``) and for readiness that
lacks something (what, in the error). Bodies are parsed, and large answers written, on a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from ...errors import InferenceError, RequestError
from . import protocol
from .backend import Backend, Metrics
from .heap import GiveBack, mark_large
from .options import DEFAULT_REQUEST_TIMEOUT_S

log = logging.getLogger("hetero_cli")

VERSION = "1"
T = TypeVar("T")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def make_app(
    backend: Backend,
    metrics: Metrics,
    max_body_bytes: int,
    *,
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
) -> FastAPI:
    """A FastAPI app answering KServe v2 for ``backend`` (served as ``backend.name``, version 1), counting
    its infer requests in ``metrics``, refusing bodies over ``max_body_bytes`` (413) and answering each
    infer request within ``request_timeout_s`` seconds: 408 where its body has not all come by then, 504
    where the inference has not answered (the backend's run goes on and is dropped). Raises ValueError
    for a limit under 1 byte or a deadline that is not a positive finite number."""
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, not {max_body_bytes}")
    if not (math.isfinite(request_timeout_s) and request_timeout_s > 0):
        raise ValueError(f"request_timeout_s must be a positive number of seconds, not {request_timeout_s}")
    app = FastAPI(title=f"hetero-cli: {backend.name}", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(GiveBack)  # the memory a large request's arrays took goes back to the system
    app.add_middleware(_QuietStop, app=app)  # outermost: a request a stop cancels ends without a traceback
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
    _health_routes(app, backend)
    _model_routes(app, backend)
    _infer_routes(app, backend, metrics, max_body_bytes, request_timeout_s)

    @app.api_route("/metrics", methods=READ)
    async def prometheus() -> Response:
        return PlainTextResponse(metrics.render(), media_type=PROMETHEUS_TEXT)

    return app


#: the read-only routes answer HEAD as GET without the body (HTTP's rule; health checkers send it)
READ = ["GET", "HEAD"]


def _health_routes(app: FastAPI, backend: Backend) -> None:
    @app.api_route("/v2/health/live", methods=READ)
    async def live() -> Response:
        return Response(status_code=200)

    @app.api_route("/v2/health/ready", methods=READ)
    async def ready() -> Response:
        return _readiness(backend)

    @app.api_route("/v2", methods=READ)
    async def server() -> dict:
        return protocol.server_metadata()


def _model_routes(app: FastAPI, backend: Backend) -> None:
    async def metadata(model: str, version: str = VERSION) -> dict:
        _check_model(backend, model, version)
        return protocol.model_metadata(backend.name, backend.inputs, backend.outputs, VERSION)

    async def model_ready(model: str, version: str = VERSION) -> Response:
        _check_model(backend, model, version)
        return _readiness(backend)

    app.api_route("/v2/models/{model}", methods=READ)(metadata)
    app.api_route("/v2/models/{model}/versions/{version}", methods=READ)(metadata)
    app.api_route("/v2/models/{model}/ready", methods=READ)(model_ready)
    app.api_route("/v2/models/{model}/versions/{version}/ready", methods=READ)(model_ready)


def _infer_routes(
    app: FastAPI, backend: Backend, metrics: Metrics, max_body_bytes: int, timeout_s: float
) -> None:
    waiting = app.state.hetero_waiting = _Waiting()

    async def answer(model: str, version: str, request: Request, stage: list[str]) -> Response:
        _check_model(backend, model, version)
        body = await waiting.body(request, max_body_bytes, stage)
        stage[0] = INFERENCE
        mark_large(request, len(body))
        header = request.headers.get(protocol.HEADER_LENGTH)
        parsed = await _off_loop(
            len(body), protocol.parse_infer_request, body, header, backend.inputs, backend.outputs
        )
        del body  # the arrays hold what they need of it
        try:
            results = await backend.infer(parsed.feeds)
        except InferenceError as exc:
            raise RequestError(f"the model refused the request: {exc}") from exc
        size = sum(np.asarray(r).nbytes for r in results.values())
        mark_large(request, size)
        content, header_length = await _off_loop(
            size, protocol.encode_infer_response, backend.name, results, parsed, VERSION
        )
        if header_length is None:
            return Response(content, media_type="application/json")
        headers = {protocol.HEADER_LENGTH: str(header_length)}
        return Response(content, media_type="application/octet-stream", headers=headers)

    async def infer(model: str, request: Request, version: str = VERSION) -> Response:
        start = time.perf_counter()
        ok = False
        stage = [BODY]  # what the request waits for: its body, then its inference (CUT: stopped waiting)
        metrics.request_started()
        try:
            response = await asyncio.wait_for(answer(model, version, request, stage), timeout_s)
            ok = True
        except asyncio.TimeoutError:
            late = _late(stage[0], timeout_s)
            stage[0] = CUT
            raise late from None
        except asyncio.CancelledError:  # the server stopped without waiting any longer: not answered
            stage[0] = CUT
            raise
        finally:
            metrics.observe_request(time.perf_counter() - start, ok, cut=stage[0] == CUT)
        return response

    app.post("/v2/models/{model}/infer")(infer)
    app.post("/v2/models/{model}/versions/{version}/infer")(infer)


def stop_waiting(app: FastAPI) -> int:
    """Where the server stops: answer each infer request of ``app`` (make_app's) still waiting for its body
    with a 503 that closes its connection, and refuse to wait for any body from now on, so that no client
    that stalls mid-body holds the stop up; the requests whose inference runs are left to finish. Returns
    how many were cut. Call it on the app's event loop."""
    return app.state.hetero_waiting.stop()


class _Waiting:
    """The infer requests of an app that wait for their body, so that a stop can cut them (stop_waiting)."""

    def __init__(self) -> None:
        self.reading: set[asyncio.Task] = set()
        self.cut: set[asyncio.Task] = set()
        self.stopping = False

    async def body(self, request: Request, limit: int, stage: list[str]) -> bytes:
        """The request's body (_read_body), or RequestError (503) where the server stops meanwhile."""
        task = asyncio.current_task()
        assert task is not None
        if self.stopping:
            stage[0] = CUT
            raise _stopping()
        self.reading.add(task)
        try:
            return await _read_body(request, limit)
        except asyncio.CancelledError:
            if task not in self.cut:  # not stop's: the deadline's or the server's own
                raise
            self.cut.discard(task)
            uncancel = getattr(task, "uncancel", None)  # Python 3.11+: the cancel was handled here
            if uncancel is not None:
                uncancel()
            stage[0] = CUT
            raise _stopping() from None
        finally:
            self.reading.discard(task)

    def stop(self) -> int:
        """Cut the requests waiting for their body, and any that come from now on; how many were cut."""
        self.stopping = True
        reading = list(self.reading)
        for task in reading:
            self.cut.add(task)
            task.cancel()
        return len(reading)


class _QuietStop:
    """ASGI middleware: a request that a stop under way (stop_waiting) cancels, as a second SIGTERM or the
    stop's time limit does, ends here without the traceback uvicorn would log for it: it is no error, and
    the stop's line counts it as cut (Metrics' "cut")."""

    def __init__(self, inner: Any, app: FastAPI) -> None:
        self.inner = inner
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.inner(scope, receive, send)
        except asyncio.CancelledError:
            waiting = getattr(self.app.state, "hetero_waiting", None)
            if waiting is None or not waiting.stopping:  # not a stop's: the cancel goes on
                raise
            log.debug("%s %s: cut by the server's stop", scope.get("method"), scope.get("path"))


def _stopping() -> RequestError:
    return RequestError(
        "the server is stopping: it did not wait for the rest of this request's body; send it again", 503
    )


BODY, INFERENCE, CUT = "body", "inference", "cut"
#: a body (or a response's tensors) this many bytes or more is parsed (or written) on a worker thread
OFF_LOOP_BYTES = 1 << 18


async def _off_loop(size: int, work: Callable[..., T], *args: Any) -> T:
    """``work(*args)``, on a worker thread where ``size`` (the bytes it reads) is OFF_LOOP_BYTES or more, so
    that the event loop answers other requests meanwhile (protocol's parsing and writing let the GIL go
    between chunks); small ones here, where a thread would cost more than the work."""
    if size < OFF_LOOP_BYTES:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def _late(stage: str, timeout_s: float) -> RequestError:
    """The error of a request its deadline passed on, waiting for ``stage`` (BODY or INFERENCE)."""
    if stage == BODY:
        return RequestError(
            f"the request's body had not all come within the server's deadline of {timeout_s:g} s: send it "
            "at once, or start the server with a longer --request-timeout",
            408,
        )
    return RequestError(
        f"the inference was not answered within the server's deadline of {timeout_s:g} s: send less data "
        "per request, or start the server with a longer --request-timeout",
        504,
    )


def _readiness(backend: Backend) -> Response:
    """200 where ``backend`` is ready; else 503 with KServe's ``{"error"}`` saying what it lacks (its
    ``missing()`` where it has one, Backend's optional method)."""
    missing: list[str] = backend.missing() if hasattr(backend, "missing") else []
    if not missing and backend.ready():
        return Response(status_code=200)
    lacks = "; ".join(missing) or "the backend says it is not ready"
    return JSONResponse(protocol.error_body(f"not ready: {lacks}"), status_code=503)


def _check_model(backend: Backend, model: str, version: str) -> None:
    """RequestError (404) unless ``model`` is the backend's and ``version`` the one served."""
    if model != backend.name:
        raise RequestError(f"unknown model {model!r}: this server serves {backend.name!r}", 404)
    if version != VERSION:
        raise RequestError(f"model {model!r} has no version {version!r}: it has version {VERSION}", 404)


async def _read_body(request: Request, limit: int) -> bytes:
    """The request's body, RequestError (413) as soon as it is known to exceed ``limit`` bytes: from its
    Content-Length before reading, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(_too_large(int(declared), limit), 413)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(_too_large(size, limit, at_least=True), 413)
            chunks.append(chunk)
    except ClientDisconnect:
        raise RequestError("the client went away before its request's body had come", 400) from None
    return b"".join(chunks)


def _too_large(size: int, limit: int, *, at_least: bool = False) -> str:
    return (
        f"the request body is {'over ' if at_least else ''}{size} bytes, over the server's limit of {limit}: "
        "send less data per request, or start the server with a larger --max-body-size"
    )


async def _request_error(request: Request, exc: Exception) -> Response:
    """A refusal as KServe's ``{"error"}``; a 408 or 503 (a body still coming, or a stop) also closes the
    connection: the rest of that body could not be told from a next request on it."""
    assert isinstance(exc, RequestError)
    headers = {"Connection": "close"} if exc.status in (408, 503) else None
    return JSONResponse(protocol.error_body(str(exc)), status_code=exc.status, headers=headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """Anything else a route raised: a KServe error (500) naming it; the server logs the traceback."""
    return JSONResponse(protocol.error_body(f"internal error: {type(exc).__name__}: {exc}"), status_code=500)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (an unknown route, a method not allowed) as KServe's ``{"error"}``."""
    assert isinstance(exc, HTTPException)
    return JSONResponse(
        protocol.error_body(f"{request.method} {request.url.path}: {exc.detail}"),
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )
