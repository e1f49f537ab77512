"""Measuring: benchmark_app's sync and async loops, and what they measured.

    result = measure(compiled, feeds, nireq=4, api="async", niter=None, duration_s=10)
    print(result.latency_median_ms, result.throughput_fps)

``-api async`` keeps ``nireq`` requests in flight on an AsyncInferQueue, as benchmark_app does: requests
run stage by stage on the compiled model's pipeline (one worker thread per device), so they overlap across
devices; ONNX Runtime releases the GIL while a session runs.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import InferenceError
from ...runtime import AsyncInferQueue, CompiledModel, InferRequest

ProgressCallback = Callable[[int, float], None]
"""on_progress(iterations done, seconds since the loop started)."""


@dataclass
class Measurement:
    """What benchmark_app reports: iterations, duration, latencies (ms) and throughput."""

    api: str
    nireq: int
    batch: int
    first_inference_ms: float
    duration_ms: float
    latencies_ms: list[float] = field(default_factory=list)
    percentile: int = 50

    @property
    def latency_percentile_ms(self) -> float:
        """The -latency_percentile latency in ms: the median at 50, else benchmark_app's nearest rank
        (the value below which that percentage of the sorted latencies lie); 0 when nothing was measured."""
        if not self.latencies_ms:
            return 0.0
        if self.percentile == 50:
            return self.latency_median_ms
        ordered = sorted(self.latencies_ms)
        return float(ordered[max(0, math.ceil(len(ordered) * self.percentile / 100) - 1)])

    @property
    def count(self) -> int:
        """The iterations measured (the warm-up not counted)."""
        return len(self.latencies_ms)

    @property
    def latency_median_ms(self) -> float:
        """The median latency in ms (0 when nothing was measured)."""
        return float(np.median(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def latency_average_ms(self) -> float:
        """The mean latency in ms (0 when nothing was measured)."""
        return float(np.mean(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def latency_min_ms(self) -> float:
        """The shortest latency in ms (0 when nothing was measured)."""
        return float(np.min(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def latency_max_ms(self) -> float:
        """The longest latency in ms (0 when nothing was measured)."""
        return float(np.max(self.latencies_ms)) if self.latencies_ms else 0.0

    @property
    def throughput_fps(self) -> float:
        """Frames per second: batch * 1000 / the -latency_percentile latency (sync), batch * count / duration (async)."""
        if not self.latencies_ms:
            return 0.0
        if self.api == "sync":
            return self.batch * 1000.0 / self.latency_percentile_ms if self.latency_percentile_ms else 0.0
        return self.batch * self.count * 1000.0 / self.duration_ms if self.duration_ms else 0.0


def planned_iterations(niter: int | None, nireq: int, api: str) -> int | None:
    """The iterations a run will make for -niter ``niter`` (None: no -niter): benchmark_app rounds -niter up
    to a multiple of -nireq in async mode."""
    if niter is None or api == "sync" or nireq <= 1:
        return niter
    return -(-niter // nireq) * nireq


def measure(
    compiled: CompiledModel,
    feeds: Sequence[Mapping[str, np.ndarray]],
    *,
    nireq: int,
    api: str,
    niter: int | None,
    duration_s: float | None,
    batch: int = 1,
    on_progress: ProgressCallback | None = None,
    warmup: bool = True,
    max_irate: float = 0.0,
    percentile: int = 50,
) -> Measurement:
    """Run until both limits are reached (-niter iterations and -t seconds, whichever are given).

    The first inference (on request 0) is a warm-up, timed but not counted (``warmup`` False, -no_warmup:
    none, first_inference_ms 0). ``max_irate`` (-max_irate, frames per second, 0 for no limit) delays each
    start so that at most that many frames start per second, as benchmark_app does; ``percentile``
    (-latency_percentile) is the latency the Measurement reports beside the median. Sync: one request fed
    ``feeds[0]``. Async: an AsyncInferQueue of ``nireq`` requests, request k always fed ``feeds[k]``;
    latency is start_async to completion. ``batch`` frames per inference make the throughput;
    ``on_progress`` is called at most every 0.1 s and once at the end. Returns the Measurement; an
    inference that fails raises its InferenceError (async: the first one, after every request is done).
    """
    if api == "sync":
        request = compiled.create_infer_request()
        first_ms = _timed_ms(lambda: request.infer(feeds[0])) if warmup else 0.0
        loop = _Loop(niter, duration_s, max_irate, batch, on_progress)
        duration_ms, latencies = _measure_sync(request, feeds[0], loop)
    else:
        queue = AsyncInferQueue(compiled, nireq)
        first_ms = _timed_ms(lambda: queue[0].infer(feeds[0])) if warmup else 0.0
        loop = _Loop(niter, duration_s, max_irate, batch, on_progress)
        duration_ms, latencies = _measure_async(queue, feeds, loop)
    requests = 1 if api == "sync" else nireq
    return Measurement(api, requests, batch, first_ms, duration_ms, latencies, percentile)


class _Loop:
    """A measuring loop, begun when made: benchmark_app's condition to go on (``more``), the -max_irate
    sleep before each start (``wait``: at most ``rate`` frames per second, ``batch`` frames per inference;
    none at rate 0) and its progress, reported to ``on_progress`` (if any) at most every 0.1 s (``tick``)
    and once at its end (``end``)."""

    def __init__(
        self,
        niter: int | None,
        duration_s: float | None,
        rate: float,
        batch: int,
        on_progress: ProgressCallback | None,
    ) -> None:
        self.niter = niter
        self.duration_s = duration_s
        self.rate = rate
        self.batch = batch
        self.on_progress = on_progress
        self.last = 0.0
        self.t0 = time.perf_counter()

    def more(self, done: int) -> bool:
        """Whether the loop goes on after ``done`` iterations: below -niter iterations or below -t seconds,
        whichever are given."""
        elapsed = time.perf_counter() - self.t0
        return bool((self.niter and done < self.niter) or (self.duration_s and elapsed < self.duration_s))

    def wait(self, started: int) -> None:
        """Before starting inference number ``started`` (from 0): sleep until its frames are due."""
        if self.rate <= 0:
            return
        delay = started * self.batch / self.rate - (time.perf_counter() - self.t0)
        if delay > 0:
            time.sleep(delay)

    def tick(self, done: int, now: float) -> None:
        """Report ``done`` iterations at perf_counter() ``now``, unless the last report is <= 0.1 s old."""
        if self.on_progress is not None and now - self.last > 0.1:
            self.last = now
            self.on_progress(done, now - self.t0)

    def end(self, done: int) -> float:
        """The loop ended with ``done`` iterations: always reported. Returns its duration in ms."""
        duration_ms = (time.perf_counter() - self.t0) * 1000.0
        if self.on_progress is not None:
            self.on_progress(done, duration_ms / 1000.0)
        return duration_ms


def _timed_ms(fn: Callable[[], Any]) -> float:
    """How long ``fn()`` took, in ms."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def _measure_sync(
    request: InferRequest, data: Mapping[str, np.ndarray], loop: _Loop
) -> tuple[float, list[float]]:
    """One request inferring ``data`` again and again, each inference timed on its own: the loop's
    duration and the latencies, in ms."""
    latencies: list[float] = []
    while loop.more(len(latencies)):
        loop.wait(len(latencies))
        begin = time.perf_counter()
        request.infer(data)
        now = time.perf_counter()
        latencies.append((now - begin) * 1000.0)
        loop.tick(len(latencies), now)
    return loop.end(len(latencies)), latencies


def _measure_async(
    queue: AsyncInferQueue, feeds: Sequence[Mapping[str, np.ndarray]], loop: _Loop
) -> tuple[float, list[float]]:
    """``queue``'s requests kept in flight, each latency start_async to completion: the loop's duration and
    the latencies, in ms. On a failure every request still running is waited for before the first failure
    is raised."""
    latencies: list[float] = []
    queue.set_callback(lambda request, _: latencies.append(request.latency))
    started = 0
    try:
        while loop.more(started):
            loop.wait(started)
            k = queue.get_idle_request_id()
            queue.start_async(feeds[k % len(feeds)], share_inputs=True)  # filled once, never changed
            started += 1
            loop.tick(len(latencies), time.perf_counter())
    except BaseException:
        with contextlib.suppress(InferenceError):  # the first failure is the one to report
            queue.wait_all()
        raise
    queue.wait_all()
    return loop.end(len(latencies)), latencies
