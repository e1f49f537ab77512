"""Asynchronous inference, OpenVINO's InferRequest API: ``start_async`` runs a request stage by stage on
its compiled model's pipeline (runtime.pipeline, one worker thread per device), so several requests in
flight overlap across devices; ``wait``, ``wait_for`` and the callback follow it to completion.

A run's state machine: start_async checks the inputs and queues the first stage (``_launch``); each stage
(``_stage``) runs the subgraphs of one lane and queues the next lane's, all of the revision the run
started on (its course); a StepFailure sends the run back to its first subgraph with fresh buffers
(after runtime.recovery, on the revision it leaves current); the last stage, or a failure, completes it
(``_complete``): results, the user's callback, the completion hook, then the waiters wake.
"""

from __future__ import annotations

import functools
import math
import numbers
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InferenceError
from . import recovery
from .buffers import Buffers
from .failures import StepFailure
from .pipeline import Pipeline, in_flight
from .profiling import Window

if TYPE_CHECKING:
    from .executor import Course, Executor
    from .inputs import Inputs

# called as hook(request, failure or None) once an asynchronous inference has completed
CompletionHook = Callable[[Any, "InferenceError | None"], None]


@dataclass(eq=False)  # hashed by identity: in_flight counts each run by itself
class _Run:
    """One asynchronous inference in flight: its inputs, tensors and the next subgraph to run."""

    feeds: dict[str, np.ndarray]
    number: int  # the request's count of runs once accepted (0: not accepted)
    begin: float = 0.0
    course: Course | None = None  # what it runs: its compiled model's revision when it (re)started
    position: int = 0
    buffers: Buffers | None = None
    values: dict[str, Any] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    queued: bool = False  # its first stage is on a lane: the lanes complete it from now on
    completed: bool = False


