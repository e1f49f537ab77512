"""Infer: run a compiled model's subgraph sessions in order, joined by OrtValues.

Intermediate tensors stay OrtValues from producer to consumer (no numpy round trip). Between host-memory
subgraphs (CPU and OpenVINO EPs) whose outputs have static shapes they are allocated once per request, as
OpenVINO links its subgraphs' tensors: each such subgraph's outputs are pre-bound to its session
(IOBinding) and the very OrtValue a producer writes is bound as its consumer's input, so an inference
allocates and copies nothing at those boundaries. Other tensors (dynamic shapes, profiled subgraphs) are
made per inference and released after their last consumer; between subgraphs on one CUDA device they stay
on the device (IOBinding).

``start_async`` runs a request stage by stage on the compiled model's pipeline (hetero_cli.pipeline, one
worker thread per device), so several requests in flight overlap across devices; ``infer`` runs on the
calling thread.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import numbers
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import helper

from ..errors import InferenceError
from ..graph import shape_text
from ..ort.failures import failure_reason, refused_inputs
from ..ort.session import ort
from ..placement.partition import CONSTANT, INPUT
from .compiler import CompiledModel, CompiledSubgraph
from .pipeline import Pipeline, in_flight, pipeline_of
from .profiling import ProfilingInfo, subgraph_counters

log = logging.getLogger("hetero_cli")

_C = ort.capi._pybind_state
_CPU = _C.OrtDevice(_C.OrtDevice.cpu(), _C.OrtDevice.default_memory(), 0)
# Passing None makes ORT's binding build default RunOptions on every run (~1.5 us): one, built once, serves all
_RUN_OPTIONS = ort.RunOptions()

# ORT's output type -> ONNX element type, for the types whose buffers are allocated ahead of time
_ELEMENT_TYPES = {
    "tensor(float)": 1,
    "tensor(uint8)": 2,
    "tensor(int8)": 3,
    "tensor(uint16)": 4,
    "tensor(int16)": 5,
    "tensor(int32)": 6,
    "tensor(int64)": 7,
    "tensor(bool)": 9,
    "tensor(float16)": 10,
    "tensor(double)": 11,
    "tensor(uint32)": 12,
    "tensor(uint64)": 13,
}

# bytes per element of those types
_ELEMENT_BYTES = {e: np.dtype(helper.tensor_dtype_to_np_dtype(e)).itemsize for e in _ELEMENT_TYPES.values()}
# model outputs up to this size come from the request's own buffer, copied for the caller; larger ones
# are allocated by ORT each run and handed over as they are (a copy would cost more than the allocation)
COPIED_OUTPUT_BYTES = 64 * 1024

Shape = tuple[int, ...]
# a profiled subgraph run: the subgraph (as compiled then), the thread, its start and end (microseconds)
_Window = tuple[CompiledSubgraph, int, float, float]


@dataclass(frozen=True)
class _Step:
    """What running one subgraph needs, worked out once per request."""

    compiled: CompiledSubgraph
    position: int  # place in execution order
    lane: str  # the device whose pipeline lane runs it asynchronously
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    overridable: tuple[str, ...]
    release: tuple[str, ...]
    # (shape, ONNX element type) of each output when they can be allocated once per request, else None
    buffers: tuple[tuple[Shape, int], ...] | None

    output_list: list[str]  # the outputs as the list ORT's run call takes, built once
    # per output of a device-memory (CUDA) subgraph: the device id to keep it on, or None to copy it to
    # host memory (a host session cannot read device memory, and the caller gets numpy arrays)
    placement: tuple[int | None, ...] = ()
    on_device: bool = False  # any output stays in device memory (the IOBinding path)
    # reads or makes what an OrtValue cannot wrap (string tensors, sequences, maps): run as ORT's
    # InferenceSession.run does, on Python values (numpy arrays, lists, dicts) it converts itself
    plain: bool = False
    reads_plain: bool = False  # reads a value a plain step made: OrtValues are made of them for the run
    # overridable initializers its session takes as inputs (its EP would fold them): fed their stored
    # value (an OrtValue, a numpy array for a plain step) when the caller gives none
    defaults: Mapping[str, Any] = field(default_factory=dict)


def _device_id(s: CompiledSubgraph) -> int:
    return int(s.target.provider_options.get("device_id", 0))


def _placement(
    s: CompiledSubgraph, readers: dict[str, list[CompiledSubgraph]], keep: set[str]
) -> tuple[int | None, ...]:
    """Where each output of device subgraph ``s`` goes: its device when only subgraphs on that same
    device read it, else host memory (ORT copies it there within the run)."""
    if s.on_host:
        return ()
    here = _device_id(s)
    return tuple(
        here
        if name not in keep and all(not r.on_host and _device_id(r) == here for r in readers.get(name, ()))
        else None
        for name in s.outputs
    )


def _steps(compiled: CompiledModel) -> list[_Step]:
    last_use: dict[str, int] = {}
    readers: dict[str, list[CompiledSubgraph]] = {}
    for s in compiled.runs:
        for t in s.inputs:
            last_use[t] = s.index
            readers.setdefault(t, []).append(s)
    keep = set(compiled.plan.outputs)
    steps = []
    made_plain: set[str] = set()
    for position, s in enumerate(compiled.runs):
        required = {i.name for i in s.session.get_inputs()} & compiled.model.overridable_initializers
        declared = {i.name for i in s.session.get_overridable_initializers()} | required
        overridable = tuple(sorted(declared & compiled.model.overridable_initializers))
        defaults = {t: compiled.model.initializer_array(t) for t in sorted(required)}
        placement = _placement(s, readers, keep)
        plain = _plain(s)
        reads_plain = not plain and bool(made_plain.intersection(s.inputs))
        if plain:
            made_plain.update(s.outputs)
        steps.append(
            _Step(
                compiled=s,
                position=position,
                lane=s.device,
                inputs=s.inputs,
                outputs=s.outputs,
                overridable=overridable,
                release=tuple(t for t, last in last_use.items() if last == s.index and t not in keep),
                buffers=_static_outputs(s) if not (overridable or plain or reads_plain) else None,
                output_list=list(s.outputs),
                placement=placement,
                on_device=any(p is not None for p in placement),
                plain=plain,
                reads_plain=reads_plain,
                defaults=defaults if plain else {t: _ort_value(a) for t, a in defaults.items()},
            )
        )
    return steps


def _plain(s: CompiledSubgraph) -> bool:
    """Whether a subgraph reads or makes a value that is not a numeric tensor (ORT's own types)."""
    args = [
        *s.session.get_inputs(),  # its boundary inputs, and overridable initializers fed as inputs
        *s.session.get_overridable_initializers(),
        *(o for o in s.session.get_outputs() if o.name in s.outputs),
    ]
    return any(not a.type.startswith("tensor(") or a.type == "tensor(string)" for a in args)


def _static_outputs(s: CompiledSubgraph) -> tuple[tuple[Shape, int], ...] | None:
    """Shapes and types of a host subgraph's outputs if all are static tensors; None otherwise.

    A profiled subgraph is left out: its profiler may swap the session between runs.
    """
    if not s.on_host or s.profiler is not None:
        return None
    meta = {o.name: o for o in s.session.get_outputs()}
    out = []
    for name in s.outputs:
        o = meta.get(name)
        element = _ELEMENT_TYPES.get(o.type) if o is not None else None
        shape = o.shape if o is not None else None
        # ORT also reports [] when the declared and inferred shapes disagree: rank 0 counts as dynamic
        if element is None or not shape or not all(isinstance(d, int) and d >= 0 for d in shape):
            return None
        out.append((tuple(shape), element))
    return tuple(out)


@dataclass(frozen=True)
class _Binding:
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
class _Buffers:
    """A request's linked tensors: every bindable subgraph's IOBinding, its outputs allocated once."""

    generation: int
    bindings: list[_Binding | None]
    tensors: dict[str, Any]  # tensor name -> the OrtValue allocated for it
    # every subgraph bound, reading only model inputs and buffers: per subgraph (its session's run method,
    # its binding, the _Binding if something is bound per run else None, the step), which an inference
    # runs straight through (InferRequest._run_direct)
    direct: tuple[tuple[Callable[..., Any], Any, _Binding | None, _Step], ...] | None = None
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
    straight: _Straight | None = None


class Results(dict):
    """An inference's outputs, ``{name: array}`` in the model's output order; like OpenVINO's results, also
    keyed by output port or index: ``results["y"]``, ``results[compiled.outputs[0]]``, ``results[0]``.

    A plain dict otherwise (``in``, iteration and ``keys()`` see the names).
    """

    __slots__ = ("_names",)

    def __missing__(self, key: Any) -> np.ndarray:
        name = port_name(key, getattr(self, "_names", ()))
        if name is None or name == key or not dict.__contains__(self, name):
            raise KeyError(key)
        return dict.__getitem__(self, name)

    def get(self, key: Any, default: Any = None) -> Any:
        """The output for ``key`` (name, port or index), or ``default``."""
        try:
            return self[key]
        except (KeyError, TypeError):
            return default

    def copy(self) -> Results:
        """A shallow copy, keyed by port and index too."""
        return _results(dict(self), getattr(self, "_names", ()))

    def __reduce__(self) -> Any:  # pickled as the plain dict it holds, with the names for ports and indexes
        return (_results, (dict(self), getattr(self, "_names", ())))


def _results(values: dict[str, Any], names: tuple[str, ...]) -> Results:
    out = Results(values)
    out._names = names
    return out


def port_name(key: Any, names: Sequence[str]) -> str | None:
    """The tensor name ``key`` stands for: a name as it is, a port (anything with ``get_any_name``, such as
    compiled.inputs[0]) by its name, an int as the index into ``names``; None for anything else."""
    if isinstance(key, str):
        return key
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return names[key] if -len(names) <= key < len(names) else None
    get_any_name = getattr(key, "get_any_name", None)
    if callable(get_any_name):
        name = get_any_name()
        return name if isinstance(name, str) else None
    return None


def _input_name(key: Any, names: Sequence[str]) -> str:
    """An infer() key as an input's name: a name, a port (compiled.inputs[0]) or an input index; anything
    else as its text, which the unknown-input check then names."""
    name = port_name(key, names)
    return name if name is not None else str(key)


@dataclass(frozen=True)
class _Straight:
    """The serving case cut to the bone: InferRequest.infer given a dict of exactly the static inputs'
    arrays, every subgraph pre-bound, every model output copied out of a buffer. ``run(feeds)`` checks the
    arrays, binds one not bound already, runs the sessions and copies the outputs out; None when ``feeds``
    is not such a dict (the general path takes it).

    Every statement here runs on caches the EPs' kernels have just swept, so it costs several times what it
    does alone: on a small split the Python around the runs is a visible share of the latency, and
    ``run`` touches as few objects as it can.
    """

    # every model input: (name, the bindings that take it per run, dtype, shape, C strides)
    inputs: tuple[tuple[str, tuple[Any, ...], np.dtype, Shape, Shape], ...]
    runs: tuple[tuple[Callable[..., Any], Any], ...]  # (a session's run_with_iobinding, its binding)
    copies: tuple[tuple[str, np.ndarray], ...]  # model output -> the buffer it is copied from
    steps: tuple[_Step, ...]  # the runs' steps, to name the one that fails
    run: Callable[[dict[str, Any]], dict[str, np.ndarray] | None]


def _straight(
    inputs: tuple[tuple[str, tuple[Any, ...], np.dtype, Shape, Shape], ...],
    runs: tuple[tuple[Callable[..., Any], Any], ...],
    copies: tuple[tuple[str, np.ndarray], ...],
    steps: tuple[_Step, ...],
    fed: dict[str, Any],
) -> _Straight:
    count = len(inputs)
    names = tuple(name for name, _ in copies)  # every model output, in order
    ndarray = np.ndarray
    options = _RUN_OPTIONS
    wrap = _C.OrtValue.ortvalue_from_numpy

    def run(feeds: dict[str, Any]) -> dict[str, np.ndarray] | None:
        if len(feeds) != count:
            return None
        for name, ios, dtype, shape, strides in inputs:
            arr = feeds.get(name)
            if type(arr) is not ndarray or arr.dtype != dtype or arr.shape != shape or arr.strides != strides:
                return None
            # the same array object, laid out as the input's own, is already bound: an OrtValue over
            # numpy's memory reads what the array holds now
            if fed.get(name) is not arr:
                value = wrap(arr, _CPU)
                for io in ios:
                    io.bind_ortvalue_input(name, value)
                fed[name] = arr
        i = 0
        try:
            for session_run, io in runs:
                session_run(io, options)
                i += 1
        except Exception as exc:
            raise _BoundFailure(steps[i], exc) from None
        results = Results()
        results._names = names
        for name, view in copies:
            results[name] = view.copy()
        return results

    return _Straight(inputs, runs, copies, steps, run)


def _buffer(shape: Shape, element: int, nbytes: int) -> tuple[Any, np.ndarray]:
    """A new OrtValue over ``nbytes`` of numpy memory aligned to 64 bytes (as ORT's allocator aligns), and
    that array."""
    dtype = helper.tensor_dtype_to_np_dtype(element)
    raw = np.empty(nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    array = raw[start : start + nbytes].view(dtype).reshape(shape)
    return _C.OrtValue.ortvalue_from_numpy(array, _CPU), array


def _allocate(
    steps: Sequence[_Step],
    exact: Mapping[str, tuple[np.dtype, Shape, Shape]],
    model_inputs: frozenset[str],
    output_sources: Sequence[tuple[str, int | str]],
    unbound: frozenset[int],
    generation: int,
) -> _Buffers:
    """A buffer set for ``steps``; ``exact``: (dtype, shape, C strides) of each model input with a static
    shape and type."""
    model_outputs = {name for name, _ in output_sources}
    tensors: dict[str, Any] = {}
    views: dict[str, np.ndarray] = {}
    bindings: list[_Binding | None] = []
    read = {t for step in steps for t in step.inputs}
    for step in steps:
        if step.buffers is None or step.position in unbound:
            bindings.append(None)
            continue
        sess = step.compiled.session._sess
        io = _C.SessionIOBinding(sess)
        fixed = tuple((t, tensors[t]) for t in step.inputs if t in tensors)
        per_run = tuple(t for t in step.inputs if t not in tensors)
        clear = any(t not in model_inputs for t in per_run)
        if not clear:
            for t, value in fixed:
                io.bind_ortvalue_input(t, value)
        fresh = []
        for i, (name, (shape, element)) in enumerate(zip(step.outputs, step.buffers, strict=True)):
            nbytes = _nbytes(shape, element)
            if name in model_outputs and name not in read and nbytes > COPIED_OUTPUT_BYTES:
                # a buffer of ours would have to be copied for the caller (who may keep it while the next
                # inference runs): a fresh one from ORT's arena is handed over as it is. Small outputs are
                # copied: cheaper than ORT allocating and the EP taking a new buffer every run.
                io.bind_output(name, _CPU)
                fresh.append((i, name))
                continue
            value, array = _buffer(shape, element, nbytes)
            io.bind_ortvalue_output(name, value)
            tensors[name] = value
            views[name] = array
        bindings.append(_Binding(sess, io, fixed, per_run, clear, tuple(fresh)))
    direct = straight = None
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
            straight = _straight(
                inputs=tuple(
                    (t, tuple(b.io for b in bound if t in b.per_run), *exact[t]) for t in sorted(model_inputs)
                ),
                runs=tuple((b.sess.run_with_iobinding, b.io) for b in bound),
                copies=tuple((name, views[name]) for name, _ in output_sources),
                steps=tuple(steps),
                fed=fed,
            )
    return _Buffers(generation, bindings, tensors, direct, fed, views, straight)


def _nbytes(shape: Shape, element: int) -> int:
    return math.prod(shape) * _ELEMENT_BYTES[element]


def _run_bound(binding: _Binding, step: _Step, values: dict[str, Any]) -> None:
    """Run one pre-bound subgraph: bind what changes per inference (a per-run input missing from
    ``values`` is still bound), run, pick up its fresh outputs."""
    io = binding.io
    if binding.clear:
        for t, value in binding.fixed:
            io.bind_ortvalue_input(t, value)
    for t in binding.per_run:
        value = values.get(t)
        if value is not None:
            io.bind_ortvalue_input(t, value)
    for _, name in binding.fresh:  # drops the last inference's output (the caller's now) from the binding
        io.bind_output(name, _CPU)
    try:
        binding.sess.run_with_iobinding(io, _RUN_OPTIONS)
    except Exception as exc:
        raise _BoundFailure(step, exc) from None
    finally:
        if binding.clear:
            io.clear_binding_inputs()
    if binding.fresh:
        produced = io.get_outputs()
        for i, name in binding.fresh:
            values[name] = produced[i]


class _BoundFailure(Exception):
    """A subgraph failed with its outputs pre-bound, or refused a tensor's shape; InferRequest._recheck
    tells why. ``refused``: what _refused_inputs found in ``cause``, where already looked for."""

    def __init__(
        self, step: _Step, cause: BaseException, refused: dict[str, tuple[int, ...] | None] | None = None
    ):
        super().__init__(str(cause))
        self.step = step
        self.cause = cause
        self.refused = refused


@dataclass
class _Run:
    """One asynchronous inference in flight: its inputs, tensors and the next subgraph to run."""

    feeds: dict[str, np.ndarray]
    number: int
    begin: float = 0.0
    position: int = 0
    buffers: _Buffers | None = None
    values: dict[str, Any] = field(default_factory=dict)
    windows: list[_Window] = field(default_factory=list)
    queued: bool = False  # its first stage is on a lane: the lanes complete it from now on
    completed: bool = False


def _step_feeds(step: _Step, values: Mapping[str, Any]) -> dict[str, Any]:
    """What ``step``'s session is fed, unbound: its inputs, the overridable initializers it takes (the
    caller's value, else the stored one), as OrtValues where it reads what a plain step made."""
    feeds = {t: values[t] for t in step.inputs}
    for t in step.overridable:
        if t in values:
            feeds[t] = values[t]
        elif t in step.defaults:
            feeds[t] = step.defaults[t]
    if step.reads_plain:
        feeds = {t: _ort_value(v) for t, v in feeds.items()}
    return feeds


def _refused_inputs(step: _Step, exc: BaseException, given: Set[str]) -> dict[str, tuple[int, ...] | None]:
    """{tensor: the dimensions ORT refused (None: its rank)} for the tensors from earlier subgraphs whose
    shape ``step``'s session refused (the model declared another); empty for any other failure. ``given``:
    what the caller feeds (checked before the run)."""
    return refused_inputs(exc, [name for name in step.inputs if name not in given])


def _failure(step: _Step, exc: BaseException) -> InferenceError:
    return InferenceError(f"{step.compiled.where} failed: {failure_reason(exc)}")


class InferRequest:
    """One inference request: feed inputs, run every subgraph in order, get the model's outputs.

    request = compiled.create_infer_request()
    outputs = request.infer({"image": x})      # {output name: numpy array}

    request.start_async({"image": x}, userdata=7)   # or asynchronously, on the device pipeline
    request.wait()
    outputs = request.results
    """

    def __init__(self, compiled: CompiledModel):
        self.compiled = compiled
        self._steps = _steps(compiled)
        self._inputs = {i.name: i for i in compiled.inputs}
        # what a value fed for an overridable initializer must be: the initializer's own type and shape
        self._overridable = {
            t: compiled.model.tensor_info(t) for t in compiled.model.overridable_initializers
        }
        # (dtype, shape, C-order strides) of inputs whose every dimension is fixed: an array with exactly
        # these is accepted at a glance
        self._exact = {
            i.name: (i.dtype, tuple(i.shape), _c_strides(i.shape, i.dtype.itemsize))
            for i in compiled.inputs
            if i.dtype is not None
            and not i.dtype.hasobject  # strings: no OrtValue holds them, the straight path cannot bind them
            and _numpy_native(i.dtype)  # bfloat16 and the like: refused by _check_tensor
            and i.shape is not None
            and all(isinstance(d, int) and d > 0 for d in i.shape)
        }
        # sequence, map and optional inputs: handed to ORT as given (lists, dicts), as its run() takes them
        self._non_tensor = frozenset(
            i.name
            for i in compiled.inputs
            if (t := compiled.model.value_type(i.name)) is not None and not t.HasField("tensor_type")
        )
        # inputs no OrtValue can hold (those and strings): kept as given, for the plain steps that read them
        self._unwrapped = self._non_tensor | {
            i.name
            for i in (*compiled.inputs, *self._overridable.values())
            if i.dtype is not None and i.dtype.hasobject
        }
        self.results: dict[str, np.ndarray] = Results()
        self._profiled = any(step.compiled.profiler is not None for step in self._steps)
        self._history: list[list[_Window]] = []
        self._latency_ms = 0.0
        # linked tensors: free buffer sets (one per inference running at once), rebuilt when `unbound` grows
        self._pool: list[_Buffers] = []
        self._generation = 0
        self._unbound: frozenset[int] = frozenset()
        self._model_inputs = frozenset(self._inputs)
        # what the caller feeds (checked before a run): a session refusing one of these is no relax's business
        self._fed_by_caller = self._model_inputs | frozenset(self._overridable)
        self._output_sources = tuple(compiled.plan.output_sources.items())
        self._output_names = tuple(name for name, _ in self._output_sources)
        self._lock = threading.Lock()
        # asynchronous state
        self._cond = threading.Condition()
        self._busy = False
        self._ran = False  # a synchronous inference was run (wait_for's "ready" before any start_async)
        self._started = 0
        self._finished = 0
        self._error: InferenceError | None = None
        self._callback: Callable[[Any], None] | None = None
        self._userdata: Any = None
        self._hook: Callable[[InferRequest, InferenceError | None], None] | None = None  # AsyncInferQueue's
        self._pipeline: Pipeline | None = None

    def infer(
        self, inputs: Mapping[str, Any] | Sequence[Any] | np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Run once; ``inputs`` is {name: array}, a list in input order, or one array for one input."""
        if self._busy:
            raise InferenceError(
                "this request is running an asynchronous inference: call wait() before infer(), or use "
                "another request"
            )
        self._ran = True  # wait_for: a result (or this inference's failure) is there from now on
        begin = time.perf_counter()
        pool = self._pool
        if pool and type(inputs) is dict:  # the serving case first, with as little around it as can be
            try:
                buffers = pool.pop()
            except IndexError:  # another thread took the last one
                pass
            else:
                straight = buffers.straight
                served = None
                if straight is not None and buffers.generation == self._generation:
                    try:
                        served = straight.run(inputs)
                    except _BoundFailure as failure:  # a new generation: these buffers are dropped
                        self._recheck(failure, self._values(self._feeds(inputs), buffers))
                self._give(buffers)
                if served is not None:
                    self._latency_ms = (time.perf_counter() - begin) * 1e3
                    self.results = served
                    return served
        exact = self._exact_feeds(inputs)
        # the caller's own dict serves: nothing here keeps it past this call
        feeds = exact if exact is not None else self._check(self._as_dict(inputs))
        windows: list[_Window] = []
        while True:
            buffers = self._take()
            values: dict[str, Any] | None = None
            try:
                if buffers.direct is not None:
                    results = self._run_direct(buffers, feeds)
                else:
                    values = self._values(feeds, buffers)
                    for step in self._steps:
                        self._run_step(step, values, buffers, windows)
                    results = self._collect(values, feeds, buffers.views)
            except _BoundFailure as failure:
                self._recheck(failure, self._values(feeds, buffers) if values is None else values)
                windows.clear()  # the counters are the run that completes
                continue  # with fresh buffers, the failed subgraph's outputs made per inference
            self._give(buffers)
            break
        self._latency_ms = (time.perf_counter() - begin) * 1e3
        self.results = results  # get_tensor's; the caller gets its own even if another thread infers too
        if self._profiled:
            self._history.append(windows)
        return results

    def get_profiling_info(self) -> list[ProfilingInfo]:
        """Counters of this request's last inference, subgraph by subgraph in execution order.

        Empty unless profiling is on (PERF_COUNT=YES for HETERO or for a device).
        """
        return self._counters(self._history[-1]) if self._history else []

    def get_profiling_history(self) -> list[list[ProfilingInfo]]:
        """Counters of every inference this request ran while profiling, oldest first (for averages)."""
        return [self._counters(windows) for windows in self._history]

    def _counters(self, windows: list[_Window]) -> list[ProfilingInfo]:
        infos: list[ProfilingInfo] = []
        for sub, tid, start, end in windows:
            if sub.profiler is None:
                continue
            sub.profiler.flush()
            run = sub.profiler.find(tid, start, end)
            if run is None:
                continue
            outputs = [o for o in sub.outputs if o in self.compiled.plan.outputs]
            model = self.compiled.model
            nodes = {n: model.node(n).get_type_name() for n in sub.nodes}
            infos += subgraph_counters(
                sub.index + 1, sub.device, sub.target.ep, sub.on_host, nodes, run, outputs
            )
        return infos

    def get_tensor(self, name: Any) -> np.ndarray:
        """An output of the last inference, by name, output port or output index."""
        output = port_name(name, self._output_names)
        if output is not None and output in self.results:
            return self.results[output]
        if not self.results:
            raise InferenceError(
                f"no outputs yet: get_tensor({name!r:.60}) reads the last inference's outputs"
            )
        if output in self._inputs:
            raise InferenceError(
                f"{output!r} is an input: get_tensor gives the last inference's outputs "
                f"({', '.join(self._output_names)}); inputs are what you pass to infer()"
            )
        raise InferenceError(
            f"no output {name!r:.60} from the last inference: give an output's name, port or index "
            f"(outputs are {', '.join(self._output_names)})"
        )

    # --- asynchronous inference (OpenVINO's InferRequest API) ---------------------------------------

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
        (set_callback) receives. One inference at a time per request: InferenceError while the previous
        one runs (wait() first, or use an AsyncInferQueue).
        """
        exact = self._exact_feeds(inputs)
        given = exact if exact is not None else self._as_dict(inputs)
        feeds = dict(exact) if exact is not None else self._check(given)
        if not share_inputs:
            feeds = {name: _own(value, given.get(name)) for name, value in feeds.items()}
        with self._cond:
            if self._busy:
                raise InferenceError(
                    "this request is still running its previous asynchronous inference: call wait() first, "
                    "or use several requests (an AsyncInferQueue)"
                )
            in_flight.begin()  # refused once the interpreter exits; _complete ends it
            self._busy = True
            self._error = None
            self._started += 1
            if userdata is not None:
                self._userdata = userdata
            run = _Run(feeds, self._started, begin=time.perf_counter())
        try:
            if not self._steps:  # only inputs and constants as outputs: nothing to run
                results = self._collect({}, feeds, {})
                run.queued = True
                self._complete(run, None, results)
                return
            if self._pipeline is None:
                self._pipeline = pipeline_of(self.compiled)
            self._launch(run)
        except BaseException as exc:
            if not run.queued:  # never reached a lane: the request must not stay busy; wait() re-raises it
                self._complete(run, exc)
            if not isinstance(exc, Exception):
                raise  # Ctrl-C and the like still stop the caller

    def wait(self) -> None:
        """Wait for the asynchronous inference (and its callback); re-raise its failure as InferenceError."""
        with self._cond:
            self._cond.wait_for(lambda: self._finished >= self._started)
            error = self._error
        if error is not None:
            raise error

    def wait_for(self, timeout: int) -> bool:
        """Wait at most ``timeout`` milliseconds: True if a result is ready (failure re-raised), False if
        the inference still runs or, as in OpenVINO, the request has never run one."""
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

    def set_callback(self, callback: Callable[[Any], None] | None, userdata: Any = None) -> None:
        """``callback(userdata)`` when an asynchronous inference succeeds (on a pipeline thread: keep it
        short); a failure is not passed to it but re-raised by wait(), as is an exception it raises."""
        if callback is not None and not callable(callback):
            raise InferenceError(f"the callback must be callable, not {type(callback).__name__}")
        with self._cond:
            self._callback = callback
            self._userdata = userdata

    @property
    def userdata(self) -> Any:
        """The userdata the callback receives (from set_callback, or the last start_async that gave one)."""
        return self._userdata

    @property
    def latency(self) -> float:
        """Milliseconds the last inference took (asynchronous: from start_async to its last subgraph)."""
        return self._latency_ms

    def _launch(self, run: _Run) -> None:
        assert self._pipeline is not None
        run.buffers = self._take()
        run.values = self._values(run.feeds, run.buffers)
        run.windows = []
        run.position = 0
        run.queued = False
        self._pipeline.submit(self._steps[0].lane, functools.partial(self._stage, run))
        run.queued = True

    def _stage(self, run: _Run) -> None:
        """Run the request's subgraphs on this lane until the next one belongs to another lane."""
        steps, pipeline = self._steps, self._pipeline
        assert pipeline is not None and run.buffers is not None
        i = run.position
        lane = steps[i].lane
        try:
            while True:
                observer = pipeline.observer
                if observer is not None:
                    observer("start", self, i, lane)
                try:
                    self._run_step(steps[i], run.values, run.buffers, run.windows)
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
            results = self._collect(run.values, run.feeds, run.buffers.views)
        except _BoundFailure as failure:
            run.queued = False  # off its lane: queued again only once _launch has submitted it
            try:
                self._recheck(failure, run.values)
                self._launch(run)  # from the first subgraph again, with fresh buffers
            except BaseException as exc:
                if not run.queued:
                    self._complete(run, exc)
            return
        except BaseException as exc:
            self._complete(run, exc)
            return
        self._give(run.buffers)
        self._complete(run, None, results)

    def _complete(
        self, run: _Run, error: BaseException | None, results: dict[str, np.ndarray] | None = None
    ) -> None:
        """Finish an asynchronous inference: results, callback, the queue's hook, then wake the waiters.
        Only once per run: a start_async interrupted right as its job was queued completes it itself."""
        with self._cond:
            if run.completed:
                return
            run.completed = True
        failure: InferenceError | None = None
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
        try:
            if failure is None and callback is not None:
                try:
                    callback(userdata)
                except BaseException as exc:  # SystemExit too: wait() re-raises it, nothing hangs
                    failure = InferenceError(f"the request's callback raised {type(exc).__name__}: {exc}")
                    failure.__cause__ = exc
                    with self._cond:
                        if self._started == run.number:  # not already started again by the callback
                            self._error = failure
            hook = self._hook
            if hook is not None:
                hook(self, failure)
        finally:
            with self._cond:
                self._finished += 1
                self._cond.notify_all()
            in_flight.end()

    # --- linked tensors --------------------------------------------------------------------------------

    def _take(self) -> _Buffers:
        """A free buffer set of the current generation, or a new one."""
        pool = self._pool
        while pool:
            try:
                buffers = pool.pop()
            except IndexError:  # another thread took the last one
                break
            if buffers.generation == self._generation:
                return buffers
        return _allocate(
            self._steps,
            self._exact,
            self._model_inputs,
            self._output_sources,
            self._unbound,
            self._generation,
        )

    def _give(self, buffers: _Buffers) -> None:
        if buffers.generation == self._generation:
            self._pool.append(buffers)

    def _values(self, feeds: dict[str, np.ndarray], buffers: _Buffers) -> dict[str, Any]:
        """The inference's tensors: the buffers, and the inputs wrapped as OrtValues without a copy."""
        buffers.fed.clear()  # this inference binds its inputs itself: the direct path must bind them again
        values = dict(buffers.tensors)
        unwrapped = self._unwrapped
        for name, arr in feeds.items():
            values[name] = arr if name in unwrapped else _C.OrtValue.ortvalue_from_numpy(arr, _CPU)
        return values

    def _run_direct(self, buffers: _Buffers, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every subgraph pre-bound: bind the model inputs and run the sessions back to back (the hot path:
        nothing is looked up or allocated per subgraph)."""
        assert buffers.direct is not None
        fed = buffers.fed
        values = {}
        unwrapped = self._unwrapped
        for name, arr in feeds.items():
            if name in unwrapped:  # only the caller's outputs can read them here
                continue
            layout = (arr, arr.shape, arr.dtype, arr.strides)
            bound = fed.get(name)
            if type(bound) is not tuple or bound[0] is not arr or bound[1:] != layout[1:]:
                values[name] = _C.OrtValue.ortvalue_from_numpy(arr, _CPU)
                fed[name] = layout
        for run, io, per_run, step in buffers.direct:
            if per_run is not None:
                _run_bound(per_run, step, values)
                continue
            try:
                run(io, _RUN_OPTIONS)
            except Exception as exc:
                raise _BoundFailure(step, exc) from None
        return self._collect(values, feeds, buffers.views)

    def _run_step(
        self,
        step: _Step,
        values: dict[str, Any],
        buffers: _Buffers,
        windows: list[_Window],
    ) -> None:
        binding = buffers.bindings[step.position]
        if binding is not None:
            _run_bound(binding, step, values)
        else:
            step_feeds = _step_feeds(step, values)
            try:
                if step.compiled.profiler is None:
                    produced = _run(step, step.compiled.session, step_feeds)
                else:
                    session = step.compiled.profiler.before_run()
                    start = time.time_ns()
                    try:
                        produced = _run(step, session, step_feeds)
                    finally:
                        step.compiled.profiler.after_run(session)
                    windows.append(
                        (step.compiled, threading.get_native_id(), start / 1e3, time.time_ns() / 1e3)
                    )
            except Exception as exc:
                refused = _refused_inputs(step, exc, self._fed_by_caller)
                if refused:
                    raise _BoundFailure(step, exc, refused) from None  # _recheck compiles it again
                raise _failure(step, exc) from None
            values.update(zip(step.outputs, produced, strict=True))
        for t in step.release:
            values.pop(t, None)

    def _recheck(self, failure: _BoundFailure, values: dict[str, Any]) -> None:
        """Tell why a subgraph failed; the caller starts over with fresh buffers unless this raises.

        A session that refused the shape of a tensor from an earlier subgraph (the model declared
        another) is compiled again with it dynamic (CompiledModel.relax). Else the subgraph runs the plain
        way, its outputs unbound: a real failure fails again and is raised; a success means its outputs'
        declared shapes were wrong, and from now on they are made per inference."""
        step = failure.step
        refused = failure.refused
        if refused is None:
            refused = _refused_inputs(step, failure.cause, self._fed_by_caller)
        if refused:
            if not self.compiled.relax(refused, step.compiled):
                raise _failure(step, failure.cause) from None
            with self._lock:  # the subgraphs as compiled again
                self._steps = _steps(self.compiled)
                self._generation += 1
                self._pool.clear()
            return
        try:
            _run(step, step.compiled.session, _step_feeds(step, values))
        except Exception as exc:
            raise _failure(step, exc) from None
        with self._lock:
            self._unbound = self._unbound | {step.position}
            self._generation += 1
            self._pool.clear()
        log.debug(
            "%s: output shapes differ from the declared ones; allocated per inference", step.compiled.where
        )

    # --- helpers -------------------------------------------------------------------------------------

    def _feeds(self, inputs: Any) -> dict[str, np.ndarray]:
        """The checked inputs, in a dict of the request's own (the caller may change theirs while it runs)."""
        exact = self._exact_feeds(inputs)
        return dict(exact) if exact is not None else self._check(self._as_dict(inputs))

    def _exact_feeds(self, inputs: Any) -> dict[str, np.ndarray] | None:
        """``inputs`` itself if it is a dict of exactly the static inputs' arrays (the serving case: dtype,
        shape and C strides the input's own, nothing more to check), else None."""
        exact = self._exact
        if type(inputs) is not dict or not len(inputs) == len(exact) == len(self._inputs):
            return None
        for name, value in inputs.items():
            want = exact.get(name)
            if (
                want is None
                or type(value) is not np.ndarray
                or value.dtype != want[0]
                or value.shape != want[1]
                or value.strides != want[2]
            ):
                return None
        return inputs

    def _as_dict(self, inputs: Any) -> dict[str, Any]:
        names = list(self._inputs)
        if inputs is None:
            return {}
        if isinstance(inputs, Mapping):
            given: dict[str, Any] = {}
            for key, value in inputs.items():
                name = _input_name(key, names)
                if name in given:
                    raise InferenceError(f"input {name!r} given twice (by name, port or index): give it once")
                given[name] = value
            return given
        if isinstance(inputs, np.ndarray) or np.isscalar(inputs):
            if len(names) != 1:
                raise InferenceError(
                    f"one array given but the model has {len(names)} inputs: {', '.join(names)}"
                )
            return {names[0]: inputs}
        if isinstance(inputs, Sequence):
            if len(inputs) != len(names):
                raise InferenceError(
                    f"{len(inputs)} inputs given but the model takes {len(names)}: {', '.join(names)}"
                )
            return dict(zip(names, inputs, strict=True))
        raise InferenceError(
            f"inputs must be a dict of name -> array, a list or an array, not {type(inputs).__name__}"
        )

    def _check(self, given: dict[str, Any]) -> dict[str, np.ndarray]:
        unknown = [k for k in given if k not in self._inputs and k not in self._overridable]
        if unknown:
            raise InferenceError(
                f"unknown input(s) {', '.join(map(repr, unknown))}: the model's inputs are "
                f"{', '.join(self._inputs) or 'none'}"
            )
        missing = [k for k in self._inputs if k not in given]
        if missing:
            raise InferenceError(f"missing input(s) {', '.join(map(repr, missing))}: give a value for each")
        out = {}
        for name, value in given.items():
            if name in self._non_tensor:
                out[name] = value
                continue
            try:
                arr = np.asarray(value, order="C")
            except (ValueError, TypeError) as exc:
                text = str(exc).strip().splitlines()
                raise InferenceError(
                    f"input {name!r} is not an array ({text[0][:150] if text else type(exc).__name__}): give a "
                    "numpy array of the input's shape"
                ) from None
            info = self._inputs.get(name) or self._overridable.get(name)
            if info is not None and info.dtype == np.dtype(object) and arr.dtype.kind in "US":
                # numpy's fixed-width str or bytes: ORT takes str objects
                arr = (np.char.decode(arr, "utf-8") if arr.dtype.kind == "S" else arr).astype(object)
            if info is not None:
                _check_tensor(name, arr, info.dtype, info.shape)
            out[name] = arr
        return out

    def _collect(
        self, values: dict[str, Any], feeds: dict[str, np.ndarray], views: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The model's outputs as numpy arrays the caller owns (a request's buffers, ``views``, are copied)."""
        results = Results()
        results._names = self._output_names
        for name, source in self._output_sources:
            if source == INPUT:
                given = feeds[name]
                results[name] = np.array(given, copy=True) if isinstance(given, np.ndarray) else given
            elif source == CONSTANT:
                results[name] = np.array(feeds.get(name, self.compiled.constants[name]), copy=True)
            elif name in views:
                results[name] = views[name].copy()
            else:
                value = values[name]
                results[name] = _to_numpy(name, value) if isinstance(value, _C.OrtValue) else value
        return results


def _check_tensor(name: str, arr: np.ndarray, dtype: np.dtype | None, shape: Any) -> None:
    if dtype is not None and not _numpy_native(dtype):
        raise InferenceError(
            f"input {name!r} is {dtype}, which ONNX Runtime's Python API cannot take from numpy: give the "
            f"model a float32 (or other numpy type) input and a Cast to {dtype} inside it"
        )
    if dtype is not None and arr.dtype != dtype:
        if dtype == np.dtype(object):
            raise InferenceError(
                f"input {name!r} has dtype {arr.dtype} but the model takes strings: give a numpy array of "
                "str objects, e.g. numpy.array(value, dtype=object)"
            )
        raise InferenceError(
            f"input {name!r} has dtype {arr.dtype} but the model takes {dtype}: convert it, "
            f"e.g. value.astype(numpy.{dtype})"
        )
    if shape is None:
        return
    if arr.ndim != len(shape):
        raise InferenceError(
            f"input {name!r} has shape {shape_text(arr.shape)} but the model takes rank {len(shape)} "
            f"{shape_text(shape)}: reshape it"
        )
    for got, want in zip(arr.shape, shape, strict=True):
        if isinstance(want, int) and want >= 0 and got != want:  # ORT holds a 0 dimension fixed, too
            raise InferenceError(
                f"input {name!r} has shape {shape_text(arr.shape)} but the model takes {shape_text(shape)}: "
                "resize or reshape it"
            )


def _own(value: Any, given: Any) -> Any:
    """A start_async input the caller can no longer change: ``value`` as checked from the caller's
    ``given``; an array converted from the caller's array (another dtype or layout) is already a copy,
    anything else is copied (arrays) or copied deeply (sequences, maps)."""
    if isinstance(value, np.ndarray):
        return value if value is not given and isinstance(given, np.ndarray) else value.copy()
    return copy.deepcopy(value)


def _to_numpy(name: str, value: Any) -> np.ndarray:
    """An output OrtValue as a numpy array; InferenceError for the element types ORT cannot convert."""
    try:
        return value.numpy()
    except RuntimeError as exc:
        raise InferenceError(
            f"output {name!r} ({value.data_type()}) cannot be handed over as a numpy array: ONNX Runtime's "
            f"Python API has no numpy type for it ({exc}); add a Cast to float32 after it in the model"
        ) from None


def _numpy_native(dtype: np.dtype) -> bool:
    """Whether ORT's Python API converts ``dtype`` to and from numpy: numpy's own types, not the ml_dtypes
    ones onnx names bfloat16, float8 and int4 by (ORT refuses those arrays with a RuntimeError)."""
    return dtype.type.__module__ == "numpy"


def _ort_value(value: Any) -> Any:
    """A numpy array a plain step made as an OrtValue over its memory (``values`` keeps the array)."""
    return value if isinstance(value, _C.OrtValue) else _C.OrtValue.ortvalue_from_numpy(value, _CPU)


def _c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of ``shape`` (what numpy gives a fresh array)."""
    strides = []
    step = itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


def _run(step: _Step, session: Any, feeds: dict[str, Any]) -> list[Any]:
    if step.plain:
        given = {t: v.numpy() if isinstance(v, _C.OrtValue) else v for t, v in feeds.items()}
        return session.run(step.output_list, given, _RUN_OPTIONS)
    if not step.on_device:
        # ORT hands outputs it allocates itself over in host memory, whatever the EP (CUDA copies them)
        # index the OrtValueVector: iterating it (list(...)) costs ~10x the run of a small subgraph
        vector = session._sess.run_with_ort_values(feeds, step.output_list, _RUN_OPTIONS)
        return [vector[i] for i in range(len(step.output_list))]
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue(value))
    for name, device_id in zip(step.outputs, step.placement, strict=True):
        if device_id is None:
            binding.bind_output(name, "cpu")
        else:
            binding.bind_output(name, "cuda", device_id)
    session.run_with_iobinding(binding)
    return [v._get_c_value() for v in binding.get_outputs()]
