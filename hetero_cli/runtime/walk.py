"""The walk: one inference's subgraphs run in order over a request's linked tensors, by the one step runner
every path shares (``run_step``: pre-bound where its buffer set binds it, else its outputs made per
inference).

Intermediate tensors stay OrtValues from producer to consumer (no numpy round trip). A run that fails
raises StepFailure, which says which step, why, whether it ran pre-bound and which tensors' shapes its
session refused; the request's recovery (runtime.recovery) tells what that means. Nothing here decides
anything about the compiled model: the walk runs what it is given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Set
from typing import Any

import numpy as np

from ..errors import InferenceError
from ..graph import Model
from ..ort import failures as ort_failures
from ..ort import values as ortv
from ..ort.session import ORT_RUN_ERRORS
from ..ort.values import CPU, RUN_OPTIONS, OrtValue, from_numpy, to_numpy
from ..placement.partition import CONSTANT, INPUT
from .buffers import Binding, Buffers
from .failures import StepFailure
from .profiling import Window
from .results import Results
from .shape_check import contradiction
from .steps import Step, step_feeds


class Walk:
    """How a request's inferences run the steps: the ``model`` they were compiled from (for the shape
    check of a first inference), what the caller feeds (``fed``: a session refusing one of these is the
    caller's business, never a declared shape's), the inputs kept as given (``unwrapped``: no OrtValue
    holds them), the model's outputs and where each comes from (``output_sources``), its constant
    outputs, and ``proven`` (whether a run completed an inference: its outputs' shapes were checked)."""

    def __init__(
        self,
        model: Model,
        fed: Set[str],
        unwrapped: Set[str],
        output_sources: tuple[tuple[str, int | str], ...],
        constants: Mapping[str, np.ndarray],
        proven: Callable[[Any], bool],
    ) -> None:
        self.model = model
        self.fed = fed
        self.unwrapped = unwrapped
        self.output_sources = output_sources
        self.output_names = tuple(name for name, _ in output_sources)
        self.constants = constants
        self.proven = proven

    def values(self, feeds: Mapping[str, Any], buffers: Buffers | None) -> dict[str, Any]:
        """The inference's tensors: ``buffers``' (None: none), and the model inputs wrapped as OrtValues
        without a copy."""
        values: dict[str, Any] = {}
        if buffers is not None:
            buffers.fed.clear()  # this inference binds its inputs itself: the straight path must bind them again
            values.update(buffers.tensors)
        unwrapped = self.unwrapped
        for name, arr in feeds.items():
            values[name] = arr if name in unwrapped else from_numpy(arr, CPU)
        return values

    def run(
        self, steps: tuple[Step, ...], values: dict[str, Any], buffers: Buffers, windows: list[Window]
    ) -> None:
        """Run ``steps`` in order on ``values`` (updated with their outputs); StepFailure if one fails."""
        for step in steps:
            self.run_step(step, values, buffers, windows)

    def run_step(
        self,
        step: Step,
        values: dict[str, Any],
        buffers: Buffers | None,
        windows: list[Window],
        *,
        release: bool = True,
    ) -> None:
        """Run one subgraph, pre-bound where ``buffers`` binds it, on ``values`` (updated with its outputs,
        less the tensors it read last, with ``release``: steps that run side by side keep them to the
        end); a profiled one's run is added to ``windows``. StepFailure if it fails."""
        binding = buffers.bindings[step.position] if buffers is not None else None
        if binding is not None:
            run_bound(binding, step, values, self.proven(step.compiled))
        else:
            produced = self.run_unbound(step, values, windows)
            values.update(zip(step.outputs, produced, strict=True))
        if release:
            for t in step.release:
                values.pop(t, None)

    def run_unbound(
        self, step: Step, values: Mapping[str, Any], windows: list[Window] | None = None
    ) -> list[Any]:
        """Run ``step`` with nothing pre-bound on what ``values`` holds for it: its outputs as ORT allocates
        them (OrtValues, or Python values for a plain step), checked against the shapes ONNX Runtime
        infers on the step's first inference. StepFailure if it fails."""
        feeds = step_feeds(step, values)
        compiled = step.compiled
        try:
            if compiled.profiler is None:
                produced = run_session(step, compiled.session, feeds)
            else:
                session = compiled.profiler.before_run()
                start = time.time_ns()
                try:
                    produced = run_session(step, session, feeds)
                finally:
                    compiled.profiler.after_run(session)
                if windows is not None:
                    windows.append((compiled, threading.get_native_id(), start / 1e3, time.time_ns() / 1e3))
        except ORT_RUN_ERRORS as exc:
            raise StepFailure(step, exc, bound=False, refused=self.refused(step, exc)) from None
        if not self.proven(compiled):
            self.check_shapes(step, dict(zip(step.outputs, produced, strict=True)))
        return produced

    def refused(self, step: Step, exc: BaseException) -> dict[str, tuple[int, ...] | None]:
        """{tensor: the dimensions ORT refused (None: its rank)} for the tensors from earlier subgraphs whose
        shape ``step``'s session refused in ``exc``; empty for any other failure."""
        return ort_failures.refused_inputs(exc, (name for name in step.inputs if name not in self.fed))

    def check_shapes(self, step: Step, produced: Mapping[str, Any]) -> None:
        """StepFailure where an output (in ``produced``, by name) came back in another rank, or with its
        elements in another shape, than ONNX Runtime infers for it (shape_check)."""
        problem = contradiction(step.outputs, step.shapes, produced, self.model)
        if problem is not None:
            raise StepFailure(step, InferenceError(problem), bound=False)

    def collect(
        self, values: Mapping[str, Any], feeds: Mapping[str, Any], views: Mapping[str, np.ndarray]
    ) -> Results:
        """The model's outputs as numpy arrays the caller owns (a request's buffers, ``views``, are
        copied)."""
        results = Results()
        results._names = self.output_names
        for name, source in self.output_sources:
            if source == INPUT:
                given = feeds[name]
                results[name] = np.array(given, copy=True) if isinstance(given, np.ndarray) else given
            elif source == CONSTANT:
                results[name] = np.array(feeds.get(name, self.constants[name]), copy=True)
            elif name in views:
                results[name] = views[name].copy()
            else:
                value = values[name]
                results[name] = to_numpy(name, value) if isinstance(value, OrtValue) else value
        return results


def run_bound(binding: Binding, step: Step, values: dict[str, Any], proven: bool) -> None:
    """Run one pre-bound subgraph: bind what changes per inference (a per-run input missing from
    ``values`` is still bound), run, pick up its fresh outputs (checked against their buffers' shapes
    until the step is ``proven``). StepFailure if the session fails."""
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
    except ORT_RUN_ERRORS as exc:
        raise StepFailure(step, exc, bound=True) from None
    finally:
        if binding.clear:
            io.clear_binding_inputs()
    if binding.fresh:
        produced = io.get_outputs()
        for i, name in binding.fresh:
            values[name] = produced[i]
        if not proven:
            _check_fresh(binding, step, produced)


def _check_fresh(binding: Binding, step: Step, produced: Any) -> None:
    """StepFailure where an output ORT allocated (not bound to a buffer, so nothing refused it) came back
    in another shape than its buffer's: the recovery tells why."""
    assert step.buffers is not None
    for i, name in binding.fresh:
        shape = step.buffers[i][0]
        if tuple(produced[i].shape()) != shape:
            failure = InferenceError(f"output {name} came back in another shape than {shape}")
            raise StepFailure(step, failure, bound=True)


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


def run_session(step: Step, session: Any, feeds: dict[str, Any]) -> list[Any]:
    """Run ``step`` on ``session`` (its own, or its profiler's) with nothing pre-bound: its outputs as ORT
    allocates them (OrtValues, or Python values for a plain step). Raises what ORT raises."""
    return ortv.run(
        session,
        step.output_list,
        feeds,
        plain=step.plain,
        placement=step.placement if step.on_device else (),
    )
