"""``hetero serve --engine local``: one process, uvicorn serving the KServe v2 app over a LocalBackend whose
requests run on the compiled model's pipeline (one worker thread per device), so that concurrent clients
overlap across devices as ``hetero benchmark -hint throughput``'s requests do.

    engine = LocalEngine(ServeOptions(name="digits", host="127.0.0.1", port=8000))   # binds the port now
    print(engine.serve(compiled))      # until SIGTERM / Ctrl-C: "Stopped: of the 2 request(s) in flight, ..."
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import InferenceError
from ...runtime import CompiledModel, InferRequest
from .backend import Metrics
from .options import ServeOptions, tensor_specs
from .protocol import TensorSpec
from .server import bind, serve

log = logging.getLogger("hetero_cli")


class LocalBackend:
    """A Backend over ``compiled``: ``jobs`` infer requests (0: two per device the model runs on, so each
    device has one to run while the next waits), each inference started asynchronously on the pipeline and
    awaited without blocking the event loop. Each subgraph's run is timed into ``metrics`` (set it, or
    give it, before serving). ``shapes``: {input: dims} that narrow the inputs' dynamic dimensions."""

    def __init__(
        self,
        compiled: CompiledModel,
        name: str,
        *,
        jobs: int = 0,
        shapes: dict[str, list[int | None]] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.name = name
        self.compiled = compiled
        self.inputs: list[TensorSpec] = tensor_specs(compiled.inputs, shapes or {})
        self.outputs: list[TensorSpec] = tensor_specs(compiled.outputs, {})
        self.metrics = metrics
        count = jobs or 2 * int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self._requests = [compiled.create_infer_request() for _ in range(count)]
        self._idle: asyncio.Queue[InferRequest] | None = None
        self._waiting: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._started: dict[tuple[int, int], float] = {}
        self.stopping = False  # set when the server begins to stop: not ready from then on
        for request in self._requests:
            request.set_completion_hook(self._completed)
        compiled.pipeline.observer = self._observe

    def ready(self) -> bool:
        """Whether every stage can run and the server is not stopping (``missing`` says what lacks)."""
        return not self.missing()

    def missing(self) -> list[str]:
        """What keeps the model from answering now, one line each: a stage whose session failed a run and
        could not be made again (runtime.recovery), a stop under way; empty when ready."""
        lacks = [
            f"{where} failed a run and its session could not be made again ({reason}): restart the server"
            for where, reason in self.compiled.unrenewed.items()
        ]
        if self.stopping:
            lacks.append("the server is stopping")
        return lacks

    def stage_names(self) -> list[str]:
        """The subgraphs an inference runs, in execution order (one name where one session runs them all)."""
        return [run.name for run in self.compiled.runs]

    async def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The model's outputs for ``feeds``, run on the next idle request (waiting, without blocking the
        loop, while all are busy). Raises InferenceError where the model refuses the inputs or fails."""
        loop = asyncio.get_running_loop()
        if self._idle is None:
            self._idle = asyncio.Queue()
            for request in self._requests:
                self._idle.put_nowait(request)
        request = await self._idle.get()
        future: asyncio.Future = loop.create_future()
        self._waiting[id(request)] = (loop, future)
        try:
            request.start_async(feeds, share_inputs=True)  # the arrays are this request's own
        except Exception:  # refused before it started: no completion will hand the request back
            self._waiting.pop(id(request), None)
            self._idle.put_nowait(request)
            raise
        return await future

    def close(self) -> None:
        """Stop timing the pipeline's stages (the requests stay usable)."""
        pipeline = self.compiled.pipeline
        if pipeline.observer == self._observe:
            pipeline.observer = None

    def _completed(self, request: InferRequest, failure: InferenceError | None) -> None:
        """A request's completion hook (on a lane's thread): hand its results or failure to the waiting
        coroutine and the request back to the idle ones, on the event loop's thread."""
        loop, future = self._waiting.pop(id(request))
        results = dict(request.results) if failure is None else None
        try:
            loop.call_soon_threadsafe(self._settle, request, future, results, failure)
        except RuntimeError:  # the loop has closed (the server stopped): nobody waits for this answer
            log.debug("an inference completed after the server's event loop closed; its answer is dropped")

    def _settle(
        self,
        request: InferRequest,
        future: asyncio.Future,
        results: dict[str, np.ndarray] | None,
        failure: InferenceError | None,
    ) -> None:
        if not future.done():  # done: the client went away and its handler was cancelled
            if failure is not None:
                future.set_exception(failure)
            else:
                future.set_result(results)
        assert self._idle is not None
        self._idle.put_nowait(request)

    def _observe(self, event: str, request: Any, position: int, lane: str) -> None:
        """The pipeline's observer: time each subgraph a lane runs into the metrics."""
        key = (id(request), position)
        if event == "start":
            self._started[key] = time.perf_counter()
            return
        began = self._started.pop(key, None)
        runs = self.compiled.runs
        if began is not None and self.metrics is not None and position < len(runs):
            self.metrics.observe_stage(runs[position].name, time.perf_counter() - began)


