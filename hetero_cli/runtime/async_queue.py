"""AsyncInferQueue: a pool of infer requests run asynchronously, OpenVINO's ``openvino.AsyncInferQueue``.

    queue = hetero_cli.AsyncInferQueue(compiled, jobs=4)
    queue.set_callback(lambda request, userdata: results.append((userdata, request.results)))
    for k, x in enumerate(batches):
        queue.start_async({"x": x}, userdata=k)
    queue.wait_all()

Each request runs stage by stage on the compiled model's pipeline (runtime.pipeline), so the jobs in
flight overlap across devices.
"""

from __future__ import annotations

import collections
import numbers
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InferenceError
from .infer_request import InferRequest

if TYPE_CHECKING:
    from .compiled_model import CompiledModel


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
        # a CompiledModel (duck-typed: it is the compiled model that makes the requests), not its
        # class, nor another library's compiled model (openvino.CompiledModel has no plan)
        if (
            isinstance(compiled, type)
            or not callable(getattr(compiled, "create_infer_request", None))
            or not hasattr(compiled, "plan")
        ):
            raise InferenceError(
                f"AsyncInferQueue takes a compiled model (Core().compile_model(...)), not {type(compiled).__name__}"
            )
        if not isinstance(jobs, numbers.Integral) or isinstance(jobs, bool) or jobs < 0:
            raise InferenceError(f"jobs must be a whole number >= 0 (0: the optimal number), not {jobs!r}")
        jobs = int(jobs)  # numpy's integers too
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
                if not (self._idle or self._errors):
                    self._requests[0].refuse_wait_in_callback("start_async() with every request busy")
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
            if len(self._idle) < len(self._requests):
                self._requests[0].refuse_wait_in_callback("wait_all()")
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
            if not (self._idle or self._errors):
                self._requests[0].refuse_wait_in_callback("get_idle_request_id() with every request busy")
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
