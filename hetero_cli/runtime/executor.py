"""A request's synchronous inference: its inputs checked, the revision it runs planned once (its steps and
linked tensors: a Course), then the fastest path its buffer set allows, and where a run fails the
recovery's verdict.

    infer(inputs) -> Inputs.check -> Course (steps, buffer pool) -> straight | whole | Walk.run -> Results
                                                          on StepFailure -> recovery.recover -> again

The paths: straight (runtime.straight: every subgraph pre-bound, the caller's dict exactly the static
inputs' arrays, every model output copied out of a buffer); whole (runtime.whole: one host session runs
the whole model, as ORT's own ``InferenceSession.run``); otherwise the walk (runtime.walk) over the steps,
each pre-bound where its buffer set binds it. A run that fails raises StepFailure; the recovery
(runtime.recovery) swaps in the compiled model's next revision where the failure shows a session wrong,
and the inference starts over on it, or raises the caller's InferenceError.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..ort.session import ORT_RUN_ERRORS
from . import recovery
from .branches import Branches
from .buffers import BufferPool, Buffers, plan_links
from .compiled import Compiled
from .failures import StepFailure
from .inputs import Inputs
from .profiling import Window
from .results import Results
from .revision import Revision
from .steps import Step, plan_steps
from .walk import Walk


@dataclass(frozen=True)
class Course:
    """What a request runs for one revision of its compiled model: the ``revision``, its ``steps``, the
    ``pool`` of buffer sets made for them and the ``walk`` that runs them. An inference takes one when it
    starts and keeps it to its end."""

    revision: Revision
    steps: tuple[Step, ...]
    pool: BufferPool
    walk: Walk
    branches: Branches | None = None  # where the revision's subgraphs run side by side: the threads


class Executor:
    """Runs ``compiled``'s current revision for a request whose inputs ``inputs`` checks; holds its course
    (steps and buffer pool) for that revision, planned once and again only when a new revision is swapped
    in.

    Safe to share between threads: each inference in flight takes a buffer set of its own, and runs the
    course it took when it started.
    """

    def __init__(self, compiled: Compiled, inputs: Inputs):
        self.compiled = compiled
        self.inputs = inputs
        self._lock = threading.Lock()
        self.course = self._course(compiled.current())

    def _course(self, revision: Revision) -> Course:
        """The steps, buffer pool and walk of ``revision``: planned once, for every inference of it."""
        steps = tuple(plan_steps(revision))
        sources = tuple(revision.plan.output_sources.items())
        exact, names = self.inputs.exact, self.inputs.names
        links = plan_links(steps, names, exact, sources, revision.unbound, revision.concurrent)
        pool = BufferPool(steps, links, exact, names, sources)
        walk = Walk(
            revision.model,
            self.inputs.fed_by_caller,
            self.inputs.unwrapped,
            sources,
            self.compiled.constants,
            self.compiled.proven,
        )
        branches = None
        if revision.concurrent and revision.schedule is not None:
            branches = Branches(revision.schedule.width)
        return Course(revision, steps, pool, walk, branches)

    @property
    def steps(self) -> tuple[Step, ...]:
        """The steps of the course the next inference runs (as far as it is known now)."""
        return self.refresh().steps

    @property
    def output_names(self) -> tuple[str, ...]:
        """The model's outputs, in order."""
        return self.course.walk.output_names

    def refresh(self) -> Course:
        """The course of the compiled model's current revision: planned again where a new one was swapped
        in. Called when an inference starts; it runs what this returns to its end."""
        course = self.course
        current = self.compiled.current()
        if course.revision is current:
            return course
        with self._lock:
            course = self.course
            if course.revision is not current:
                course = self.course = self._course(current)
            return course

    def proved(self, course: Course) -> None:
        """After an inference of ``course`` completed: its runs are proven (compiled.prove)."""
        runs = [step.compiled for step in course.steps]
        if not all(self.compiled.proven(run) for run in runs):
            self.compiled.prove(runs)

    def infer(self, inputs: Any, windows: list[Window]) -> Results:
        """Run one inference on the caller's ``inputs`` (checked here: InferenceError) and return its
        outputs; profiled subgraphs' runs are added to ``windows``. InferenceError if a subgraph fails."""
        course = self.course
        if course.revision is not self.compiled.current():
            course = self.refresh()
        if type(inputs) is dict and course.pool.free:  # the serving case first, with as little around it
            served = self._straight(course, inputs)
            if served is not None:
                return served
            course = self.course
        exact = self.inputs.exact_feeds(inputs)
        # the caller's own dict serves: nothing here keeps it past this call
        feeds = exact if exact is not None else self.inputs.check(self.inputs.as_dict(inputs))
        while True:
            course = self.refresh()
            buffers = course.pool.take()
            try:
                results = self.run(course, buffers, feeds, windows)
            except StepFailure as failed:
                windows.clear()  # the counters are the run that completes
                recovery.recover(self.compiled, course.walk, failed, feeds)
                continue  # on the revision the recovery swapped in, with fresh buffers
            course.pool.give(buffers)
            self.proved(course)
            self.inputs.explain_empty(feeds, results)
            return results

    def _straight(self, course: Course, inputs: dict[str, Any]) -> Results | None:
        """The straight path on a free buffer set of ``course``, where it serves ``inputs``; None where it
        does not (the general path takes them). A failure is recovered from here, and None returned."""
        try:
            buffers = course.pool.free.pop()
        except IndexError:  # another thread took the last one
            return None
        hot = buffers.straight
        served = None
        if hot is not None:
            try:
                served = hot.run(inputs)
            except StepFailure as failed:  # these buffers go: the next inference takes a fresh course
                feeds = self.inputs.feeds(inputs)
                failed.values = course.walk.values(feeds, buffers)
                recovery.recover(self.compiled, course.walk, failed, feeds)
                return None
        course.pool.give(buffers)
        if served is not None:
            self.proved(course)
        return served

    def run(self, course: Course, buffers: Buffers, feeds: dict[str, Any], windows: list[Window]) -> Results:
        """One inference of ``course`` on ``buffers``: the whole-model path where it takes ``feeds``, else
        the walk over the steps. StepFailure if a run fails."""
        walk = course.walk
        whole = buffers.whole
        if whole is not None:
            try:
                served = whole.run(feeds)
            except ORT_RUN_ERRORS as exc:
                raise StepFailure(
                    whole.step, exc, bound=False, refused=walk.refused(whole.step, exc)
                ) from None
            if served is not None:
                if not self.compiled.proven(whole.step.compiled):
                    walk.check_shapes(whole.step, served)
                return served
        values = walk.values(feeds, buffers)
        try:
            if course.branches is not None:
                course.branches.run(walk, course.steps, course.pool.plan, values, buffers, windows)
            else:
                walk.run(course.steps, values, buffers, windows)
        except StepFailure as failed:
            failed.values = values
            raise
        return walk.collect(values, feeds, buffers.views)