class LocalEngine:
    """The local engine: claims ``options``' address when made (ServeError for a port in use, before
    anything is compiled), then ``serve`` runs the app until SIGTERM or Ctrl-C. ``hint``: the
    PERFORMANCE_HINT its compile should use (each subgraph its own session, pipelined)."""

    hint = "THROUGHPUT"

    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        self.sock = bind(options.host, options.port)

    @property
    def url(self) -> str:
        """The base URL the server answers on (the port chosen where --port 0 was given)."""
        port = self.sock.getsockname()[1]
        return f"http://{_url_host(self.options.host)}:{port}"

    def serve(self, compiled: CompiledModel, announce: Callable[[str], None] = log.info) -> str:
        """Serve ``compiled`` until SIGTERM or Ctrl-C, then stop: requests still waiting for their body are
        cut (503), those in inference get until their deadline (``options.request_timeout_s``), and what is
        left then is closed. ``announce`` receives the line saying where it listens, once it serves (SIGTERM
        is the server's to take from then on). Returns the line that says how many requests in flight were
        answered and how many cut."""
        from .http import make_app, stop_waiting

        backend = LocalBackend(compiled, self.options.name, shapes=self.options.shapes)
        backend.metrics = metrics = Metrics(backend.name, backend.stage_names())
        timeout_s = self.options.request_timeout_s
        app = make_app(backend, metrics, self.options.max_body_bytes, request_timeout_s=timeout_s)
        stop = _Stop(metrics)

        def on_stop() -> None:
            backend.stopping = True
            stop.begin()
            stop_waiting(app)

        def on_started() -> None:
            announce(
                f"Serving {backend.name!r} (KServe v2) at {self.url}: POST /v2/models/{backend.name}/infer; "
                "Ctrl-C or SIGTERM stops it"
            )

        try:
            unfinished = serve(
                app, self.sock, graceful_s=timeout_s + STOP_MARGIN_S, on_stop=on_stop, on_started=on_started
            )
        finally:
            backend.close()
        return stop.summary(unfinished)

    def close(self) -> None:
        """Give the address back (when the command fails before serving)."""
        with contextlib.suppress(OSError):
            self.sock.close()


#: how much longer than a request's deadline a stop waits for the requests in flight (their answers to go)
STOP_MARGIN_S = 2.0


class _Stop:
    """What a stop did: the infer requests in flight when it began, and how many of them were answered
    (success or refusal) or cut (a deadline, a stalled body, the stop's own limit), from ``metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.began: tuple[int, int, int] | None = None  # in flight, answered, cut when the stop began

    def _counts(self) -> tuple[int, int, int]:
        m = self.metrics
        return m.in_flight(), m.requests("success") + m.requests("failure"), m.requests("cut")

    def begin(self) -> None:
        """The stop begins (on the event loop, before anything is cut)."""
        self.began = self._counts()

    def summary(self, unfinished: int = 0) -> str:
        """The line a stop ends with; ``unfinished``: the connections it closed with a request or an
        answer still on them (a second signal does not wait for the answers to go)."""
        if self.began is None:
            return "Stopped before serving any request"
        in_flight, answered, cut = self.began
        left, answered_now, cut_now = self._counts()
        line = "Stopped: no request was in flight"
        if in_flight:
            line = (
                f"Stopped: of the {in_flight} request(s) in flight, {answered_now - answered} answered, "
                f"{cut_now - cut + left} cut (a client stalled mid-body, a deadline passed, or a second "
                "signal)"
            )
        if unfinished:
            line += f"; {unfinished} connection(s) closed unfinished"
        return line


def _url_host(asked: str) -> str:
    """The host to print in a URL: the one asked for, unless it listens on every address."""
    host = asked if asked not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"[{host}]" if ":" in host else host
