"""Linked tensors: a request's buffer sets, as OpenVINO links its subgraphs' tensors.

Between host-memory subgraphs whose outputs have static shapes, each output is allocated once per buffer
set and pre-bound to its session (IOBinding), and the very OrtValue a producer writes is bound as its
consumer's input, so an inference allocates and copies nothing at those boundaries.

What is linked is decided once per revision, as data (``plan_links``: a LinkPlan, which also says which
subgraph feeds which: the step graph); each buffer set is made from it (``allocate``). A request keeps a
pool of free buffer sets (one per inference running at once) for the revision it runs; a new revision (a
subgraph compiled again, moved, or with its outputs made per inference after all) gets a new pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ort.values import CPU, Shape, buffer, c_session, io_binding, nbytes
from .steps import Step
from .straight import Straight, straight
from .whole import Whole, whole

# model outputs up to this size come from the request's own buffer, copied for the caller; larger ones
# are allocated by ORT each run and handed over as they are (a copy would cost more than the allocation)
COPIED_OUTPUT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Binding:
    """One subgraph's IOBinding in a buffer set: outputs bound once, inputs as the fields say."""

    sess: Any  # ORT's C session
    io: Any  # ORT's C SessionIOBinding
    fixed: tuple[tuple[str, Any], ...]  # inputs that are earlier subgraphs' buffers: bound once
    per_run: tuple[str, ...]  # model inputs and per-inference tensors: bound every run
    clear: bool  # per-inference tensors among the inputs: unbound after the run (released after last use)
    # (position among the outputs, name) of model outputs no later subgraph reads: ORT allocates them anew
    # each run (from its arena) and the caller gets them without a copy
    fresh: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Buffers:
    """A request's linked tensors: every bindable subgraph's IOBinding, its outputs allocated once."""

    bindings: list[Binding | None]
    tensors: dict[str, Any]  # tensor name -> the OrtValue allocated for it
    # straight only: the model input arrays bound now, by name. The same array object again, unchanged in
    # layout, is already bound (an OrtValue over numpy's memory reads what the array holds now):
    # rebinding it cost the OpenVINO EP a few microseconds per run. Holding them keeps their memory alive
    # while bound.
    fed: dict[str, Any] = field(default_factory=dict)
    # each tensor as a numpy array over its memory: what keeps that memory alive (ORT's C-level OrtValue
    # does not hold the array it wraps), and what a model output is copied from for the caller
    views: dict[str, np.ndarray] = field(default_factory=dict)
    # every subgraph bound, every model input static and every model output copied from a buffer: the hot
    # path
    straight: Straight | None = None
    # one host session runs the whole model and straight does not serve: ORT's own run on the caller's arrays
    whole: Whole | None = None


@dataclass(frozen=True)
class StepLinks:
    """How one step (subgraph run) is linked: ``bound`` (pre-bound with an IOBinding, its outputs in
    buffers allocated once), ``fixed`` (its inputs that are earlier steps' buffers: bound once),
    ``per_run`` (its inputs bound every run: model inputs and tensors made per inference), ``clear``
    (per-inference tensors among those: unbound after the run, so they are released after their last
    use), ``buffered`` (its outputs written into buffers) and ``fresh`` (model outputs no later step reads
    and too large to copy: ORT allocates them each run and the caller gets them as they are); and
    ``feeds_from``: the positions of the earlier steps whose outputs it reads."""

    position: int
    bound: bool
    fixed: tuple[str, ...] = ()
    per_run: tuple[str, ...] = ()
    clear: bool = False
    buffered: tuple[str, ...] = ()
    fresh: tuple[str, ...] = ()
    feeds_from: tuple[int, ...] = ()


@dataclass(frozen=True)
class LinkPlan:
    """How a request links one revision's steps, decided once (plain data: print it, test it): ``steps``
    (StepLinks, in execution order) and ``path``, what an inference given exactly the static inputs'
    arrays takes: "straight" (every step pre-bound, every model output copied out of a buffer), "whole"
    (one host session runs the whole model, as ORT's own run), else "walk" (the steps one by one, each
    pre-bound where it is)."""

    steps: tuple[StepLinks, ...]
    path: str

    @property
    def linked(self) -> tuple[str, ...]:
        """The tensors allocated once and pre-bound (a producer writes the very buffer its consumers read),
        in execution order."""
        return tuple(name for step in self.steps for name in step.buffered)


