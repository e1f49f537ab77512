"""What a serving engine gives the HTTP app: a Backend (the model's tensors, readiness, ``await infer``) and
the Metrics it keeps (requests, their latency, each stage's time), which ``/metrics`` renders in
Prometheus' text format.

    metrics = Metrics(backend.name, backend.stage_names())
    app = make_app(backend, metrics, max_body_bytes=64 << 20)

The HTTP app counts requests and their latency; a backend records each stage's seconds itself
(``metrics.observe_stage``), where its stages run: the local engine from its pipeline's lanes, the Ray
engine from its stage deployments' answers.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from .protocol import TensorSpec

__all__ = ["DEFAULT_BUCKETS", "Backend", "Metrics", "TensorSpec"]

#: the latency histogram's upper bounds, in seconds (Prometheus' default buckets, and 1 ms below them)
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip


@runtime_checkable
class Backend(Protocol):
    """A model being served: ``name`` (the model's name in URLs), its ``inputs`` and ``outputs`` as KServe
    sees them, ``ready()`` once it can infer, ``await infer(feeds)`` -> {output name: array} for inputs the
    protocol has checked (raises InferenceError where the model refuses them), and ``stage_names()``, the
    stages whose time Metrics reports (subgraphs, in execution order).

    Optional: ``missing() -> list[str]``, what keeps it from answering now, one line each (a stage that
    cannot run, a stop under way); empty when ready. The readiness routes answer 503 with those lines."""

    name: str
    inputs: Sequence[TensorSpec]
    outputs: Sequence[TensorSpec]

    def ready(self) -> bool: ...

    async def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    def stage_names(self) -> list[str]: ...


class Metrics:
    """A served model's counters, safe to update from any thread: requests by outcome (success, failure, cut),
    a latency histogram of successful requests, and each stage's runs and seconds.

    ``model``: the model's name (a label on every series); ``stages``: the stage names reported even
    before they run; ``buckets``: the histogram's upper bounds in seconds, ascending."""

    def __init__(
        self, model: str, stages: Sequence[str] = (), buckets: Sequence[float] = DEFAULT_BUCKETS
    ) -> None:
        self.model = model
        self.buckets = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self._requests = {"success": 0, "failure": 0, "cut": 0}
        self._in_flight = 0
        self._bucket_counts = [0] * len(self.buckets)
        self._latency_sum = 0.0
        self._latency_count = 0
        self._stage_seconds: dict[str, float] = dict.fromkeys(stages, 0.0)
        self._stage_runs: dict[str, int] = dict.fromkeys(stages, 0)

    def request_started(self) -> None:
        """One more infer request in flight (until its observe_request)."""
        with self._lock:
            self._in_flight += 1

    def observe_request(self, seconds: float, ok: bool, *, cut: bool = False) -> None:
        """Count one infer request that took ``seconds``, no longer in flight: a successful one (``ok``)
        goes into the histogram; one the server ``cut`` (its deadline passed, or a stop did not wait for
        it) counts as such, else as a failure."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
            self._requests["success" if ok else "cut" if cut else "failure"] += 1
            if not ok:
                return
            self._latency_sum += seconds
            self._latency_count += 1
            at = bisect.bisect_left(self.buckets, seconds)
            if at < len(self.buckets):
                self._bucket_counts[at] += 1

    def observe_stage(self, stage: str, seconds: float) -> None:
        """Add one run of ``stage`` that took ``seconds``."""
        with self._lock:
            self._stage_seconds[stage] = self._stage_seconds.get(stage, 0.0) + seconds
            self._stage_runs[stage] = self._stage_runs.get(stage, 0) + 1

    def requests(self, outcome: str = "success") -> int:
        """The requests counted with ``outcome``: "success", "failure" (refused, or failed), or "cut" (the
        server stopped waiting: a deadline, a stop)."""
        with self._lock:
            return self._requests[outcome]

    def in_flight(self) -> int:
        """The infer requests started and not yet answered."""
        with self._lock:
            return self._in_flight

    def stage_runs(self) -> dict[str, int]:
        """Each stage's runs so far."""
        with self._lock:
            return dict(self._stage_runs)

    def render(self) -> str:
        """Every series in Prometheus' text exposition format (version 0.0.4)."""
        with self._lock:
            label = f'model="{_escape(self.model)}"'
            lines = [
                "# HELP hetero_requests_total Infer requests answered, by outcome.",
                "# TYPE hetero_requests_total counter",
                *(f'hetero_requests_total{{{label},outcome="{k}"}} {v}' for k, v in self._requests.items()),
                "# HELP hetero_requests_in_flight Infer requests being answered now.",
                "# TYPE hetero_requests_in_flight gauge",
                f"hetero_requests_in_flight{{{label}}} {self._in_flight}",
                "# HELP hetero_request_duration_seconds Latency of successful infer requests.",
                "# TYPE hetero_request_duration_seconds histogram",
            ]
            running = 0
            for bound, count in zip(self.buckets, self._bucket_counts, strict=True):
                running += count
                lines.append(f'hetero_request_duration_seconds_bucket{{{label},le="{bound:g}"}} {running}')
            lines += [
                f'hetero_request_duration_seconds_bucket{{{label},le="+Inf"}} {self._latency_count}',
                f"hetero_request_duration_seconds_sum{{{label}}} {self._latency_sum!r}",
                f"hetero_request_duration_seconds_count{{{label}}} {self._latency_count}",
                "# HELP hetero_stage_seconds_total Seconds spent running each stage (subgraph).",
                "# TYPE hetero_stage_seconds_total counter",
                *(
                    f'hetero_stage_seconds_total{{{label},stage="{_escape(s)}"}} {v!r}'
                    for s, v in self._stage_seconds.items()
                ),
                "# HELP hetero_stage_runs_total Runs of each stage (subgraph).",
                "# TYPE hetero_stage_runs_total counter",
                *(
                    f'hetero_stage_runs_total{{{label},stage="{_escape(s)}"}} {v}'
                    for s, v in self._stage_runs.items()
                ),
            ]
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    """A label value as Prometheus' text format writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
