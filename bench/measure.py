"""Interleaved latency measurement and the statistics reported for it.

Every iteration runs each runtime once, in an order shuffled anew each iteration (seeded), so slow drifts
of a shared, noisy machine hit every runtime alike. A runtime runs a short block of inferences in a row
(``block_size``: about 10 ms of them, 1 for slow models) and its sample is the median of the block after
its first inference: an ONNX Runtime session's idle threads spin for a while after its run, on the cores
the next runtime needs, so the first inference after a switch measures the previous runtime's neighbour,
not the runtime (two alternating sessions of a 1 MiB Softmax chain: 980 us each alone, 1670 us
alternating). The rest of the block is what a user serving one model sees. The garbage collector is off
while timing, as in ``timeit``.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Stats:
    """Latency statistics in milliseconds."""

    n: int
    median_ms: float
    min_ms: float
    max_ms: float
    p25_ms: float
    p75_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Stats:
        """Statistics of a non-empty list of durations in seconds."""
        ms = sorted(s * 1e3 for s in seconds)
        q = statistics.quantiles(ms, n=4, method="inclusive") if len(ms) > 1 else [ms[0]] * 3
        return cls(len(ms), statistics.median(ms), ms[0], ms[-1], q[0], q[2])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


BLOCK_MS = 10.0  # a block of inferences lasts about this long
MAX_BLOCK = 8
SLOW_MS = 20.0  # a runtime this slow runs one inference per iteration: a neighbour's spin is noise to it


def block_size(latency_ms: float) -> int:
    """Inferences per block for a group whose slowest runtime takes ``latency_ms``: 1 (kept) for slow
    models, else 2 to 8 of which the first is dropped."""
    if latency_ms >= SLOW_MS:
        return 1
    return max(2, min(MAX_BLOCK, int(BLOCK_MS / max(latency_ms, 1e-3)) + 1))


def interleaved(
    runs: Mapping[str, Callable[[], Any]],
    *,
    budget_s: float,
    lo: int,
    hi: int,
    warmup: int = 2,
    own_blocks: bool = False,
) -> tuple[dict[str, list[float]], float, int]:
    """Time every callable of ``runs`` once per iteration, interleaved; return samples, wall time, block
    (the largest block used).

    ``warmup`` untimed rotations come first (first inferences allocate and compile kernels); the slowest
    runtime's fastest warm-up run chooses the block size (a first inference's time would choose blocks too
    short for the model: a 0.6 ms split got blocks of 2, the second inference after a switch, not the
    steady state a block measures). With ``own_blocks`` each runtime's own fastest warm-up run chooses its
    block, never under 2 (the first dropped): where the group mixes an 11 ms runtime with 20 ms ones, blocks
    of 1 left the fast one's samples to the neighbour's after-effects, and two identical placements measured
    3 % apart. Then iterations (each in a fresh random order) run until ``budget_s`` has passed and at
    least ``lo`` iterations are done, or ``hi`` are: the wall time stays near the budget however the
    machine's load changes.
    """
    names = list(runs)
    shuffler = random.Random(0)
    fastest = dict.fromkeys(names, float("inf"))
    for _ in range(max(1, warmup)):
        for name in names:
            took, _ = timed(runs[name])
            fastest[name] = min(fastest[name], took * 1e3)
    if own_blocks:
        blocks = {name: max(2, block_size(fastest[name])) for name in names}
    else:
        blocks = dict.fromkeys(names, block_size(max(fastest.values(), default=0.0)))
    block = max(blocks.values(), default=1)
    samples: dict[str, list[float]] = {name: [] for name in names}
    clock = time.perf_counter
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    began = clock()
    try:
        for i in range(max(lo, hi)):
            order = names[:]
            shuffler.shuffle(order)
            for name in order:
                fn = runs[name]
                times = []
                for _ in range(blocks[name]):
                    start = clock()
                    fn()
                    times.append(clock() - start)
                samples[name].append(statistics.median(times[1:] if len(times) > 1 else times))
            done = i + 1
            if done % 2 == 0 and done >= lo and clock() - began >= budget_s:
                break
    finally:
        if enabled:
            gc.enable()
    return samples, clock() - began, block


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return statistics.median(values)


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of ys against xs (at least two distinct xs)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx
