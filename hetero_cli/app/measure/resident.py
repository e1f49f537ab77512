"""The parent's side of a worker process (worker.py): it builds one runtime, warms it up, then times a block
of inferences each time it is asked, until it is closed.

The worker answers in JSON lines on a channel of its own (its stdout; what the runtime prints goes to its
stderr, kept in a file for the error message), so that the parent's question and answer never mix with an
execution provider's output. A reader thread turns the lines into a queue, which makes every wait a wait
with a timeout.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from ...errors import HeteroError

#: the module a worker process runs
WORKER_MODULE = "hetero_cli.app.measure.worker"
#: what the parent writes on a worker's stdin to have it time one block
BLOCK = "block"


class WorkerError(HeteroError):
    """A worker process failed, took too long or stopped answering: the message says why."""


class WorkerProcess:
    """One runtime built and warmed up in a ``sys.executable -m hetero_cli.app.measure.worker`` process
    (this process's environment), waiting to time blocks.

        worker = WorkerProcess(job_doc, timeout_s=600, settle_s=0.05)   # started: it builds meanwhile
        worker.ready()                                                   # returns once it is built
        latencies_ms = worker.block()
        worker.close()

    ``job_doc``: the job as worker.py reads it. ``settle_s``: a quiet pause before each block, so that the
    idle threads of the process that timed before (an ONNX Runtime CPU session's spin after its run) have
    stopped. Several workers may build at once: start them all, then wait for each to be ready."""

    def __init__(self, job_doc: dict[str, Any], timeout_s: float, settle_s: float) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="hetero-job-")
        folder = Path(self._folder.name)
        job_file = folder / "job.json"
        job_file.write_text(json.dumps(job_doc), encoding="utf-8")
        self._stderr_path = folder / "stderr.txt"
        self._stderr: IO[bytes] = self._stderr_path.open("wb")
        self._timeout_s, self._settle_s = timeout_s, settle_s
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, str(job_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        threading.Thread(target=self._read, args=(self._proc.stdout,), daemon=True).start()
        self._ready = False

    def ready(self) -> None:
        """Wait until the worker has built and warmed up its runtime (at once after the first time).
        Raises WorkerError where it fails to, or takes over the timeout."""
        if not self._ready:
            self._answer("to build its runtime")
            self._ready = True

    def block(self) -> list[float]:
        """After the settle pause, the latencies (ms) of one block of the job's timed inferences. Raises
        WorkerError where the worker fails or takes over the timeout."""
        self.ready()
        time.sleep(self._settle_s)
        stdin = self._proc.stdin
        try:
            assert stdin is not None  # opened with PIPE
            stdin.write(BLOCK + "\n")
            stdin.flush()
        except OSError:
            raise WorkerError(self._why_stopped()) from None
        answer = self._answer("to time a block")
        return [float(x) for x in answer["samples"]]

    def close(self) -> None:
        """End the worker (its stdin closed: it exits; killed where it does not within 10 s) and remove its
        files. Idempotent."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):  # the worker is gone already: nothing left to tell it
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()
        self._folder.cleanup()

    def _answer(self, doing: str) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=self._timeout_s)
        except queue.Empty:
            self._proc.kill()
            raise WorkerError(f"its worker process took over {self._timeout_s:g} s {doing}") from None
        if line is None:
            raise WorkerError(self._why_stopped())
        answer = json.loads(line)
        if "error" in answer:
            raise WorkerError(str(answer["error"]))
        return answer

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None  # opened with PIPE
        for line in stream:
            if line.strip():
                self._lines.put(line)
        self._lines.put(None)

    def _why_stopped(self) -> str:
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # its answers' channel closed, but it has not exited
            self._proc.kill()
            code = self._proc.wait()
        self._stderr.flush()
        text = self._stderr_path.read_text(encoding="utf-8", errors="replace")
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return (
            lines[-1][:300] if lines else f"its worker process stopped (exit status {code}) without an answer"
        )
