"""The one measuring method of hetero-cli (issue 30), shared by ``hetero tune``'s final decision and by
bench/'s comparisons: each candidate compiled and timed alone in a worker process of its own, several
rounds alternating the candidates in a seeded order, each process's warm-up dropped and its median kept;
a candidate's figure is the median of its per-process medians, its noise their relative spread.

    specs = {"CPU": RuntimeSpec("hetero_cli.app.measure.builders:hetero", {"path": "m.onnx", "device": "CPU"})}
    found = measure_runtimes(specs, feeds, rounds=3)
    found["CPU"].median_ms, found["CPU"].noise, found["CPU"].process_ms
"""

from .method import (
    Job,
    Launch,
    MeasureError,
    Measurement,
    RuntimeSpec,
    in_process,
    in_worker,
    measure_runtimes,
)
from .timer import Timer, wall_timer

__all__ = [
    "Job",
    "Launch",
    "MeasureError",
    "Measurement",
    "RuntimeSpec",
    "Timer",
    "in_process",
    "in_worker",
    "measure_runtimes",
    "wall_timer",
]
