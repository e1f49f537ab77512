"""Infer: run a compiled model's subgraph sessions in order, joined by OrtValues.

Intermediate tensors stay OrtValues from producer to consumer (no numpy round trip) and are released
after their last consumer; between subgraphs on one CUDA device they stay on the device (IOBinding).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._ort import ort
from .compile import CompiledModel, CompiledSubgraph
from .errors import InferenceError
from .partition import CONSTANT, INPUT
from .profiling import ProfilingInfo, subgraph_counters

_C = ort.capi._pybind_state
_CPU = _C.OrtDevice(_C.OrtDevice.cpu(), _C.OrtDevice.default_memory(), 0)


@dataclass(frozen=True)
class _Step:
    """What running one subgraph needs, worked out once per compiled model."""

    compiled: CompiledSubgraph
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    overridable: tuple[str, ...]
    release: tuple[str, ...]

    output_list: list[str]  # the outputs as the list ORT's run call takes, built once


def _steps(compiled: CompiledModel) -> list[_Step]:
    last_use: dict[str, int] = {}
    for s in compiled.subgraphs:
        for t in s.inputs:
            last_use[t] = s.index
    keep = set(compiled.plan.outputs)
    steps = []
    for s in compiled.subgraphs:
        declared = {i.name for i in (*s.session.get_inputs(), *s.session.get_overridable_initializers())}
        steps.append(
            _Step(
                compiled=s,
                inputs=s.inputs,
                outputs=s.outputs,
                overridable=tuple(sorted(declared & compiled.model.overridable_initializers)),
                release=tuple(t for t, last in last_use.items() if last == s.index and t not in keep),
                output_list=list(s.outputs),
            )
        )
    return steps


class InferRequest:
    """One inference request: feed inputs, run every subgraph in order, get the model's outputs.

    request = compiled.create_infer_request()
    outputs = request.infer({"image": x})      # {output name: numpy array}
    """

    def __init__(self, compiled: CompiledModel):
        self.compiled = compiled
        self._steps = _steps(compiled)
        self._inputs = {i.name: i for i in compiled.inputs}
        self.results: dict[str, np.ndarray] = {}
        self._profiled = any(step.compiled.profiler is not None for step in self._steps)
        self._history: list[list[tuple[int, int, float, float]]] = []

    def infer(
        self, inputs: Mapping[str, Any] | Sequence[Any] | np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Run once; ``inputs`` is {name: array}, a list in input order, or one array for one input."""
        feeds = self._check(self._as_dict(inputs))
        keepalive = list(feeds.values())
        windows: list[tuple[int, int, float, float]] = []
        values: dict[str, Any] = {
            name: _C.OrtValue.ortvalue_from_numpy(arr, _CPU) for name, arr in feeds.items()
        }
        for step in self._steps:
            step_feeds = {t: values[t] for t in step.inputs}
            for t in step.overridable:
                if t in values:
                    step_feeds[t] = values[t]
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
                        (step.compiled.index, threading.get_native_id(), start / 1e3, time.time_ns() / 1e3)
                    )
            except Exception as exc:
                text = str(exc).strip().splitlines()
                raise InferenceError(
                    f"{step.compiled.name} on {step.compiled.device} failed: {text[0][:300] if text else exc}"
                ) from None
            values.update(zip(step.outputs, produced, strict=True))
            for t in step.release:
                values.pop(t, None)
        results = self._collect(values, feeds)
        self.results = results  # get_tensor's; the caller gets its own even if another thread infers too
        if self._profiled:
            self._history.append(windows)
        del keepalive
        return results

    def get_profiling_info(self) -> list[ProfilingInfo]:
        """Counters of this request's last inference, subgraph by subgraph in execution order.

        Empty unless profiling is on (PERF_COUNT=YES for HETERO or for a device).
        """
        return self._counters(self._history[-1]) if self._history else []

    def get_profiling_history(self) -> list[list[ProfilingInfo]]:
        """Counters of every inference this request ran while profiling, oldest first (for averages)."""
        return [self._counters(windows) for windows in self._history]

    def _counters(self, windows: list[tuple[int, int, float, float]]) -> list[ProfilingInfo]:
        infos: list[ProfilingInfo] = []
        by_index = {s.index: s for s in self.compiled.subgraphs}
        for index, tid, start, end in windows:
            sub = by_index[index]
            if sub.profiler is None:
                continue
            sub.profiler.flush()
            run = sub.profiler.find(tid, start, end)
            if run is None:
                continue
            outputs = [o for o in sub.outputs if o in self.compiled.plan.outputs]
            infos += subgraph_counters(
                sub.index + 1, sub.device, sub.target.ep, sub.on_host, sub.nodes, run, outputs
            )
        return infos

    def get_tensor(self, name: str) -> np.ndarray:
        """An output of the last inference, by name."""
        try:
            return self.results[name]
        except KeyError:
            raise InferenceError(
                f"no output named {name!r} from the last inference; outputs are {', '.join(self.results) or 'none yet'}"
            ) from None

    # --- helpers -------------------------------------------------------------------------------------

    def _as_dict(self, inputs: Any) -> dict[str, Any]:
        names = list(self._inputs)
        if inputs is None:
            return {}
        if isinstance(inputs, Mapping):
            return {str(k): v for k, v in inputs.items()}
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
        overridable = self.compiled.model.overridable_initializers
        unknown = [k for k in given if k not in self._inputs and k not in overridable]
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
            try:
                arr = np.asarray(value, order="C")
            except (ValueError, TypeError) as exc:
                text = str(exc).strip().splitlines()
                raise InferenceError(
                    f"input {name!r} is not an array ({text[0][:150] if text else type(exc).__name__}): give a "
                    "numpy array of the input's shape"
                ) from None
            info = self._inputs.get(name)
            if info is not None:
                _check_tensor(name, arr, info.dtype, info.shape)
            out[name] = arr
        return out

    def _collect(self, values: dict[str, Any], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = {}
        for name, source in self.compiled.plan.output_sources.items():
            if source == INPUT:
                results[name] = np.array(feeds[name], copy=True)
            elif source == CONSTANT:
                results[name] = np.array(feeds.get(name, self.compiled.constants[name]), copy=True)
            else:
                results[name] = values[name].numpy()
        return results


def _check_tensor(name: str, arr: np.ndarray, dtype: np.dtype | None, shape: Any) -> None:
    if dtype is not None and arr.dtype != dtype:
        raise InferenceError(
            f"input {name!r} has dtype {arr.dtype} but the model takes {dtype}: convert it, "
            f"e.g. value.astype(numpy.{dtype})"
        )
    if shape is None:
        return
    if arr.ndim != len(shape):
        raise InferenceError(
            f"input {name!r} has shape {tuple(arr.shape)} but the model takes rank {len(shape)} "
            f"{_shape_text(shape)}: reshape it"
        )
    for got, want in zip(arr.shape, shape, strict=True):
        if isinstance(want, int) and want > 0 and got != want:
            raise InferenceError(
                f"input {name!r} has shape {tuple(arr.shape)} but the model takes {_shape_text(shape)}: "
                "resize or reshape it"
            )


def _shape_text(shape: Sequence[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _run(step: _Step, session: Any, feeds: dict[str, Any]) -> list[Any]:
    compiled = step.compiled
    if compiled.on_host:
        # index the OrtValueVector: iterating it (list(...)) costs ~10x the run of a small subgraph
        vector = session._sess.run_with_ort_values(feeds, step.output_list, None)
        return [vector[i] for i in range(len(step.output_list))]
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue(value))
    device_id = int(compiled.target.provider_options.get("device_id", 0))
    for name in step.outputs:
        binding.bind_output(name, "cuda", device_id)
    session.run_with_iobinding(binding)
    return [v._get_c_value() for v in binding.get_outputs()]
