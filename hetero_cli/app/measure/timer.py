"""The timer every measurement of hetero-cli goes through: ``count`` wall-clock latencies of a callable.

It is a parameter wherever something is timed (``Timer``): the tests inject one that answers from a table,
so that choices made on measurements can be checked without asserting any speed.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

#: timer(label, run, count) -> count latencies in ms of ``run()``; label names what is timed
#: ("candidate:CPU", "region:3:OPENVINO", "boundary:split:1000000", "probe:automatic")
Timer = Callable[[str, Callable[[], object], int], list[float]]


def wall_timer(label: str, run: Callable[[], object], count: int) -> list[float]:
    """``count`` wall-clock latencies (ms) of ``run()`` back to back, the garbage collector off meanwhile
    (a collection inside a run would land in one sample). ``label`` is unused: a real timer needs none."""
    del label
    samples = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(count):
            begin = time.perf_counter()
            run()
            samples.append((time.perf_counter() - begin) * 1e3)
    finally:
        if enabled:
            gc.enable()
    return samples
