"""A worker process of measure_runtimes: ``python -m hetero_cli.app.measure.worker JOB.json``.

The job file (written by method.in_worker): {"label", "spec": RuntimeSpec.to_dict(), "feeds": {input:
.npy path}, "warmup", "runs", "out": path}. The worker builds the runtime, runs ``warmup`` inferences
(dropped), times ``runs`` with wall_timer and writes {"samples": [ms, ...]} to ``out``, or {"error":
"Type: message"} where building or running fails (exit status 1).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .method import RuntimeSpec, one_line
from .timer import wall_timer


def work(job: dict[str, Any]) -> list[float]:
    """Build the job's runtime, warm it up, and return its timed latencies (ms). Raises what the builder
    or an inference raises."""
    feeds = {name: np.load(path, allow_pickle=False) for name, path in job["feeds"].items()}
    run = RuntimeSpec.from_dict(job["spec"]).build(feeds)
    for _ in range(int(job["warmup"])):
        run()
    return wall_timer(str(job["label"]), run, int(job["runs"]))


def main(argv: list[str] | None = None) -> int:
    """Run the job file named by the one argument; 0 where it was timed, 1 where it failed, 2 for no
    job file."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m hetero_cli.app.measure.worker JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    out = Path(job["out"])
    try:
        answer: dict[str, Any] = {"samples": work(job)}
    except Exception as exc:  # the runtime's failure is the answer: the parent records it for this runtime
        answer = {"error": one_line(exc)}
    out.write_text(json.dumps(answer), encoding="utf-8")
    return 0 if "samples" in answer else 1


if __name__ == "__main__":
    sys.exit(main())
