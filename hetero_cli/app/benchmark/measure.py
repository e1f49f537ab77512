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
    pace = _Pace(max_irate, batch)
    if api == "sync":
        request = compiled.create_infer_request()
        first_ms = _timed_ms(lambda: request.infer(feeds[0])) if warmup else 0.0
        result = _measure_sync(request, feeds[0], api, batch, first_ms, niter, duration_s, on_progress, pace)
    else:
        result = _measure_async(
            compiled, feeds, api, nireq, batch, niter, duration_s, on_progress, pace, warmup=warmup
        )
    result.percentile = percentile
    return result


class _Pace:
    """-max_irate: the sleep before each start that keeps the loop at most ``rate`` frames per second
    (``batch`` frames per inference); no sleep at rate 0."""

    def __init__(self, rate: float, batch: int) -> None:
        self.rate = rate
        self.batch = batch

    def wait(self, started: int, t0: float) -> None:
        """Before starting inference number ``started`` (from 0) of a loop that began at perf_counter()
        ``t0``: sleep until its frames are due."""
        if self.rate <= 0:
            return
        delay = started * self.batch / self.rate - (time.perf_counter() - t0)
        if delay > 0:
            time.sleep(delay)


class _Progress:
    """Reports a loop's progress to on_progress (if any): at most every 0.1 s, and once at its end."""

    def __init__(self, on_progress: ProgressCallback | None, t0: float) -> None:
        self._call = on_progress
        self._t0 = t0
        self._last = 0.0

    def tick(self, done: int, now: float) -> None:
        """Report ``done`` iterations at perf_counter() ``now``, unless the last report is <= 0.1 s old."""
        if self._call is not None and now - self._last > 0.1:
            self._last = now
            self._call(done, now - self._t0)

    def end(self, done: int, duration_ms: float) -> None:
        """The loop ended after ``duration_ms`` with ``done`` iterations: always reported."""
        if self._call is not None:
            self._call(done, duration_ms / 1000.0)


def _timed_ms(fn: Callable[[], Any]) -> float:
    """How long ``fn()`` took, in ms."""
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def _more(niter: int | None, duration_s: float | None, done: int, elapsed: float) -> bool:
    """benchmark_app's loop condition: below -niter iterations or below -t seconds, whichever are given."""
    return bool((niter and done < niter) or (duration_s and elapsed < duration_s))


def _measure_sync(
    request: InferRequest,
    data: Mapping[str, np.ndarray],
    api: str,
    batch: int,
    first_ms: float,
    niter: int | None,
    duration_s: float | None,
    on_progress: ProgressCallback | None,
    pace: _Pace,
) -> Measurement:
    """One request inferring ``data`` again and again, each inference timed on its own."""
    latencies: list[float] = []
    t0 = time.perf_counter()
    progress = _Progress(on_progress, t0)
    while _more(niter, duration_s, len(latencies), time.perf_counter() - t0):
        pace.wait(len(latencies), t0)
        begin = time.perf_counter()
        request.infer(data)
        now = time.perf_counter()
        latencies.append((now - begin) * 1000.0)
        progress.tick(len(latencies), now)
    duration_ms = (time.perf_counter() - t0) * 1000.0
    progress.end(len(latencies), duration_ms)
    return Measurement(api, 1, batch, first_ms, duration_ms, latencies)


def _measure_async(
    compiled: CompiledModel,
    feeds: Sequence[Mapping[str, np.ndarray]],
    api: str,
    nireq: int,
    batch: int,
    niter: int | None,
    duration_s: float | None,
    on_progress: ProgressCallback | None,
    pace: _Pace,
    *,
    warmup: bool,
) -> Measurement:
    """``nireq`` requests kept in flight on an AsyncInferQueue, each latency start_async to completion;
    on a failure every request still running is waited for before the first failure is raised."""
    queue = AsyncInferQueue(compiled, nireq)
    first_ms = _timed_ms(lambda: queue[0].infer(feeds[0])) if warmup else 0.0
    latencies: list[float] = []
    queue.set_callback(lambda request, _: latencies.append(request.latency))
    started = 0
    t0 = time.perf_counter()
    progress = _Progress(on_progress, t0)
    try:
        while _more(niter, duration_s, started, time.perf_counter() - t0):
            pace.wait(started, t0)
            k = queue.get_idle_request_id()
            queue.start_async(feeds[k % len(feeds)], share_inputs=True)  # filled once, never changed
            started += 1
            progress.tick(len(latencies), time.perf_counter())
    except BaseException:
        with contextlib.suppress(InferenceError):  # the first failure is the one to report
            queue.wait_all()
        raise
    queue.wait_all()
    duration_ms = (time.perf_counter() - t0) * 1000.0
    progress.end(len(latencies), duration_ms)
    return Measurement(api, nireq, batch, first_ms, duration_ms, latencies)
