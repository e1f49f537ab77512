"""Partition scaling: ``hetero_cli.placement.partition.partition`` alone on synthetic graphs of growing size.

No session is created and no query runs: each node gets a random affinity (CPU or OPENVINO) and the
timer covers ``partition(model, affinities)`` only (building the Model is reported apart). Graph kinds,
all random DAGs of same-shape elementwise nodes (``graphs.partition_graph``):

* ``chain``: every node reads the one before it (no cycle between groups is possible);
* ``ladder``: every node reads one or two of the last 2 tensors (group cycles the partitioner must cut);
* ``dag``: every node reads one or two of the last 16 tensors.

Each kind runs in its own interpreter (``python bench/scaling.py KIND SIZE...``), so the harness's own
objects do not weigh on the garbage collector, and a runaway case is stopped by a timeout.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from worker import run_json

HERE = Path(__file__).resolve().parent
KINDS = {"chain": 1, "ladder": 2, "dag": 16}


def measure(kind: str, sizes: list[int], repeats: list[int], timeout_s: float) -> dict[str, Any]:
    """Run one kind in a subprocess; ``{"sizes": {size: {...}}}`` or ``{"error": ...}``."""
    cmd = [sys.executable, str(HERE / "scaling.py"), kind, json.dumps(sizes), json.dumps(repeats)]
    return run_json(cmd, timeout_s)


def _worker(kind: str, sizes: list[int], repeats: list[int]) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import graphs

    from hetero_cli.graph.model import Model
    from hetero_cli.placement.partition import partition

    result: dict[str, Any] = {"window": KINDS[kind], "sizes": {}}
    subjects = []
    for size in sizes:
        built = graphs.partition_graph(size, seed=0, window=KINDS[kind])
        start = time.perf_counter()
        model = Model(built.model)
        subjects.append((size, model, built.affinities))
        result["sizes"][str(size)] = {"nodes": size, "model_s": time.perf_counter() - start, "times_s": []}
    # the sizes take turns (size i every rounds/repeats[i] rounds), so a slow spell of the machine falls on
    # both; a short run's noise is its own, so the smaller graph is timed more often
    rounds = max(repeats)
    for r in range(rounds):
        for (size, model, affinities), count in zip(subjects, repeats, strict=True):
            if r % max(1, rounds // max(1, count)) or len(result["sizes"][str(size)]["times_s"]) >= count:
                continue
            entry = result["sizes"][str(size)]
            if "error" in entry:
                continue
            gc.collect()
            start = time.perf_counter()
            try:
                plan = partition(model, affinities)
            except Exception as exc:  # the partitioner's own failure is a result to report
                entry["error"] = f"{type(exc).__name__}: {exc}"
                entry["failed_after_s"] = time.perf_counter() - start
                continue
            entry["times_s"].append(time.perf_counter() - start)
            entry["subgraphs"] = len(plan.subgraphs)
            del plan
    for entry in result["sizes"].values():
        if entry["times_s"]:
            entry["median_s"] = statistics.median(entry["times_s"])
            entry["min_s"] = min(entry["times_s"])
        else:
            del entry["times_s"]
    return result


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]))))
