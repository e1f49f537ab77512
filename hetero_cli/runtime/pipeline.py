"""Pipelining: asynchronous requests run stage by stage on one worker thread per device (lane).

Like OpenVINO's HETERO, each device is one pipeline stage: a request's subgraph i is queued on the lane
of subgraph i's device and, once run, its next subgraph on the next lane, so several requests in flight
overlap across devices (request B's first subgraph runs while request A's second does). ONNX Runtime
releases the GIL while a session runs, so the lanes really run at once.

Each compiled model has one Pipeline (CompiledModel.pipeline); its lanes are created lazily, one per
device, and their threads are daemons, stopped when the compiled model is garbage collected or
``close()`` is called. Its ``observer`` is its public hook: called around every subgraph a lane runs, it
lets tracing record the stages and tests hold one to see requests overlap:

    compiled.pipeline.observer = lambda event, request, position, lane: print(event, position, lane)
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from ..errors import InferenceError

log = logging.getLogger("hetero_cli")

Job = Callable[[], None]
# observer(event, request, subgraph position, lane): "start" / "end" around every stage a lane runs
Observer = Callable[[str, Any, int, str], None]

EXIT_WAIT_S = 10.0  # a longer wait is more likely a stuck callback than an inference


class _InFlight:
    """The asynchronous inferences running in this process: at exit, new ones are refused and those in
    flight are waited for, so that no lane thread is left inside an ONNX Runtime run while the process
    tears down (that aborts it: "terminate called without an active exception").

    Each inference is counted by its own token (a request's run), so that ending one twice, or one that
    never began, changes nothing: a start_async interrupted (Ctrl-C) between the two steps cannot leave a
    count behind for the exit to wait on."""

    def __init__(self) -> None:
        self._reset()
        # a forked child has none of the parent's lane threads, so none of its inferences in flight
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._tokens: set[object] = set()
        self._exiting = False

    @property
    def count(self) -> int:
        """The inferences in flight now."""
        with self._cond:
            return len(self._tokens)

    def begin(self, token: object) -> None:
        """The inference ``token`` (hashable by identity) starts; InferenceError once the interpreter is
        exiting."""
        with self._cond:
            if self._exiting:
                raise InferenceError("the interpreter is exiting: no new asynchronous inference starts")
            self._tokens.add(token)

    def end(self, token: object) -> None:
        """The inference ``token`` has completed (callback included), or never started: no longer waited for."""
        with self._cond:
            self._tokens.discard(token)
            self._cond.notify_all()

    def drain(self, timeout_s: float = EXIT_WAIT_S) -> None:
        """Refuse new inferences and wait up to ``timeout_s`` for those in flight (atexit)."""
        with self._cond:
            self._exiting = True
            self._cond.wait_for(lambda: not self._tokens, timeout_s)


in_flight = _InFlight()
atexit.register(in_flight.drain)


class _Lane:
    """One device's worker thread and its FIFO of stage jobs."""

    def __init__(self, owner: str, key: str):
        self.key = key
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._work, name=f"hetero-{owner}-{key}", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            try:
                job()
            except BaseException:  # stage jobs complete their request with their own errors; never die here
                log.exception("a pipeline stage on %s raised outside its request", self.key)
            del job  # an idle lane must not keep the last request (and its compiled model) alive


class Pipeline:
    """Worker threads, one per device lane, that run the subgraphs of asynchronous requests.

    ``observer`` (None by default) is public: if set, it is called on the lane's thread right before and
    after each subgraph it runs, as ``observer("start" | "end", request, subgraph position, lane)``
    (tracing; tests hold a stage in it). It is read once per subgraph: set or clear it at any time. What
    it raises fails that request's inference (wait() re-raises it).
    """

    def __init__(self, name: str = "pipeline") -> None:
        self.name = name
        self.observer: Observer | None = None
        self._lanes: dict[str, _Lane] = {}
        self._lock = threading.Lock()

    def runs_here(self) -> bool:
        """Whether the calling thread is one of this pipeline's lanes (a callback of its requests runs
        there: waiting there for its requests can wait for that thread itself)."""
        me = threading.current_thread()
        return any(lane.thread is me for lane in list(self._lanes.values()))

    @property
    def lanes(self) -> list[str]:
        """Lanes started so far (device names), in order of first use."""
        return list(self._lanes)

    def submit(self, lane: str, job: Job) -> None:
        """Queue ``job`` on ``lane``'s thread (started on first use); jobs of one lane run in order."""
        worker = self._lanes.get(lane)
        if worker is None:
            with self._lock:
                worker = self._lanes.get(lane)
                if worker is None:
                    worker = self._lanes[lane] = _Lane(self.name, lane)
        worker.jobs.put(job)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop every lane once the jobs already queued have run; a later submit starts fresh lanes.

        Waits up to ``timeout_s`` for each thread, except the calling one (a finalizer may run on a lane).
        """
        with self._lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            lane.jobs.put(None)
        me = threading.current_thread()
        for lane in lanes:
            if lane.thread is not me:
                lane.thread.join(timeout_s)
