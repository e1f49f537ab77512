"""Pipelining: asynchronous requests run stage by stage on one worker thread per device (lane).

Like OpenVINO's HETERO, each device is one pipeline stage: a request's subgraph i is queued on the lane
of subgraph i's device and, once run, its next subgraph on the next lane, so several requests in flight
overlap across devices (request B's first subgraph runs while request A's second does). ONNX Runtime
releases the GIL while a session runs, so the lanes really run at once.

    queue = hetero_cli.AsyncInferQueue(compiled, jobs=4)
    queue.set_callback(lambda request, userdata: results.append((userdata, request.results)))
    for k, x in enumerate(batches):
        queue.start_async({"x": x}, userdata=k)
    queue.wait_all()

Lanes are created lazily, one per device, by the compiled model's pipeline (``pipeline_of``); their
threads are daemons, stopped when the compiled model is garbage collected or ``close()`` is called.

A pipeline's ``observer`` is its public hook: called around every subgraph a lane runs, it lets tracing
record the stages and tests hold one to see requests overlap:

    pipeline_of(compiled).observer = lambda event, request, position, lane: print(event, position, lane)
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import queue
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InferenceError

if TYPE_CHECKING:
    from .compiled_model import CompiledModel
    from .infer_request import InferRequest

log = logging.getLogger("hetero_cli")

Job = Callable[[], None]
# observer(event, request, subgraph position, lane): "start" / "end" around every stage a lane runs
Observer = Callable[[str, Any, int, str], None]

_ATTRIBUTE = "_hetero_pipeline"
_create_lock = threading.Lock()
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


def pipeline_of(compiled: CompiledModel) -> Pipeline:
    """The compiled model's pipeline, created on first use and closed when the model is collected."""
    found = compiled.__dict__.get(_ATTRIBUTE)
    if found is not None:
        return found
    with _create_lock:
        found = compiled.__dict__.get(_ATTRIBUTE)
        if found is None:
            found = Pipeline(getattr(compiled.model, "name", "model"))
            setattr(compiled, _ATTRIBUTE, found)
            # not at exit: lanes closed then would start again for the next stages of the inferences in
            # flight (in_flight.drain waits for those), a new thread where Python 3.12 refuses one
            weakref.finalize(compiled, found.close, 1.0).atexit = False
    return found


