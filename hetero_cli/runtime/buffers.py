"""Linked tensors: a request's buffer sets, as OpenVINO links its subgraphs' tensors.

Between host-memory subgraphs whose outputs have static shapes, each output is allocated once per buffer
set and pre-bound to its session (IOBinding), and the very OrtValue a producer writes is bound as its
consumer's input, so an inference allocates and copies nothing at those boundaries. A request keeps a
pool of free buffer sets (one per inference running at once), rebuilt when a subgraph's outputs must be
made per inference after all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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

    generation: int
    bindings: list[Binding | None]
    tensors: dict[str, Any]  # tensor name -> the OrtValue allocated for it
    # every subgraph bound, reading only model inputs and buffers: per subgraph (its session's run method,
    # its binding, the Binding if something is bound per run else None, the step), which an inference
    # runs straight through (Executor.run_direct)
    direct: tuple[tuple[Callable[..., Any], Any, Binding | None, Step], ...] | None = None
    # direct and straight only: the model input arrays bound now, by name: a tuple (array, shape, dtype,
    # strides) bound by the direct path, the array itself by the straight one (its layout the input's own).
    # The same array object again, unchanged in layout, is already bound (an OrtValue over numpy's memory
    # reads what the array holds now): rebinding it cost the OpenVINO EP a few microseconds per run.
    # Holding them keeps their memory alive while bound.
    fed: dict[str, Any] = field(default_factory=dict)
    # each tensor as a numpy array over its memory: what keeps that memory alive (ORT's C-level OrtValue
    # does not hold the array it wraps), and what a model output is copied from for the caller
    views: dict[str, np.ndarray] = field(default_factory=dict)
    # direct, every model input static and every model output copied from a buffer: the hot path
    straight: Straight | None = None
    # one host session runs the whole model and straight does not serve: ORT's own run on the caller's arrays
    whole: Whole | None = None


class BufferPool:
    """A request's free buffer sets. A set is taken for one inference and given back after it; sets of an
    older generation (before a subgraph was compiled again or unbound) are dropped.

    ``exact``: (dtype, shape, C strides) of each model input with a static shape and type;
    ``model_inputs``; ``output_sources``: the plan's (model output, source) pairs, in order; ``unbound``:
    positions of the subgraphs whose outputs are made per inference from the start.
    """

    def __init__(
        self,
        exact: Mapping[str, tuple[np.dtype, Shape, Shape]],
        model_inputs: frozenset[str],
        output_sources: Sequence[tuple[str, int | str]],
        unbound: frozenset[int] = frozenset(),
    ):
        self.free: list[Buffers] = []
        self.generation = 0
        # positions of the subgraphs whose outputs are made per inference though declared static
        self.unbound = unbound
        self._exact = exact
        self._model_inputs = model_inputs
        self._output_sources = output_sources

    def take(self, steps: Sequence[Step]) -> Buffers:
        """A free buffer set of the current generation, or a new one for ``steps``."""
        pool = self.free
        while pool:
            try:
                buffers = pool.pop()
            except IndexError:  # another thread took the last one
                break
            if buffers.generation == self.generation:
                return buffers
        return allocate(
            steps, self._exact, self._model_inputs, self._output_sources, self.unbound, self.generation
        )

    def give(self, buffers: Buffers) -> None:
        """Return a buffer set taken for an inference that has completed (dropped if of an old generation)."""
        if buffers.generation == self.generation:
            self.free.append(buffers)

    def renew(self, unbind: int | None = None) -> None:
        """Start a new generation (the free sets are dropped; the caller holds its request's lock);
        ``unbind``: the position of a subgraph whose outputs are made per inference from now on."""
        if unbind is not None:
            self.unbound = self.unbound | {unbind}
        self.generation += 1
        self.free.clear()


def allocate(
    steps: Sequence[Step],
    exact: Mapping[str, tuple[np.dtype, Shape, Shape]],
    model_inputs: frozenset[str],
    output_sources: Sequence[tuple[str, int | str]],
    unbound: frozenset[int],
    generation: int,
) -> Buffers:
    """A buffer set for ``steps``; ``exact``: (dtype, shape, C strides) of each model input with a static
    shape and type; ``unbound``: positions of the steps left unbound."""
    model_outputs = {name for name, _ in output_sources}
    tensors: dict[str, Any] = {}
    views: dict[str, np.ndarray] = {}
    bindings: list[Binding | None] = []
    read = {t for step in steps for t in step.inputs}
    for step in steps:
        if step.buffers is None or step.position in unbound:
            bindings.append(None)
            continue
        sess = c_session(step.compiled.session)
        io = io_binding(sess)
        fixed = tuple((t, tensors[t]) for t in step.inputs if t in tensors)
        per_run = tuple(t for t in step.inputs if t not in tensors)
        clear = any(t not in model_inputs for t in per_run)
        if not clear:
            for t, value in fixed:
                io.bind_ortvalue_input(t, value)
        fresh = []
        for i, (name, (shape, element)) in enumerate(zip(step.outputs, step.buffers, strict=True)):
            size = nbytes(shape, element)
            if name in model_outputs and name not in read and size > COPIED_OUTPUT_BYTES:
                # a buffer of ours would have to be copied for the caller (who may keep it while the next
                # inference runs): a fresh one from ORT's arena is handed over as it is. Small outputs are
                # copied: cheaper than ORT allocating and the EP taking a new buffer every run.
                io.bind_output(name, CPU)
                fresh.append((i, name))
                continue
            value, array = buffer(shape, element, size)
            io.bind_ortvalue_output(name, value)
            tensors[name] = value
            views[name] = array
        bindings.append(Binding(sess, io, fixed, per_run, clear, tuple(fresh)))
    direct = hot = None
    fed: dict[str, Any] = {}
    bound = [b for b in bindings if b is not None]
    if len(bound) == len(bindings) and not any(b.clear for b in bound):
        direct = tuple(
            (b.sess.run_with_iobinding, b.io, b if b.per_run or b.fresh else None, s)
            for b, s in zip(bound, steps, strict=True)
        )
        if (
            not any(b.fresh for b in bound)
            and all(name in views for name, _ in output_sources)
            and model_inputs <= exact.keys()
        ):
            hot = straight(
                inputs=tuple(
                    (t, tuple(b.io for b in bound if t in b.per_run), *exact[t]) for t in sorted(model_inputs)
                ),
                runs=tuple((b.sess.run_with_iobinding, b.io) for b in bound),
                copies=tuple((name, views[name]) for name, _ in output_sources),
                steps=tuple(steps),
                fed=fed,
            )
    single = None
    if hot is None and not unbound:
        single = whole(list(steps), model_inputs, tuple(name for name, _ in output_sources))
    return Buffers(generation, bindings, tensors, direct, fed, views, hot, single)
