"""The one measuring method of hetero-cli (issue 30), shared by ``hetero tune``'s final decision and by
bench/'s comparisons: each candidate built and warmed up alone in a worker process of its own, the
candidates' processes taking turns to time short blocks (the others idle meanwhile), in rounds of fresh
processes; two candidates compare block by block (``paired``: a ratio and its noise).

    specs = {"CPU": RuntimeSpec("hetero_cli.app.measure.builders:hetero", {"path": "m.onnx", "device": "CPU"}),
             "OPENVINO": RuntimeSpec("hetero_cli.app.measure.builders:hetero", {"path": "m.onnx", "device": "OPENVINO"})}
    found = measure_runtimes(specs, feeds, rounds=3)
    vs = paired(found["OPENVINO"], found["CPU"])
    vs.ratio, vs.noise, found["CPU"].median_ms
"""

from .method import (
    Job,
    Launch,
    MeasureError,
    Measurement,
    Resident,
    RuntimeSpec,
    in_process,
    in_worker,
    measure_runtimes,
)
from .paired import Paired, paired
from .timer import Timer, wall_timer

__all__ = [
    "Job",
    "Launch",
    "MeasureError",
    "Measurement",
    "Paired",
    "Resident",
    "RuntimeSpec",
    "Timer",
    "in_process",
    "in_worker",
    "measure_runtimes",
    "paired",
    "wall_timer",
]
