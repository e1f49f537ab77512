"""measure_runtimes: each runtime compiled and timed alone in a process of its own, in rounds.

A user runs one model in one process. Sessions of several runtimes in one process disturb each other (an
ORT CPU session's intra-op threads spin after its run returns, on the cores the next runtime needs: a
plain ORT [OpenVINO, CPU] session ran 21.6 ms alone and 37.5 ms when each run followed a CPU session's),
so a runtime is timed here the way it runs for the user: a worker process (``sys.executable -m
hetero_cli.app.measure.worker``) builds it from a ``RuntimeSpec`` (an importable builder and JSON
arguments), reads the inputs from .npy files, runs ``warmup`` inferences (dropped) and times ``runs``.
Every round starts one process per runtime, in an order a seeded ``random.Random`` shuffles anew each
round, so that a drift of the machine falls on all alike. A runtime's figure is the median of its
per-process medians; its noise the relative spread of those medians, (max - min) / median.

What starts a process is a parameter (``Launch``): ``in_worker`` (the default) spawns one; ``in_process``
builds and times the runtime in this process with a ``Timer`` (the tests' tables: no speed asserted).
"""

from __future__ import annotations

import importlib
import json
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...errors import HeteroError
from .timer import Timer

#: the module a worker process runs
WORKER_MODULE = "hetero_cli.app.measure.worker"
#: seconds one worker process may take (import, compile, warm-up, timing) before it is stopped
WORKER_TIMEOUT_S = 600.0


class MeasureError(HeteroError):
    """A runtime could not be built or timed in its worker: the message says which and why."""


