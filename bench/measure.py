"""The bench's side of hetero-cli's one measuring method (hetero_cli.app.measure, issue 30), and the
statistics reported for it.

Every comparison of runtimes goes through ``per_process``: each runtime built in a worker process of its
own (runtimes.build, named by ``spec``), WARMUP inferences dropped, the processes taking turns to time
blocks of about BLOCK_MS (app.measure), in rounds of fresh processes; a runtime's figure is the median of
its per-round medians, and two runtimes compare block by block (``block_ratios``: the ratio judged, with
its noise). Sessions of several runtimes in one process disturb each other (an ORT
session's idle threads spin after its run, on the cores the next runtime needs: a plain ORT [OpenVINO,
CPU] session ran 21.6 ms alone and 37.5 ms after each run of a CPU session), so no runtime shares a
process with another while it is timed. What is bench-only (the statistics, the ratios' form) is here.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hetero_cli.app.measure import Measurement, RuntimeSpec, method, paired


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


#: the builder every bench runtime is built by in its worker process (bench/runtimes.py, this folder)
BUILDER = "runtimes:build"
BENCH = str(Path(__file__).resolve().parent)
# the worker processes import bench/'s builders (runtimes, crossing, instances) by module name: this
# folder on their PYTHONPATH, which they inherit from the bench's process
os.environ["PYTHONPATH"] = os.pathsep.join([BENCH, *filter(None, [os.environ.get("PYTHONPATH")])])
#: about how long each block of a runtime lasts, and the bounds on its runs
BLOCK_MS = 100.0
LEAST_RUNS, MOST_RUNS = 2, 100
WARMUP = 3


def spec(runtime: str, path: Path, **args: Any) -> RuntimeSpec:
    """Bench runtime ``runtime`` (runtimes.prepare's ids) of the model file ``path`` as a worker builds it
    (runtimes.build; ``args``: its other arguments, JSON-ready)."""
    return RuntimeSpec(BUILDER, {"runtime": runtime, "path": str(path), **args})


def noise_of(measurements: Sequence[Measurement], floor: float = 0.0) -> float:
    """The largest noise of ``measurements`` (those with one), at least ``floor``."""
    return max([floor, *(m.noise for m in measurements if m.noise is not None)])


def runs_for(latency_ms: float | None) -> int:
    """Timed inferences per block for a runtime of about ``latency_ms``: about BLOCK_MS of them."""
    if not latency_ms or latency_ms <= 0:
        return LEAST_RUNS
    return max(LEAST_RUNS, min(MOST_RUNS, int(BLOCK_MS / latency_ms)))


def guess_ms(run: Callable[[], Any], count: int = 3) -> float:
    """The fastest of ``count`` runs of ``run`` (ms): what sizes a worker's timed runs."""
    return min(timed(run)[0] for _ in range(max(1, count))) * 1e3


def per_process(
    specs: Mapping[str, RuntimeSpec],
    feeds: Mapping[str, Any],
    *,
    rounds: int,
    guesses: Mapping[str, float],
    seed: int = 0,
) -> tuple[dict[str, Measurement], float]:
    """Every runtime of ``specs`` timed by hetero-cli's one measuring method (app.measure.method:
    measure_runtimes, the one hetero tune's decision calls): each alone in a worker process of its own,
    ``rounds`` rounds of fresh processes, WARMUP inferences dropped per process, then the processes taking
    turns to time method.BLOCKS blocks each of about BLOCK_MS (sized by ``guesses``: {label: ms}). Returns
    ({label: Measurement}, wall seconds)."""
    began = time.perf_counter()
    found = method.measure_runtimes(
        specs,
        dict(feeds),
        rounds=rounds,
        min_rounds=rounds,
        warmup=WARMUP,
        runs={label: runs_for(guesses.get(label)) for label in specs},
        seed=seed,
    )
    return found, time.perf_counter() - began


def joined(first: Measurement, more: Measurement) -> Measurement:
    """``first`` with the rounds of ``more`` (a later per_process call timing the same runtime) after its
    own: process medians, blocks (aligned across the runtimes both calls timed), samples; ``more``'s error
    where it has one."""
    return Measurement(
        first.label,
        [*first.process_ms, *more.process_ms],
        first.samples + more.samples,
        more.error or first.error,
        [*first.block_ms, *more.block_ms],
    )


def stats_of(m: Measurement) -> Stats:
    """Statistics of a runtime's per-process medians (n: processes)."""
    return Stats.of([ms / 1e3 for ms in m.process_ms])


def block_ratios(candidate: Measurement, baselines: Sequence[Measurement]) -> dict[str, Any]:
    """candidate / baseline (the mean of ``baselines``' blocks of the same turn), block by block
    (app.measure.paired): ``median`` (the ratio judged), ``p25``/``p75``, ``noise``, ``rounds`` (each
    round's ratio), ``blocks``; NaNs where no turn was timed by all."""
    vs = paired(candidate, list(baselines))
    if vs is None:
        return {
            "p25": math.nan,
            "median": math.nan,
            "p75": math.nan,
            "noise": math.nan,
            "rounds": [],
            "blocks": 0,
        }
    doc = vs.to_dict()
    doc["median"] = doc.pop("ratio")
    return doc


def block_differences_us(a: Measurement, b: Measurement) -> float | None:
    """The median over the turns both timed of a's block median minus b's, in microseconds; None where
    they share no turn."""
    rows = [
        (x, y) for ra, rb in zip(a.block_ms, b.block_ms, strict=False) for x, y in zip(ra, rb, strict=False)
    ]
    differences = [(x - y) * 1e3 for x, y in rows if x is not None and y is not None]
    return statistics.median(differences) if differences else None


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