class AsyncRequest:
    """InferRequest's asynchronous half (a mixin): start_async, wait, wait_for, set_callback, userdata and
    set_completion_hook. The request provides ``compiled``, ``_inputs`` (Inputs), ``_executor``
    (Executor), ``results``, ``_latency_ms``, ``_profiled`` and ``_history``."""

    compiled: Any
    results: dict[str, np.ndarray]
    _inputs: Inputs
    _executor: Executor
    _latency_ms: float
    _profiled: bool
    _history: list[list[Window]]

    def _init_async(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._cond = threading.Condition()
        self._busy = False
        self._ran = False  # a synchronous inference was run (wait_for's "ready" before any start_async)
        self._started = 0
        self._finished = 0
        self._error: InferenceError | None = None
        self._callback: Callable[[Any], None] | None = None
        self._userdata: Any = None
        self._completion_hook: CompletionHook | None = None

    def start_async(
        self,
        inputs: Mapping[str, Any] | Sequence[Any] | np.ndarray | None = None,
        userdata: Any = None,
        share_inputs: bool = False,
    ) -> None:
        """Start one inference on the device pipeline and return at once; inputs are checked here.

        The inputs are copied, as OpenVINO's ``start_async`` copies them: the caller may refill its arrays
        right away. ``share_inputs=True`` reads the caller's arrays while the inference runs instead
        (no copy; they must not change until wait() returns). ``userdata``, if given, is what the callback
        (set_callback) receives. Raises InferenceError, here, for inputs the model does not take (as
        infer), while the previous inference runs (one at a time per request: wait() first, or use an
        AsyncInferQueue), or once the interpreter is exiting; a failure while it runs is raised by wait().
        """
        feeds = self._inputs.owned(inputs, share_inputs)
        run = _Run(feeds, 0, begin=time.perf_counter())
        try:
            self._accept(run, userdata)
            run.course = self._executor.refresh()  # the current revision: the run keeps it to its end
            if not run.course.steps:  # only inputs and constants as outputs: nothing to run
                results = run.course.walk.collect({}, feeds, {})
                run.queued = True
                self._complete(run, None, results)
                return
            self._launch(run)
        except BaseException as exc:
            if not self._accepted(run):  # refused, or interrupted before: nothing to complete
                in_flight.end(run)
                raise
            if not run.queued:  # never reached a lane: the request must not stay busy; wait() re-raises it
                self._complete(run, exc)
            if not isinstance(exc, Exception):
                raise  # Ctrl-C and the like still stop the caller

    def _accept(self, run: _Run, userdata: Any) -> None:
        """Make ``run`` the request's inference in flight: from then on (``_accepted``) it is completed
        exactly once, by the lanes once its first stage is queued, else by start_async itself, and the
        completion hook is called then, and only for an accepted run. InferenceError while the previous
        inference runs, or once the interpreter exits (then nothing is accepted)."""
        with self._cond:
            if self._busy:
                raise InferenceError(
                    "this request is still running its previous asynchronous inference: call wait() first, "
                    "or use several requests (an AsyncInferQueue)"
                )
            run.number = self._started + 1
            in_flight.begin(run)  # refused once the interpreter exits; _complete ends it
            # accepted: this one store is the step (an AsyncInferQueue reads _started too), so a
            # KeyboardInterrupt lands either before it (nothing started) or after it (the run is completed)
            self._started = run.number
            self._busy = True
            self._error = None
            if userdata is not None:
                self._userdata = userdata

    def _accepted(self, run: _Run) -> bool:
        """Whether start_async accepted ``run`` (the request's ``_started`` counts it)."""
        return run.number > 0 and self._started >= run.number

    def wait(self) -> None:
        """Wait for the asynchronous inference (and its callback); at once if none was started. Re-raises
        its failure, or the callback's, as InferenceError; InferenceError too for a wait that would never
        end: in a callback, for an inference not done (refuse_wait_in_callback)."""
        with self._cond:
            if self._finished < self._started:
                self.refuse_wait_in_callback("wait()")
            self._cond.wait_for(lambda: self._finished >= self._started)
            error = self._error
        if error is not None:
            raise error

    def wait_for(self, timeout: int) -> bool:
        """Wait at most ``timeout`` milliseconds: True if a result is ready (failure re-raised as
        InferenceError), False if the inference still runs or, as in OpenVINO, the request has never run
        one. InferenceError for a timeout that is not a number >= 0."""
        if (
            not isinstance(timeout, numbers.Real)
            or isinstance(timeout, bool)
            or math.isnan(timeout)
            or timeout < 0
        ):
            raise InferenceError(
                f"wait_for takes a timeout of 0 or more milliseconds, not {timeout!r} (wait() waits without limit)"
            )
        seconds = min(float(timeout) / 1000.0, threading.TIMEOUT_MAX)
        with self._cond:
            done = self._cond.wait_for(
                lambda: self._finished >= self._started and (self._started > 0 or self._ran),
                seconds,
            )
            error = self._error if done else None
        if error is not None:
            raise error
        return bool(done)

    def refuse_wait_in_callback(self, call: str) -> None:
        """InferenceError where the calling thread is one of this request's pipeline threads, which run
        the callbacks: ``call`` there waits for inferences that need that thread (the request's own
        completes only once its callback returns), so it would never return, and the device's pipeline
        would stay stuck with it."""
        if self._pipeline.runs_here():
            raise InferenceError(
                f"{call} inside a callback would wait for the pipeline thread that runs the callback, and "
                "never return: wait once the callback has returned, or use wait_for(timeout)"
            )

    def set_callback(self, callback: Callable[[Any], None] | None, userdata: Any = None) -> None:
        """``callback(userdata)`` when an asynchronous inference succeeds (on a pipeline thread: keep it
        short); a failure is not passed to it but re-raised by wait(), as is an exception it raises.
        None removes it; InferenceError for a callback that is not callable."""
        if callback is not None and not callable(callback):
            raise InferenceError(f"the callback must be callable, not {type(callback).__name__}")
        with self._cond:
            self._callback = callback
            self._userdata = userdata

    def set_completion_hook(self, hook: CompletionHook | None) -> None:
        """``hook(request, failure)`` after every asynchronous inference completes, success or not (failure
        None on success; the callback's own failure included), after the callback and before wait()
        returns, on the thread that completed it: how a pool of requests (AsyncInferQueue) learns that one
        is idle again. One hook per request; None removes it; InferenceError for one that is not callable."""
        if hook is not None and not callable(hook):
            raise InferenceError(f"the completion hook must be callable, not {type(hook).__name__}")
        self._completion_hook = hook

    @property
    def userdata(self) -> Any:
        """The userdata the callback receives (from set_callback, or the last start_async that gave one)."""
        return self._userdata

    def _launch(self, run: _Run) -> None:
        """Queue ``run``'s first subgraph of its course, with fresh buffers."""
        assert run.course is not None
        run.buffers = run.course.pool.take()
        run.values = run.course.walk.values(run.feeds, run.buffers)
        run.windows = []
        run.position = 0
        run.queued = False
        self._pipeline.submit(run.course.steps[0].lane, functools.partial(self._stage, run))
        run.queued = True

    def _stage(self, run: _Run) -> None:
        """Run the request's subgraphs on this lane until the next one belongs to another lane."""
        executor, pipeline, course = self._executor, self._pipeline, run.course
        assert run.buffers is not None and course is not None
        walk = course.walk
        steps = course.steps
        i = run.position
        lane = steps[i].lane
        try:
            while True:
                observer = pipeline.observer
                if observer is not None:
                    observer("start", self, i, lane)
                try:
                    walk.run_step(steps[i], run.values, run.buffers, run.windows)
                finally:
                    if observer is not None:
                        observer("end", self, i, lane)
                i += 1
                if i == len(steps):
                    break
                if steps[i].lane != lane:
                    run.position = i
                    pipeline.submit(steps[i].lane, functools.partial(self._stage, run))
                    return
            results = walk.collect(run.values, run.feeds, run.buffers.views)
            executor.inputs.explain_empty(run.feeds, results)
        except StepFailure as failed:
            run.queued = False  # off its lane: queued again only once _launch has submitted it
            try:
                failed.values = run.values
                recovery.recover(self.compiled, walk, failed, run.feeds)
                run.course = executor.refresh()
                self._launch(run)  # from the first subgraph again, with fresh buffers (a new revision's)
            except BaseException as exc:
                if not run.queued:
                    self._complete(run, exc)
            return
        except BaseException as exc:
            self._complete(run, exc)
            return
        course.pool.give(run.buffers)
        executor.proved(course)
        self._complete(run, None, results)

    def _complete(
        self, run: _Run, error: BaseException | None, results: dict[str, np.ndarray] | None = None
    ) -> None:
        """Finish an asynchronous inference: results, callback, the completion hook, then wake the waiters.
        Only once per run (a start_async interrupted right as its job was queued completes it itself), and
        whatever raises on the way (a KeyboardInterrupt where start_async completes a run on the caller's
        thread): the hook, the waiters and the exit's count are served in ``finally``."""
        mine = False
        failure: InferenceError | None = None
        try:
            with self._cond:
                if run.completed:
                    return
                run.completed = mine = True
            if error is not None:
                failure = (
                    error
                    if isinstance(error, InferenceError)
                    else InferenceError(f"the asynchronous inference failed: {type(error).__name__}: {error}")
                )
            else:
                assert results is not None
                self.results = results
                if self._profiled:
                    self._history.append(run.windows)
            self._latency_ms = (time.perf_counter() - run.begin) * 1e3
            with self._cond:
                self._busy = False
                self._error = failure
                callback, userdata = self._callback, self._userdata
            if failure is None and callback is not None:
                failure = self._call_back(run, callback, userdata)
        finally:
            if mine:
                self._finish(run, failure)

    def _call_back(self, run: _Run, callback: Callable[[Any], None], userdata: Any) -> InferenceError | None:
        """The user's callback; its failure (None if it returned), recorded for wait() unless the callback
        started the request again."""
        try:
            callback(userdata)
        except BaseException as exc:  # SystemExit too: wait() re-raises it, nothing hangs
            failure = InferenceError(f"the request's callback raised {type(exc).__name__}: {exc}")
            failure.__cause__ = exc
            with self._cond:
                if self._started == run.number:  # not already started again by the callback
                    self._error = failure
            return failure
        return None

    def _finish(self, run: _Run, failure: InferenceError | None) -> None:
        """The end of _complete: the completion hook, then the waiters woken and the run no longer in flight."""
        try:
            hook = self._completion_hook
            if hook is not None:
                hook(self, failure)  # type: ignore[arg-type]
        finally:
            with self._cond:
                if self._started == run.number:  # not started again (by its callback): idle
                    self._busy = False
                self._finished += 1
                self._cond.notify_all()
            in_flight.end(run)
