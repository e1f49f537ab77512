"""A worker process of measure_runtimes: ``python -m hetero_cli.app.measure.worker JOB.json``.

The job file (written by resident.WorkerProcess): {"label", "spec": RuntimeSpec.to_dict(), "feeds":
{input: .npy path}, "warmup", "runs"}. The worker builds the runtime and runs ``warmup`` inferences
(dropped), then answers one JSON line on its stdout: {"ready": true}, or {"error": "Type: message"} where
building or running fails (exit status 1). Then, for each line "block" on its stdin, it times ``runs``
inferences with wall_timer and answers {"samples": [ms, ...]} (or the error); at the end of its stdin it
exits with status 0. Whatever the runtime prints goes to its stderr: its stdout carries the answers only.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from .method import RuntimeSpec, one_line
from .resident import BLOCK
from .timer import wall_timer


def build(job: dict[str, Any]) -> Callable[[], object]:
    """The job's runtime built and warmed up: the callable that runs one inference. Raises what the
    builder or an inference raises."""
    feeds = {name: np.load(path, allow_pickle=False) for name, path in job["feeds"].items()}
    run = RuntimeSpec.from_dict(job["spec"]).build(feeds)
    for _ in range(int(job["warmup"])):
        run()
    return run


def serve(job: dict[str, Any], requests: IO[str], answer: Callable[[dict[str, Any]], None]) -> int:
    """Build the job's runtime, say it is ready, then time one block per "block" line of ``requests``;
    every answer through ``answer``. Returns the exit status: 0 at the end of ``requests``, 1 where the
    runtime failed (the error was answered)."""
    try:
        run = build(job)
    except Exception as exc:  # the runtime's failure is the answer: the parent records it for this runtime
        answer({"error": one_line(exc)})
        return 1
    answer({"ready": True})
    for line in requests:
        if line.strip() != BLOCK:
            continue
        try:
            samples = wall_timer(str(job["label"]), run, int(job["runs"]))
        except Exception as exc:  # as above: an inference that fails ends this runtime's measurement
            answer({"error": one_line(exc)})
            return 1
        answer({"samples": samples})
    return 0


def main(argv: list[str] | None = None) -> int:
    """Serve the job file named by the one argument (serve's exit status); 2 for no job file."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m hetero_cli.app.measure.worker JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # what the runtime prints, C++ included, to stderr

    def answer(doc: dict[str, Any]) -> None:
        channel.write(json.dumps(doc) + "\n")
        channel.flush()

    return serve(job, sys.stdin, answer)


if __name__ == "__main__":
    sys.exit(main())
