"""Execution: run a request's steps (its compiled model's subgraph sessions, in order) on its feeds.

Intermediate tensors stay OrtValues from producer to consumer (no numpy round trip). An inference takes
one of five paths, the fastest its buffer set allows:

- straight (runtime.straight): every subgraph pre-bound, the caller's dict exactly the static inputs'
  arrays, every model output copied out of a buffer;
- whole (runtime.whole): one host session runs the whole model, as ORT's own ``InferenceSession.run``
  (where straight does not serve: a large output, a dynamic shape);
- direct (``run_direct``): every subgraph pre-bound: bind the model inputs, run the sessions back to back;
- bound (``run_step`` over a Binding): a subgraph's outputs pre-bound, its inputs bound per run;
- unbound (``run_step`` otherwise): outputs made per inference (dynamic shapes, profiled subgraphs) and
  released after their last consumer; between subgraphs on one CUDA device they stay there (IOBinding).

A pre-bound run that fails, or a session that refuses a tensor's shape, raises BoundFailure; ``recheck``
tells why (and recovers: the subgraph compiled again, or its outputs made per inference from then on)
before the inference starts over with fresh buffers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InferenceError
from ..ort import values as ortv
from ..ort.values import CPU, RUN_OPTIONS, OrtValue, from_numpy, to_numpy
from ..placement.partition import CONSTANT, INPUT
from . import fallback as falling
from .buffers import Binding, BufferPool, Buffers
from .failures import BoundFailure, failure, refused_inputs
from .inputs import Inputs
from .profiling import Window
from .results import Results
from .shape_check import contradiction
from .steps import Step, plan_steps, step_feeds
from .whole import Whole

if TYPE_CHECKING:
    from .compiled_model import CompiledModel
    from .revision import Revision

log = logging.getLogger("hetero_cli")


@dataclass(frozen=True)
class Course:
    """What a request runs for one revision of its compiled model: the ``revision``, its ``steps`` and the
    ``pool`` of buffer sets made for them. An inference takes one when it starts and keeps it to its end."""

    revision: Revision
    steps: tuple[Step, ...]
    pool: BufferPool


class Executor:
    """Runs ``compiled``'s steps for a request whose inputs ``inputs`` checks; holds its course (steps and
    buffer pool) for the compiled model's current revision.

    Safe to share between threads: each inference in flight takes a buffer set of its own, and runs the
    course it took when it started.
    """

    def __init__(self, compiled: CompiledModel, inputs: Inputs):
        self.compiled = compiled
        self.inputs = inputs
        self.output_sources = tuple(compiled.plan.output_sources.items())
        self.output_names = tuple(name for name, _ in self.output_sources)
        self._lock = threading.Lock()
        self.course = self._course(compiled.current(), frozenset())
        self._proven: Course | None = None  # the course whose steps completed an inference

    def _course(self, revision: Revision, unbound: frozenset[int]) -> Course:
        """A course for ``revision``; ``unbound``: positions of the steps whose outputs are made per
        inference (carried over from the last course)."""
        sources = tuple(revision.plan.output_sources.items())
        pool = BufferPool(self.inputs.exact, self.inputs.names, sources, unbound)
        return Course(revision, tuple(plan_steps(self.compiled, revision)), pool)

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps of the course the next inference runs (as far as it is known now)."""
        return self.course.steps

    @property
    def pool(self) -> BufferPool:
        """The buffer pool of the current course."""
        return self.course.pool

    def refresh(self) -> Course:
        """The course of the compiled model's current revision: planned again where relax or a fallback
        swapped in a new one. Called when an inference starts; it runs what this returns to its end."""
        course = self.course
        current = self.compiled.current()
        if course.revision is current:
            return course
        with self._lock:
            course = self.course
            if course.revision is not current:
                course = self.course = self._course(current, course.pool.unbound)
            return course

    def proved(self, course: Course) -> None:
        """After an inference of ``course`` completed: its subgraphs are proven (HETERO_FALLBACK never moves
        them at run time from now on: a later failure is the input's)."""
        if self._proven is not course:
            for step in course.steps:
                step.compiled.prove()
            self._proven = course

    def infer(self, inputs: Any, windows: list[Window]) -> Results:
        """Run one inference on the caller's ``inputs`` (checked here: InferenceError) and return its
        outputs; profiled subgraphs' runs are added to ``windows``. InferenceError if a subgraph fails."""
        course = self.course
        if course.revision is not self.compiled.current():
            course = self.refresh()
        pool = course.pool
        free = pool.free
        if free and type(inputs) is dict:  # the serving case first, with as little around it as can be
            try:
                buffers = free.pop()
            except IndexError:  # another thread took the last one
                pass
            else:
                hot = buffers.straight
                served = None
                if hot is not None and buffers.generation == pool.generation:
                    try:
                        served = hot.run(inputs)
                    except BoundFailure as bound:  # a new generation: these buffers are dropped
                        given = self.inputs.feeds(inputs)
                        course = self.recheck(course, bound, self.values(given, buffers), given)
                pool.give(buffers)
                if served is not None:
                    if self._proven is not course:
                        self.proved(course)
                    return served
        exact = self.inputs.exact_feeds(inputs)
        # the caller's own dict serves: nothing here keeps it past this call
        feeds = exact if exact is not None else self.inputs.check(self.inputs.as_dict(inputs))
        while True:
            buffers = self.take(course)
            values: dict[str, Any] | None = None
            try:
                served = self.run_whole(buffers.whole, feeds) if buffers.whole is not None else None
                if served is not None:
                    results = served
                elif buffers.direct is not None:
                    results = self.run_direct(buffers, feeds)
                else:
                    values = self.values(feeds, buffers)
                    for step in course.steps:
                        self.run_step(step, values, buffers, windows)
                    results = self.collect(values, feeds, buffers.views)
            except BoundFailure as bound:
                given = self.values(feeds, buffers) if values is None else values
                course = self.recheck(course, bound, given, feeds)
                windows.clear()  # the counters are the run that completes
                continue  # with fresh buffers, the failed subgraph's outputs made per inference
            course.pool.give(buffers)
            if self._proven is not course:
                self.proved(course)
            return results

    def take(self, course: Course) -> Buffers:
        """A buffer set of ``course`` for one inference: a free one of the current generation, or a new one."""
        return course.pool.take(course.steps)

    def values(self, feeds: dict[str, np.ndarray], buffers: Buffers) -> dict[str, Any]:
        """The inference's tensors: the buffers, and the inputs wrapped as OrtValues without a copy."""
        buffers.fed.clear()  # this inference binds its inputs itself: the direct path must bind them again
        values = dict(buffers.tensors)
        unwrapped = self.inputs.unwrapped
        for name, arr in feeds.items():
            values[name] = arr if name in unwrapped else from_numpy(arr, CPU)
        return values

    def wrapped(self, feeds: dict[str, Any]) -> dict[str, Any]:
        """The model inputs as a session is fed them: OrtValues over the arrays, without a copy."""
        unwrapped = self.inputs.unwrapped
        return {name: arr if name in unwrapped else from_numpy(arr, CPU) for name, arr in feeds.items()}

    def run_direct(self, buffers: Buffers, feeds: dict[str, np.ndarray]) -> Results:
        """Every subgraph pre-bound: bind the model inputs and run the sessions back to back (the hot path:
        nothing is looked up or allocated per subgraph). BoundFailure if a session fails."""
        assert buffers.direct is not None
        fed = buffers.fed
        values = {}
        unwrapped = self.inputs.unwrapped
        for name, arr in feeds.items():
            if name in unwrapped:  # only the caller's outputs can read them here
                continue
            layout = (arr, arr.shape, arr.dtype, arr.strides)
            bound = fed.get(name)
            if type(bound) is not tuple or bound[0] is not arr or bound[1:] != layout[1:]:
                values[name] = from_numpy(arr, CPU)
                fed[name] = layout
        for run, io, per_run, step in buffers.direct:
            if per_run is not None:
                run_bound(per_run, step, values)
                continue
            try:
                run(io, RUN_OPTIONS)
            except Exception as exc:
                raise BoundFailure(step, exc) from None
        return self.collect(values, feeds, buffers.views)

    def run_step(self, step: Step, values: dict[str, Any], buffers: Buffers, windows: list[Window]) -> None:
        """Run one subgraph, bound if ``buffers`` binds it, on ``values`` (updated with its outputs, less
        the tensors it read last); a profiled one's run is added to ``windows``. BoundFailure for a bound
        failure or a refused shape, InferenceError for any other failure."""
        binding = buffers.bindings[step.position]
        if binding is not None:
            run_bound(binding, step, values)
        else:
            feeds = step_feeds(step, values)
            try:
                if step.compiled.profiler is None:
                    produced = run_unbound(step, step.compiled.session, feeds)
                else:
                    session = step.compiled.profiler.before_run()
                    start = time.time_ns()
                    try:
                        produced = run_unbound(step, session, feeds)
                    finally:
                        step.compiled.profiler.after_run(session)
                    windows.append(
                        (step.compiled, threading.get_native_id(), start / 1e3, time.time_ns() / 1e3)
                    )
            except Exception as exc:
                raise self.unbound_failure(step, exc) from None
            if not step.compiled.proven:
                self.check_shapes(step, dict(zip(step.outputs, produced, strict=True)))
            values.update(zip(step.outputs, produced, strict=True))
        for t in step.release:
            values.pop(t, None)

    def run_whole(self, whole: Whole, feeds: dict[str, Any]) -> Results | None:
        """Run the whole-model path on ``feeds``: its results, or None where it does not take them. A
        failure raises what ``unbound_failure`` makes of it."""
        try:
            results = whole.run(feeds)
        except Exception as exc:
            raise self.unbound_failure(whole.step, exc) from None
        if results is not None and not whole.step.compiled.proven:
            self.check_shapes(whole.step, results)
        return results

    def check_shapes(self, step: Step, produced: Mapping[str, Any]) -> None:
        """Before ``step`` completes an inference: raise what ``unbound_failure`` makes of an output (in
        ``produced``, by name) in another rank, or with its elements in another shape, than ONNX Runtime
        infers for it (shape_check)."""
        problem = contradiction(step, produced, self.compiled.model)
        if problem is not None:
            raise self.unbound_failure(step, InferenceError(problem))

    def unbound_failure(self, step: Step, exc: BaseException) -> Exception:
        """What an unbound run's failure of ``step`` raises: BoundFailure where a session refused a
        tensor's shape (recheck compiles it again) or HETERO_FALLBACK may move the subgraph (recheck moves
        it), else the caller's InferenceError."""
        refused = refused_inputs(step, exc, self.inputs.fed_by_caller)
        if refused:
            return BoundFailure(step, exc, refused)
        if falling.may_move(self.compiled, step.compiled):
            return BoundFailure(step, exc)
        return self.failure(step, exc)

    def recheck(
        self, course: Course, bound: BoundFailure, values: dict[str, Any], feeds: dict[str, Any]
    ) -> Course:
        """Tell why a subgraph of ``course`` failed, given the inference's tensors (``values``) and model
        inputs (``feeds``); the caller starts over with fresh buffers on the course this returns (the
        current revision's) unless this raises.

        A session that refused the shape of a tensor from an earlier subgraph (the model declared
        another) is compiled again with it dynamic (CompiledModel.relax). Else the subgraph runs the plain
        way, its outputs unbound: a success with outputs other than the declared ones means those were
        wrong, and from now on they are made per inference; a real failure (or a success in exactly the
        declared shapes and types, which cannot explain the bound failure) fails again, and is raised
        (InferenceError) unless HETERO_FALLBACK moves the subgraph (CompiledModel.fall_back) for the
        inference to start over."""
        step = bound.step
        refused = bound.refused
        if refused is None:
            refused = refused_inputs(step, bound.cause, self.inputs.fed_by_caller)
        if refused:
            if not self.compiled.relax(refused, step.compiled):
                raise self.failure(step, bound.cause) from None
            return self.refresh()  # the revision with the subgraphs compiled again
        try:
            produced = run_unbound(step, step.compiled.session, step_feeds(step, values))
            if as_declared(step, produced):
                # not a shape matter after all: the OpenVINO EP answers a failed run again with the last
                # inference's outputs (quirk openvino-stale-output-after-failure), so the first failure stands
                raise bound.cause
            # a wrong shape is the EP's mistake, not a declared one's (openvino-attention-output-shape)
            problem = contradiction(step, dict(zip(step.outputs, produced, strict=True)), self.compiled.model)
            if problem is not None:
                raise InferenceError(problem)
        except Exception as exc:
            if not self.compiled.fall_back(step.compiled, exc, self.wrapped(feeds)):
                raise self.failure(step, exc) from None
            return self.refresh()  # the revision with the subgraphs moved
        with self._lock:
            course.pool.renew(unbind=step.position)
        log.debug(
            "%s: output shapes differ from the declared ones; allocated per inference", step.compiled.where
        )
        return course

    def failure(self, step: Step, exc: BaseException) -> Exception:
        """The caller's InferenceError for ``step``'s failure, saying where HETERO_FALLBACK=YES would move
        the subgraph where it is off and the subgraph never completed an inference. A session whose EP
        keeps a failed run's state is made again first (CompiledModel.renew): the next inference is right."""
        error = failure(step, exc)
        self.compiled.renew(step.compiled, exc)
        fallback = self.compiled.fallback
        if fallback is None or step.compiled.proven:
            return error
        hint = fallback.hint(self.compiled.model, step.compiled.nodes, step.compiled.device)
        return type(error)(str(error) + hint) if hint else error

    def collect(
        self, values: dict[str, Any], feeds: dict[str, np.ndarray], views: dict[str, np.ndarray]
    ) -> Results:
        """The model's outputs as numpy arrays the caller owns (a request's buffers, ``views``, are copied)."""
        results = Results()
        results._names = self.output_names
        for name, source in self.output_sources:
            if source == INPUT:
                given = feeds[name]
                results[name] = np.array(given, copy=True) if isinstance(given, np.ndarray) else given
            elif source == CONSTANT:
                results[name] = np.array(feeds.get(name, self.compiled.constants[name]), copy=True)
            elif name in views:
                results[name] = views[name].copy()
            else:
                value = values[name]
                results[name] = to_numpy(name, value) if isinstance(value, OrtValue) else value
        return results


