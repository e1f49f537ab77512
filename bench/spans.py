"""Which ORT sessions a hetero-cli compile creates, when, and on which thread.

``record()`` swaps ``onnxruntime.InferenceSession`` for a subclass that notes each constructor's start, end
and thread while the block runs; hetero-cli looks the class up at call time, so its probe sessions, type
probes and subgraph sessions are all seen. From the spans: how many sessions a compile creates, how much
of its wall time they take, and whether any two were created at once (subgraph sessions compiled in
parallel). No timing noise decides that last point: only overlap of spans.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import onnxruntime as ort


@dataclass(frozen=True)
class Span:
    """One session constructor call."""

    start: float
    end: float
    thread: int
    providers: tuple[str, ...]


@contextlib.contextmanager
def record() -> Iterator[list[Span]]:
    """Within the block, every ``onnxruntime.InferenceSession(...)`` is appended to the yielded list."""
    spans: list[Span] = []
    original = ort.InferenceSession
    lock = threading.Lock()

    class Recording(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            start = time.perf_counter()
            try:
                super().__init__(*args, **kwargs)
            finally:
                providers = kwargs.get("providers") or (args[2] if len(args) > 2 else None) or ()
                names = tuple(p[0] if isinstance(p, tuple) else str(p) for p in providers)
                with lock:
                    spans.append(Span(start, time.perf_counter(), threading.get_ident(), names))

    ort.InferenceSession = Recording  # type: ignore[misc]
    try:
        yield spans
    finally:
        ort.InferenceSession = original  # type: ignore[misc]


def max_overlap(spans: list[Span]) -> int:
    """The largest number of constructors running at the same moment."""
    events = sorted([(s.start, 1) for s in spans] + [(s.end, -1) for s in spans], key=lambda e: (e[0], e[1]))
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def summary(spans: list[Span], wall_s: float) -> dict[str, Any]:
    """Session count, seconds inside constructors (summed), their share of ``wall_s``, peak overlap."""
    inside = sum(s.end - s.start for s in spans)
    return {
        "sessions": len(spans),
        "openvino_sessions": sum(1 for s in spans if s.providers[:1] == ("OpenVINOExecutionProvider",)),
        "threads": len({s.thread for s in spans}),
        "in_constructors_s": inside,
        "wall_s": wall_s,
        "constructor_share": inside / wall_s if wall_s > 0 else 0.0,
        "max_concurrent": max_overlap(spans),
    }
