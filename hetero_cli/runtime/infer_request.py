"""InferRequest: one inference request over a compiled model, OpenVINO's InferRequest API.

``infer`` checks the caller's inputs (runtime.inputs) and runs the compiled model's subgraph sessions in
order on the calling thread (runtime.executor, over the request's linked tensors, runtime.buffers);
``start_async`` runs them stage by stage on the device pipeline (runtime.async_request); the outputs are
Results (runtime.results), and the counters of profiled inferences come from runtime.profiling. A request
is made by CompiledModel.create_infer_request, over the compiled model's state (runtime.compiled) and its
pipeline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InferenceError
from ..ort.failures import ep_cause
from ..ort.session import ORT_ERRORS
from .async_request import AsyncRequest
from .buffers import LinkPlan
from .compiled import Compiled
from .executor import Executor
from .inputs import Inputs
from .pipeline import Pipeline
from .profiling import ProfilingInfo, Timeline, Window, inference_counters, inference_timeline
from .renewal import profiled_again
from .results import Results, port_name
from .revision import Revision

log = logging.getLogger("hetero_cli")


class InferRequest(AsyncRequest):
    """One inference request: feed inputs, run every subgraph in order, get the model's outputs.

    request = compiled.create_infer_request()
    outputs = request.infer({"image": x})      # {output name: numpy array}

    request.start_async({"image": x}, userdata=7)   # or asynchronously, on the device pipeline
    request.wait()
    outputs = request.results
    """

    def __init__(self, compiled: Compiled, pipeline: Pipeline) -> None:
        self.compiled = compiled
        model = compiled.current().model
        self._inputs = Inputs(model.inputs, model, symbols=compiled.checks_symbols)
        self._executor = Executor(compiled, self._inputs)
        self.results: dict[str, np.ndarray] = Results()
        self._profiled = any(step.compiled.profiler is not None for step in self._executor.steps)
        self._history: list[list[Window]] = []
        self._latency_ms = 0.0
        self._init_async(pipeline)

    def infer(
        self,
        inputs: Mapping[str, Any] | Sequence[Any] | np.ndarray | None = None,
        share_inputs: bool = False,
        share_outputs: bool = False,
    ) -> dict[str, np.ndarray]:
        """Run once; ``inputs`` is {name: array}, a list in input order, or one array for one input.

        Returns {output name: array}, also keyed by output port and index (Results). InferenceError for
        inputs the model does not take, a subgraph that fails, or an asynchronous inference still running.
        ``share_inputs`` and ``share_outputs`` are OpenVINO's and change nothing here: the inputs are read
        during the call only, and the outputs are always arrays of the caller's own.
        """
        if self._busy:
            raise InferenceError(
                "this request is running an asynchronous inference: call wait() before infer(), or use "
                "another request"
            )
        self._ran = True  # wait_for: a result (or this inference's failure) is there from now on
        begin = time.perf_counter()
        windows: list[Window] = []
        results = self._executor.infer(inputs, windows)
        self._latency_ms = (time.perf_counter() - begin) * 1e3
        self.results = results  # get_tensor's; the caller gets its own even if another thread infers too
        if self._profiled:
            self._history.append(windows)
        return results

    def get_profiling_info(self) -> list[ProfilingInfo]:
        """Counters (ProfilingInfo: node, status, real and CPU time) of this request's last inference,
        subgraph by subgraph in execution order.

        Empty unless profiling is on (PERF_COUNT=YES for HETERO or for a device), or before any inference.
        """
        return self._counters(self._history[-1]) if self._history else []

    def get_timeline(self) -> Timeline:
        """When each profiled subgraph of this request's last inference ran, from the first one's start,
        and the wall time against their sum (subgraphs that ran side by side overlap). Empty unless
        profiling is on, or before any inference."""
        return inference_timeline(self._history[-1] if self._history else [])

    def get_profiling_history(self) -> list[list[ProfilingInfo]]:
        """Counters of every inference this request ran while profiling, oldest first (for averages)."""
        return [self._counters(windows) for windows in self._history]

    def _counters(self, windows: list[Window]) -> list[ProfilingInfo]:
        current = self.compiled.current()
        infos = inference_counters(current.model, current.plan.outputs, windows)
        self._profile_again(current)
        return infos

    def _profile_again(self, current: Revision) -> None:
        """Reading counters ends the traces they come from: the sessions are made again with fresh ones in
        the compiled model's next revision (renewal.profiled_again), so the next inference has counters
        too, as OpenVINO's requests have."""
        ended = next((c for c in current.runs if c.profiler is not None and c.profiler.ended), None)
        if ended is None:
            return
        try:
            self.compiled.advance(ended, profiled_again)
        except ORT_ERRORS as exc:  # counters stop; inference goes on with the sessions it has
            log.warning(
                "%s could not be made again to profile later inferences (%s): they have no counters",
                ended.where,
                ep_cause(exc),
            )

    def get_tensor(self, name: Any) -> np.ndarray:
        """An output of the last inference, by name, output port or output index; InferenceError for an
        input's name, an unknown output, or before any inference."""
        names = self._executor.output_names
        output = port_name(name, names)
        if output is not None and output in self.results:
            return self.results[output]
        if not self.results:
            raise InferenceError(
                f"no outputs yet: get_tensor({name!r:.60}) reads the last inference's outputs"
            )
        if output in self._inputs.tensors:
            raise InferenceError(
                f"{output!r} is an input: get_tensor gives the last inference's outputs "
                f"({', '.join(names)}); inputs are what you pass to infer()"
            )
        raise InferenceError(
            f"no output {name!r:.60} from the last inference: give an output's name, port or index "
            f"(outputs are {', '.join(names)})"
        )

    def get_output_tensor(self, index: int | None = None) -> np.ndarray:
        """OpenVINO's get_output_tensor: the last inference's output ``index`` (None: the only one), as
        get_tensor gives it. InferenceError as get_tensor, and for None with several outputs."""
        names = self._executor.output_names
        if index is None and len(names) != 1:
            raise InferenceError(
                f"the model has {len(names)} outputs ({', '.join(names)}): give get_output_tensor(index)"
            )
        return self.get_tensor(0 if index is None else index)

    @property
    def links(self) -> LinkPlan:
        """How this request links the current revision's subgraphs (plain data): which boundary tensors
        are allocated once and pre-bound, which are made per inference, which subgraph feeds which, and
        the path an inference given exactly the static inputs' arrays takes."""
        return self._executor.refresh().pool.plan

    @property
    def latency(self) -> float:
        """Milliseconds the last inference took (asynchronous: from start_async to its last subgraph)."""
        return self._latency_ms