@dataclass(frozen=True)
class RuntimeSpec:
    """A runtime as a worker builds it: ``builder`` "module:function", called as ``function(feeds,
    **args)`` and returning a callable that runs one inference on those feeds; ``args`` JSON-ready;
    ``sys_path``: folders put first on the worker's sys.path (bench/'s modules)."""

    builder: str
    args: Mapping[str, Any] = field(default_factory=dict)
    sys_path: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (from_dict reads it back)."""
        return {"builder": self.builder, "args": dict(self.args), "sys_path": list(self.sys_path)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> RuntimeSpec:
        """The spec to_dict wrote."""
        return cls(str(doc["builder"]), dict(doc.get("args", {})), tuple(doc.get("sys_path", ())))

    def build(self, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
        """Import the builder (``sys_path`` first on sys.path) and call it: the run callable. Raises
        whatever the builder raises, MeasureError for a builder that cannot be imported."""
        for folder in reversed(self.sys_path):
            if folder not in sys.path:
                sys.path.insert(0, folder)
        module, _, name = self.builder.partition(":")
        try:
            function = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise MeasureError(f"no builder {self.builder!r}: {exc}") from None
        return function(dict(feeds), **dict(self.args))


class Job(NamedTuple):
    """One process's work: runtime ``label`` built from ``spec``, fed ``feeds`` (also saved as the .npy
    files ``feed_files``: {input: path}), ``warmup`` inferences dropped, then ``runs`` timed."""

    label: str
    spec: RuntimeSpec
    feeds: Mapping[str, np.ndarray]
    feed_files: Mapping[str, str]
    warmup: int
    runs: int


#: launch(job) -> the job's ``runs`` latencies in ms; MeasureError where the runtime fails
Launch = Callable[[Job], list[float]]


@dataclass
class Measurement:
    """A runtime's per-process medians (ms, one per process, in round order), the latencies timed in all,
    and ``error`` (why it was dropped, None otherwise)."""

    label: str
    process_ms: list[float] = field(default_factory=list)
    samples: int = 0
    error: str | None = None

    @property
    def median_ms(self) -> float | None:
        """The median of the per-process medians; None where no process measured it."""
        return statistics.median(self.process_ms) if self.process_ms else None

    @property
    def noise(self) -> float | None:
        """The relative spread of the per-process medians, (max - min) / median; None under two."""
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
        }


def measure_runtimes(
    specs: Mapping[str, RuntimeSpec],
    feeds: Mapping[str, np.ndarray],
    *,
    rounds: int = 3,
    min_rounds: int = 2,
    warmup: int = 3,
    runs: int | Mapping[str, int] = 20,
    seed: int = 0,
    launch: Launch | None = None,
    more: Callable[[int], bool] | None = None,
    on_process: Callable[[str, int], None] | None = None,
) -> dict[str, Measurement]:
    """Time every runtime of ``specs`` ({label: spec}) alone in a process of its own, ``rounds`` times,
    each round in an order shuffled anew by ``random.Random(seed)``; after ``min_rounds`` the rounds stop
    where ``more(rounds_done)`` says False (a budget's clock). ``runs``: timed inferences per process (one
    number, or one per label); ``launch``: what runs one process (``in_worker`` by default).

    Returns {label: Measurement}, in the order of ``specs``: a runtime whose process fails (MeasureError)
    keeps its error and is not launched again."""
    launch = launch or in_worker
    found = {label: Measurement(label) for label in specs}
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="hetero-measure-") as folder:
        files = save_feeds(feeds, Path(folder))
        for round_ in range(max(1, rounds)):
            if round_ >= min_rounds and more is not None and not more(round_):
                break
            order = [label for label in specs if found[label].error is None]
            rng.shuffle(order)
            for label in order:
                count = runs if isinstance(runs, int) else runs.get(label, 20)
                if on_process is not None:
                    on_process(label, round_)
                try:
                    got = launch(Job(label, specs[label], feeds, files, warmup, max(1, count)))
                except MeasureError as exc:
                    found[label].error = str(exc)
                    continue
                found[label].process_ms.append(statistics.median(got))
                found[label].samples += len(got)
    return found


def save_feeds(feeds: Mapping[str, np.ndarray], folder: Path) -> dict[str, str]:
    """Each input saved as ``folder``/input<i>.npy (input names need not be file names): {input: path}."""
    files = {}
    for i, (name, value) in enumerate(feeds.items()):
        path = folder / f"input{i}.npy"
        np.save(path, np.asarray(value), allow_pickle=False)
        files[name] = str(path)
    return files


def in_worker(job: Job, timeout_s: float = WORKER_TIMEOUT_S) -> list[float]:
    """Run ``job`` in a fresh ``sys.executable -m hetero_cli.app.measure.worker`` process (this process's
    environment: thread settings made by environment variables hold there too) and return its latencies.
    Raises MeasureError naming the runtime where the worker fails, times out or answers nothing."""
    with tempfile.TemporaryDirectory(prefix="hetero-job-") as folder:
        job_file, out_file = Path(folder) / "job.json", Path(folder) / "out.json"
        doc = {
            "label": job.label,
            "spec": job.spec.to_dict(),
            "feeds": dict(job.feed_files),
            "warmup": job.warmup,
            "runs": job.runs,
            "out": str(out_file),
        }
        job_file.write_text(json.dumps(doc), encoding="utf-8")
        command = [sys.executable, "-m", WORKER_MODULE, str(job_file)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise MeasureError(f"{job.label}: its worker process took over {timeout_s:g} s") from None
        answer = json.loads(out_file.read_text(encoding="utf-8")) if out_file.exists() else {}
    if "samples" in answer:
        return [float(x) for x in answer["samples"]]
    why = answer.get("error") or _last_line(done.stderr) or f"exit status {done.returncode}, no answer"
    raise MeasureError(f"{job.label}: {why}")


def in_process(timer: Timer, prefix: str = "") -> Launch:
    """A Launch that builds and times the runtime in this process with ``timer`` (labels ``prefix`` +
    the runtime's): for tests, which answer from a table, and for a caller that has no process to spare."""

    def launch(job: Job) -> list[float]:
        try:
            run = job.spec.build(job.feeds)
            for _ in range(job.warmup):
                run()
            return timer(prefix + job.label, run, job.runs)
        except MeasureError as exc:
            raise MeasureError(f"{job.label}: {exc}") from None
        except Exception as exc:  # the runtime's failure is its result, as a worker's is
            raise MeasureError(f"{job.label}: {one_line(exc)}") from None

    return launch


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:240] if text else ''}"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def relative_gap(faster: Measurement, slower: Measurement) -> float | None:
    """How much faster ``faster`` is than ``slower``, as a fraction of the slower's median; None where
    either has no median."""
    a, b = faster.median_ms, slower.median_ms
    return None if a is None or not b else (b - a) / b


def noise_of(measurements: Sequence[Measurement], floor: float = 0.0) -> float:
    """The largest noise of ``measurements`` (those with one), at least ``floor``."""
    return max([floor, *(m.noise for m in measurements if m.noise is not None)])