class AsyncInferQueue:
    """A pool of infer requests run asynchronously, like ``openvino.AsyncInferQueue``.

    ``start_async`` takes the next idle request (waiting for one if all are busy) and starts it; the
    callback set with ``set_callback`` is called as ``callback(request, userdata)`` when a request
    completes successfully (on a lane's thread: keep it short). A failed inference, or a callback that
    raised, is re-raised as InferenceError by the next ``start_async``, ``get_idle_request_id``,
    ``is_ready`` or ``wait_all``, after which the queue is usable again.

    ``jobs``: the number of requests, 0 for the compiled model's OPTIMAL_NUMBER_OF_INFER_REQUESTS (one per
    device it runs on). InferenceError for something that is no compiled model, or jobs not an int >= 0.
    """

    def __init__(self, compiled: CompiledModel, jobs: int = 0) -> None:
        # a CompiledModel (duck-typed: this module may not import compiled_model, which imports it), not its
        # class, nor another library's compiled model (openvino.CompiledModel has no plan)
        if (
            isinstance(compiled, type)
            or not callable(getattr(compiled, "create_infer_request", None))
            or not hasattr(compiled, "plan")
        ):
            raise InferenceError(
                f"AsyncInferQueue takes a compiled model (Core().compile_model(...)), not {type(compiled).__name__}"
            )
        if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 0:
            raise InferenceError(f"jobs must be a whole number >= 0 (0: the optimal number), not {jobs!r}")
        if jobs == 0:
            jobs = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self._compiled = compiled
        self._requests: list[InferRequest] = [compiled.create_infer_request() for _ in range(jobs)]
        self._userdata: list[Any] = [None] * jobs
        self._idle: collections.deque[int] = collections.deque(range(jobs))
        self._errors: list[InferenceError] = []
        self._callback: Callable[[InferRequest, Any], None] | None = None
        self._cond = threading.Condition()
        completed = weakref.WeakMethod(self._completed)
        self._hooks = [_Hook(completed, k) for k in range(jobs)]
        for request, hook in zip(self._requests, self._hooks, strict=True):
            request.set_completion_hook(hook)

    # --- OpenVINO's AsyncInferQueue API ---------------------------------------------------------------

    def start_async(
        self,
        inputs: Mapping[str, Any] | Sequence[Any] | Any | None = None,
        userdata: Any = None,
        share_inputs: bool = False,
    ) -> None:
        """Run one inference on the next idle request (waits for one); inputs are checked right away and,
        unless ``share_inputs``, copied (the caller may refill its arrays at once), as OpenVINO does.
        ``userdata`` is what the callback receives with the request. Raises InferenceError for inputs the
        model does not take, or for an earlier inference's failure not yet raised (then nothing starts).
        """
        k, before = -1, -1
        try:
            with self._cond:
                self._cond.wait_for(lambda: self._idle or self._errors)
                self._raise_errors()
                k = self._idle[0]
                self._idle.popleft()  # request k is this call's now (until its job starts)
            request, hook = self._requests[k], self._hooks[k]
            hook.userdata = userdata
            hook.queue = self  # a queue the caller dropped still calls back for the jobs it started
            before = request._started  # the request counts the runs it accepts
            request.start_async(inputs, share_inputs=share_inputs)
        except BaseException:
            # Whoever owns request k gives it back, once: its completion hook if it accepted the job (the
            # request then completes it, wherever this raised), else this call.
            if k >= 0 and not (before >= 0 and self._requests[k]._started != before):
                self._hooks[k].queue = None
                self._give_back(k, first=True)
            raise
        self._userdata[k] = userdata

    def set_callback(self, callback: Callable[[InferRequest, Any], None] | None) -> None:
        """``callback(request, userdata)`` for every request that completes successfully (None: no callback);
        InferenceError for a callback that is not callable."""
        if callback is not None and not callable(callback):
            raise InferenceError(f"the callback must be callable, not {type(callback).__name__}")
        self._callback = callback

    def wait_all(self) -> None:
        """Wait until every request is idle (callbacks done); re-raise the first failure since the last check."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._idle) == len(self._requests))
            self._raise_errors()

    def is_ready(self) -> bool:
        """True when a request is idle (start_async would not wait); does not wait itself. Re-raises a
        pending failure."""
        with self._cond:
            self._raise_errors()
            return bool(self._idle)

    def get_idle_request_id(self) -> int:
        """The id (index into the queue) of an idle request, waiting for one if all are busy; re-raises a
        pending failure as the other calls do."""
        with self._cond:
            self._cond.wait_for(lambda: self._idle or self._errors)
            self._raise_errors()
            return self._idle[0]

    @property
    def userdata(self) -> list[Any]:
        """The userdata last given to start_async, per request id."""
        return list(self._userdata)

    def __len__(self) -> int:
        """Number of requests in the pool."""
        return len(self._requests)

    def __getitem__(self, i: int) -> InferRequest:
        """The request with id ``i`` (read its results; start it through the queue only)."""
        return self._requests[i]

    def __iter__(self) -> Iterator[InferRequest]:
        """The pool's requests, by id."""
        return iter(self._requests)

    def __repr__(self) -> str:
        return f"<AsyncInferQueue of {len(self._requests)} request(s), {len(self._idle)} idle>"

    # --- helpers -------------------------------------------------------------------------------------

    def _raise_errors(self) -> None:
        """Called with the condition held: raise the first pending failure and forget them all."""
        if self._errors:
            first, self._errors = self._errors[0], []
            raise first

    def _give_back(self, k: int, failure: InferenceError | None = None, *, first: bool = False) -> None:
        """Request ``k`` is idle again (at the head of the idle list with ``first``: the one a refused job
        took), at most once in the list however its job ended; ``failure`` is raised by the next call."""
        with self._cond:
            if failure is not None:
                self._errors.append(failure)
            if k not in self._idle:
                if first:
                    self._idle.appendleft(k)
                else:
                    self._idle.append(k)
            self._cond.notify_all()

    def _completed(self, k: int, request: InferRequest, error: BaseException | None, userdata: Any) -> None:
        """Request ``k`` finished a job the queue started (on a lane's thread, or on start_async's when it
        completed the job itself): call the user's callback with the job's ``userdata``, then mark it idle."""
        failure: InferenceError | None = None
        try:
            if error is not None:
                failure = error if isinstance(error, InferenceError) else InferenceError(str(error))
            elif self._callback is not None:
                try:
                    self._callback(request, userdata)
                except BaseException as exc:  # SystemExit too: the request goes idle, wait_all() re-raises it
                    failure = InferenceError(
                        f"the AsyncInferQueue callback raised on request {k}: {type(exc).__name__}: {exc}"
                    )
                    failure.__cause__ = exc
        finally:
            self._give_back(k, failure)


class _Hook:
    """A request's link back to its queue: weak while the request is idle, so that a dropped queue can be
    collected, and strong (``queue``) while it runs a job the queue started, whose ``userdata`` it holds."""

    __slots__ = ("k", "method", "queue", "userdata")

    def __init__(self, method: weakref.WeakMethod, k: int):
        self.method = method
        self.k = k
        self.queue: AsyncInferQueue | None = None
        self.userdata: Any = None

    def __call__(self, request: InferRequest, error: BaseException | None) -> None:
        completed = self.method()  # a strong reference first: dropping ``queue`` may free the queue
        self.queue = None
        if completed is not None:
            completed(self.k, request, error, self.userdata)