def plan_links(
    steps: Sequence[Step],
    model_inputs: frozenset[str],
    exact: Mapping[str, Any],
    output_sources: Sequence[tuple[str, int | str]],
    unbound: frozenset[int],
    concurrent: bool = False,
) -> LinkPlan:
    """The LinkPlan of ``steps``: ``model_inputs``, the model inputs with a static shape and type
    (``exact``), the plan's (model output, source) pairs, the positions of the steps whose outputs are
    made per inference (``unbound``) and whether they run side by side (``concurrent``: then always by
    the walk, the straight and whole paths running one session after another)."""
    model_outputs = {name for name, _ in output_sources}
    read = {t for step in steps for t in step.inputs}
    producer: dict[str, int] = {}
    buffered: set[str] = set()
    planned = []
    for step in steps:
        feeds_from = tuple(dict.fromkeys(producer[t] for t in step.inputs if t in producer))
        for name in step.outputs:
            producer[name] = step.position
        if step.buffers is None or step.position in unbound:
            planned.append(StepLinks(step.position, False, feeds_from=feeds_from))
            continue
        fixed = tuple(t for t in step.inputs if t in buffered)
        per_run = tuple(t for t in step.inputs if t not in buffered)
        outputs, fresh = [], []
        for name, (shape, element) in zip(step.outputs, step.buffers, strict=True):
            if name in model_outputs and name not in read and nbytes(shape, element) > COPIED_OUTPUT_BYTES:
                # a buffer of ours would have to be copied for the caller (who may keep it while the next
                # inference runs): a fresh one from ORT's arena is handed over as it is. Small outputs are
                # copied: cheaper than ORT allocating and the EP taking a new buffer every run.
                fresh.append(name)
            else:
                outputs.append(name)
        buffered.update(outputs)
        clear = any(t not in model_inputs for t in per_run)
        planned.append(
            StepLinks(step.position, True, fixed, per_run, clear, tuple(outputs), tuple(fresh), feeds_from)
        )
    path = "walk"
    if not concurrent and (
        all(s.bound and not s.clear and not s.fresh for s in planned)
        and all(name in buffered for name in model_outputs)
        and model_inputs <= exact.keys()
    ):
        path = "straight"
    elif (
        not concurrent
        and not unbound
        and whole(list(steps), model_inputs, tuple(name for name, _ in output_sources))
    ):
        path = "whole"
    return LinkPlan(tuple(planned), path)


class BufferPool:
    """A request's free buffer sets for one revision's steps, linked as ``plan`` says. A set is taken for
    one inference and given back after it.

    ``exact``: (dtype, shape, C strides) of each model input with a static shape and type;
    ``model_inputs``; ``output_sources``: the plan's (model output, source) pairs, in order.
    """

    def __init__(
        self,
        steps: Sequence[Step],
        plan: LinkPlan,
        exact: Mapping[str, tuple[np.dtype, Shape, Shape]],
        model_inputs: frozenset[str],
        output_sources: Sequence[tuple[str, int | str]],
    ):
        self.free: list[Buffers] = []
        self.plan = plan
        self._steps = steps
        self._exact = exact
        self._model_inputs = model_inputs
        self._output_sources = output_sources

    def take(self) -> Buffers:
        """A free buffer set, or a new one."""
        try:
            return self.free.pop()
        except IndexError:  # none free (or another thread took the last one)
            return allocate(self._steps, self.plan, self._exact, self._model_inputs, self._output_sources)

    def give(self, buffers: Buffers) -> None:
        """Return a buffer set taken for an inference that has completed."""
        self.free.append(buffers)


def allocate(
    steps: Sequence[Step],
    plan: LinkPlan,
    exact: Mapping[str, tuple[np.dtype, Shape, Shape]],
    model_inputs: frozenset[str],
    output_sources: Sequence[tuple[str, int | str]],
) -> Buffers:
    """A buffer set for ``steps``, linked as ``plan`` says; ``exact``: (dtype, shape, C strides) of each
    model input with a static shape and type."""
    tensors: dict[str, Any] = {}
    views: dict[str, np.ndarray] = {}
    bindings: list[Binding | None] = []
    for step, links in zip(steps, plan.steps, strict=True):
        if not links.bound:
            bindings.append(None)
            continue
        assert step.buffers is not None
        sess = c_session(step.compiled.session)
        io = io_binding(sess)
        fixed = tuple((t, tensors[t]) for t in links.fixed)
        if not links.clear:
            for t, value in fixed:
                io.bind_ortvalue_input(t, value)
        fresh = []
        for i, (name, (shape, element)) in enumerate(zip(step.outputs, step.buffers, strict=True)):
            if name in links.fresh:
                io.bind_output(name, CPU)
                fresh.append((i, name))
                continue
            value, array = buffer(shape, element, nbytes(shape, element))
            io.bind_ortvalue_output(name, value)
            tensors[name] = value
            views[name] = array
        bindings.append(Binding(sess, io, fixed, links.per_run, links.clear, tuple(fresh)))
    hot = single = None
    fed: dict[str, Any] = {}
    if plan.path == "straight":
        bound = [b for b in bindings if b is not None]
        hot = straight(
            inputs=tuple(
                (t, tuple(b.io for b in bound if t in b.per_run), *exact[t]) for t in sorted(model_inputs)
            ),
            runs=tuple((b.sess.run_with_iobinding, b.io) for b in bound),
            copies=tuple((name, views[name]) for name, _ in output_sources),
            steps=tuple(steps),
            fed=fed,
        )
    elif plan.path == "whole":
        single = whole(list(steps), model_inputs, tuple(name for name, _ in output_sources))
    return Buffers(bindings, tensors, fed, views, hot, single)
