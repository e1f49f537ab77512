"""measure_runtimes: each runtime built alone in a process of its own, timed in short blocks that alternate
between the runtimes, in rounds of fresh processes.

A user runs one model in one process. Sessions of several runtimes in one process disturb each other (an
ORT CPU session's intra-op threads spin after its run returns, on the cores the next runtime needs: a
plain ORT [OpenVINO, CPU] session ran 21.6 ms alone and 37.5 ms when each run followed a CPU session's),
so each runtime runs in a worker process of its own (``sys.executable -m hetero_cli.app.measure.worker``),
built from a ``RuntimeSpec`` (an importable builder and JSON arguments), fed from .npy files, ``warmup``
inferences dropped. A round starts one such process per runtime; they stay up together, and the runtimes
take turns: ``blocks`` times, in an order a seeded ``random.Random`` shuffles anew each time, one process
times ``runs`` inferences while the others wait idle (a settle pause before each block lets the last one's
threads stop). A machine whose speed wanders within seconds (a shared VM: 30-60 % between processes
timed one after another) then moves the blocks of one turn alike, and ``paired`` compares two runtimes
block by block; fresh processes each round average out a process's own luck.

A runtime's ``process_ms`` are its per-round medians, ``block_ms`` each block's median, aligned across the
runtimes of one call (None where a runtime timed no block there). What starts a runtime is a parameter
(``Launch``): ``in_worker`` (the default) starts a worker process; ``in_process`` builds the runtime in
this process and times it with a ``Timer`` (the tests' tables: no speed asserted).
"""

from __future__ import annotations

import importlib
import random
import statistics
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

from ...errors import HeteroError
from .resident import WorkerError, WorkerProcess
from .timer import Timer

#: seconds a worker process may take to be ready (import, compile, warm-up), or to time one block
WORKER_TIMEOUT_S = 600.0
#: blocks each runtime times per round (each round a fresh process per runtime)
BLOCKS = 12
#: seconds of quiet before each block a worker process times (resident.WorkerProcess)
SETTLE_S = 0.05


class MeasureError(HeteroError):
    """A runtime could not be built or timed in its worker: the message says which and why."""