def run_bound(binding: Binding, step: Step, values: dict[str, Any]) -> None:
    """Run one pre-bound subgraph: bind what changes per inference (a per-run input missing from
    ``values`` is still bound), run, pick up its fresh outputs. BoundFailure if the session fails."""
    io = binding.io
    if binding.clear:
        for t, value in binding.fixed:
            io.bind_ortvalue_input(t, value)
    for t in binding.per_run:
        value = values.get(t)
        if value is not None:
            io.bind_ortvalue_input(t, value)
    for _, name in binding.fresh:  # drops the last inference's output (the caller's now) from the binding
        io.bind_output(name, CPU)
    try:
        binding.sess.run_with_iobinding(io, RUN_OPTIONS)
    except Exception as exc:
        raise BoundFailure(step, exc) from None
    finally:
        if binding.clear:
            io.clear_binding_inputs()
    if binding.fresh:
        produced = io.get_outputs()
        for i, name in binding.fresh:
            values[name] = produced[i]
        if not step.compiled.proven:
            _check_fresh(binding, step, produced)


def _check_fresh(binding: Binding, step: Step, produced: Any) -> None:
    """Before ``step`` completes an inference: BoundFailure where an output ORT allocated (not bound to a
    buffer, so nothing refused it) came back in another shape than its buffer's; recheck tells why."""
    assert step.buffers is not None
    for i, name in binding.fresh:
        shape = step.buffers[i][0]
        if tuple(produced[i].shape()) != shape:
            raise BoundFailure(step, InferenceError(f"output {name} came back in another shape than {shape}"))


def as_declared(step: Step, produced: list[Any]) -> bool:
    """Whether ``produced`` (a pre-bound step's outputs, run unbound) have exactly the shapes and types
    its buffers were allocated with: then the bound run's failure was not theirs."""
    if step.buffers is None:
        return False
    for value, (shape, element) in zip(produced, step.buffers, strict=True):
        if not isinstance(value, OrtValue) or ortv.ELEMENT_TYPES.get(value.data_type()) != element:
            return False
        if tuple(value.shape()) != shape:
            return False
    return True


def run_unbound(step: Step, session: Any, feeds: dict[str, Any]) -> list[Any]:
    """Run ``step`` on ``session`` (its own, or its profiler's) with nothing pre-bound: its outputs as ORT
    allocates them (OrtValues, or Python values for a plain step). Raises what ORT raises."""
    return ortv.run(
        session,
        step.output_list,
        feeds,
        plain=step.plain,
        placement=step.placement if step.on_device else (),
    )