@dataclass(frozen=True)
class RuntimeSpec:
    """A runtime as a worker builds it: ``builder`` "module:function", called as ``function(feeds,
    **args)`` and returning a callable that runs one inference on those feeds; ``args`` JSON-ready. The
    worker imports the module as this process would (its PYTHONPATH is the worker's)."""

    builder: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (from_dict reads it back)."""
        return {"builder": self.builder, "args": dict(self.args)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RuntimeSpec:
        """The spec to_dict wrote."""
        return cls(str(doc["builder"]), dict(doc.get("args", {})))

    def build(self, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
        """Import the builder and call it: the run callable. Raises whatever the builder raises,
        MeasureError for a builder that cannot be imported."""
        module, _, name = self.builder.partition(":")
        try:
            function = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise MeasureError(f"no builder {self.builder!r}: {exc}") from None
        return function(dict(feeds), **dict(self.args))


class Job(NamedTuple):
    """One runtime's process: ``label`` built from ``spec``, fed ``feeds`` (also saved as the .npy files
    ``feed_files``: {input: path}), ``warmup`` inferences dropped, then ``runs`` timed per block."""

    label: str
    spec: RuntimeSpec
    feeds: Mapping[str, np.ndarray]
    feed_files: Mapping[str, str]
    warmup: int
    runs: int


class Resident(Protocol):
    """A runtime being built, then waiting to time blocks: ``ready()`` returns once it is built and warmed
    up; ``block()`` times the job's ``runs`` inferences and returns their latencies (ms); both raise
    MeasureError where it fails; ``close()`` ends it."""

    def ready(self) -> None: ...

    def block(self) -> list[float]: ...

    def close(self) -> None: ...


#: launch(job) -> the job's runtime, building (Resident.ready waits for it); MeasureError where it cannot
#: be started
Launch = Callable[[Job], Resident]


@dataclass
class Measurement:
    """A runtime's per-round medians (ms, one per round: per process, for worker processes), each block's
    median (``block_ms``: a list per round, aligned across the runtimes of one measure_runtimes call, None
    where this runtime timed no block), the latencies timed in all, and ``error`` (why it was dropped, None
    otherwise)."""

    label: str
    process_ms: list[float] = field(default_factory=list)
    samples: int = 0
    error: str | None = None
    block_ms: list[list[float | None]] = field(default_factory=list)

    @property
    def median_ms(self) -> float | None:
        """The median of the per-round medians; None where no round measured it."""
        return statistics.median(self.process_ms) if self.process_ms else None

    @property
    def noise(self) -> float | None:
        """The relative spread of the per-round medians, (max - min) / median; None under two. It holds the
        machine's drift between rounds: ``paired`` gives the noise of a comparison."""
        if len(self.process_ms) < 2 or not self.median_ms:
            return None
        return (max(self.process_ms) - min(self.process_ms)) / self.median_ms

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, the median and the noise included."""
        return {
            "process_ms": list(self.process_ms),
            "median_ms": self.median_ms,
            "noise": self.noise,
            "samples": self.samples,
            "error": self.error,
            "block_ms": [list(row) for row in self.block_ms],
        }


def measure_runtimes(
    specs: Mapping[str, RuntimeSpec],
    feeds: Mapping[str, np.ndarray],
    *,
    rounds: int = 3,
    min_rounds: int = 2,
    blocks: int = BLOCKS,
    warmup: int = 3,
    runs: int | Mapping[str, int] = 20,
    seed: int = 0,
    launch: Launch | None = None,
    next_blocks: Callable[[int], int] | None = None,
    on_process: Callable[[str, int], None] | None = None,
) -> dict[str, Measurement]:
    """Time every runtime of ``specs`` ({label: spec}) alone in a process of its own (module docstring):
    ``rounds`` rounds, each launching every runtime (in a shuffled order; they build at once, and no block
    is timed before all are ready) and then timing ``blocks`` blocks of each in turn, the turns shuffled by
    ``random.Random(seed)``; after ``min_rounds`` rounds each further one times ``next_blocks(rounds_done)``
    blocks of each, and 0 ends the rounds (what a budget's clock leaves). ``runs``: timed inferences per block
    (one number, or one per label); ``launch``: what starts a runtime (``in_worker`` by default);
    ``on_process(label, round)`` is told before each launch.

    Returns {label: Measurement}, in the order of ``specs``: a runtime that fails (MeasureError) keeps its
    error and is not launched again; its blocks of that round are None."""
    launch = launch or in_worker
    found = {label: Measurement(label) for label in specs}
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="hetero-measure-") as folder:
        files = save_feeds(feeds, Path(folder))
        for round_ in range(max(1, rounds)):
            round_blocks = blocks
            if round_ >= min_rounds and next_blocks is not None:
                round_blocks = next_blocks(round_)
                if round_blocks < 1:
                    break
            order = [label for label in specs if found[label].error is None]
            rng.shuffle(order)
            alive: dict[str, Resident] = {}
            timed: dict[str, list[float]] = {label: [] for label in specs}
            rows: dict[str, list[float | None]] = {label: [] for label in specs}
            try:
                for label in order:
                    count = runs if isinstance(runs, int) else runs.get(label, 20)
                    if on_process is not None:
                        on_process(label, round_)
                    try:
                        alive[label] = launch(Job(label, specs[label], feeds, files, warmup, max(1, count)))
                    except MeasureError as exc:
                        found[label].error = str(exc)
                for label in list(alive):
                    try:
                        alive[label].ready()
                    except MeasureError as exc:
                        found[label].error = str(exc)
                        alive.pop(label).close()
                for _ in range(max(1, round_blocks)):
                    turn = list(alive)
                    rng.shuffle(turn)
                    medians = {}
                    for label in turn:
                        try:
                            got = alive[label].block()
                        except MeasureError as exc:
                            found[label].error = str(exc)
                            alive.pop(label).close()
                            continue
                        timed[label].extend(got)
                        medians[label] = statistics.median(got)
                    for label in specs:
                        rows[label].append(medians.get(label))
            finally:
                for resident in alive.values():
                    resident.close()
            for label, m in found.items():
                m.block_ms.append(rows[label])
                if label in alive and timed[label]:
                    m.process_ms.append(statistics.median(timed[label]))
                    m.samples += len(timed[label])
    return found


def save_feeds(feeds: Mapping[str, np.ndarray], folder: Path) -> dict[str, str]:
    """Each input saved as ``folder``/input<i>.npy (input names need not be file names): {input: path}."""
    files = {}
    for i, (name, value) in enumerate(feeds.items()):
        path = folder / f"input{i}.npy"
        np.save(path, np.asarray(value), allow_pickle=False)
        files[name] = str(path)
    return files


def in_worker(job: Job, timeout_s: float = WORKER_TIMEOUT_S, settle_s: float = SETTLE_S) -> Resident:
    """``job``'s runtime built in a fresh worker process (resident.WorkerProcess: this process's
    environment, so thread settings made by environment variables hold there too), each block after a
    ``settle_s`` pause: started, it builds while the caller goes on. Its failures are MeasureErrors naming
    the runtime."""
    doc = {
        "label": job.label,
        "spec": job.spec.to_dict(),
        "feeds": dict(job.feed_files),
        "warmup": job.warmup,
        "runs": job.runs,
    }
    return _Named(job.label, WorkerProcess(doc, timeout_s, settle_s))


@dataclass
class _Named:
    """A worker process whose failures are MeasureErrors naming its runtime."""

    label: str
    worker: WorkerProcess

    def ready(self) -> None:
        try:
            self.worker.ready()
        except WorkerError as exc:
            raise MeasureError(f"{self.label}: {exc}") from None

    def block(self) -> list[float]:
        try:
            return self.worker.block()
        except WorkerError as exc:
            raise MeasureError(f"{self.label}: {exc}") from None

    def close(self) -> None:
        self.worker.close()


def in_process(timer: Timer, prefix: str = "") -> Launch:
    """A Launch that builds the runtime in this process and times its blocks with ``timer`` (labels
    ``prefix`` + the runtime's): for tests, which answer from a table, and for a caller that has no process
    to spare."""

    def launch(job: Job) -> Resident:
        try:
            run = job.spec.build(job.feeds)
            for _ in range(job.warmup):
                run()
        except MeasureError as exc:
            raise MeasureError(f"{job.label}: {exc}") from None
        except Exception as exc:  # the runtime's failure is its result, as a worker's is
            raise MeasureError(f"{job.label}: {one_line(exc)}") from None
        return _InProcess(job.label, prefix + job.label, run, job.runs, timer)

    return launch


@dataclass
class _InProcess:
    """A runtime built in this process, timed by a Timer."""

    label: str
    timer_label: str
    run: Callable[[], object]
    runs: int
    timer: Timer

    def ready(self) -> None:
        """Built already: launch built it."""

    def block(self) -> list[float]:
        try:
            return self.timer(self.timer_label, self.run, self.runs)
        except Exception as exc:  # an inference that fails ends this runtime's measurement, as in a worker
            raise MeasureError(f"{self.label}: {one_line(exc)}") from None

    def close(self) -> None:
        """Nothing to end: the runtime goes with the last reference to it."""


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:240] if text else ''}"
