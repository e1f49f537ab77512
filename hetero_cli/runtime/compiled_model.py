"""A compiled model: a plan's subgraphs with their ONNX Runtime sessions, what runs them in order, and its
read-only properties; ``relax`` compiles subgraphs again where a run showed a declared shape wrong."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import properties
from ..errors import ConfigError, HeteroError
from ..graph import Model, TensorInfo
from ..ort.session import ort
from ..placement import config as cfg
from ..placement import devices as registry
from ..placement.config import SplitConfig
from ..placement.device_string import HETERO, split_device
from ..placement.devices import Device
from ..placement.partition import Plan, Subgraph
from . import fallback as falling
from . import type_repair
from .profiling import SessionProfile

if TYPE_CHECKING:
    from .infer_request import InferRequest

log = logging.getLogger("hetero_cli")

HOST_EPS = frozenset({"CPUExecutionProvider", "OpenVINOExecutionProvider"})


@dataclass
class CompiledSubgraph:
    """A plan subgraph with its ORT session and what ORT really did with its nodes.

    Made by the compile (read them as ``compiled.subgraphs``, in execution order). ``session``: the
    onnxruntime.InferenceSession; ``placement``: [(EP, [(node, op type)])] as ORT assigned the nodes;
    ``profiler``: set when profiling is on (PERF_COUNT).
    """

    subgraph: Subgraph
    target: Device
    session: ort.InferenceSession
    placement: list[tuple[str, list[tuple[str, str]]]]
    profiler: SessionProfile | None = None
    from_probe: bool = False  # the session is the query's probe of the whole model (compiled only once)
    label: str = ""  # what the session runs where that is several subgraphs (CompiledModel.one_session)
    proven: bool = False  # it completed an inference: HETERO_FALLBACK never moves it at run time

    @property
    def index(self) -> int:
        """Place in execution order, from 0."""
        return self.subgraph.index

    @property
    def name(self) -> str:
        """``subgraph<N>``, N from 1."""
        return self.subgraph.name

    @property
    def device(self) -> str:
        """Canonical name of the device this subgraph was compiled for."""
        return self.target.name

    @property
    def where(self) -> str:
        """``subgraph<N> on <device>``, or the label of a session that runs several subgraphs (messages)."""
        return self.label or f"{self.name} on {self.device}"

    @property
    def nodes(self) -> tuple[str, ...]:
        """Friendly names of the model's nodes this subgraph owns."""
        return self.subgraph.nodes

    @property
    def inputs(self) -> tuple[str, ...]:
        """Tensor names it reads from model inputs or earlier subgraphs."""
        return self.subgraph.inputs

    @property
    def outputs(self) -> tuple[str, ...]:
        """Tensor names it hands to later subgraphs or to the caller."""
        return self.subgraph.outputs

    @property
    def fallback_nodes(self) -> list[tuple[str, str, str]]:
        """(node, op type, EP) for nodes ORT ran on another EP than the device's own."""
        return [
            (name, op, ep) for ep, placed in self.placement if ep != self.target.ep for name, op in placed
        ]

    @property
    def on_host(self) -> bool:
        """True when the subgraph's outputs live in host memory (CPU and OpenVINO EPs)."""
        return self.target.ep in HOST_EPS

    @property
    def description(self) -> str:
        """Device, node count, and any nodes ORT placed elsewhere - never hidden."""
        text = f"{self.name}: {self.device} ({self.target.ep}), {len(self.nodes)} node(s)"
        fallback = self.fallback_nodes
        if fallback:
            eps = sorted({ep for _, _, ep in fallback})
            text += (
                f"; ORT ran part of it on {', '.join(eps)} instead (nodes as ORT names them after its "
                f"optimizations): "
                + ", ".join(f"{n} ({op})" for n, op, _ in fallback[:5])
                + (" ..." if len(fallback) > 5 else "")
            )
        return text


# compiler.prepare_subgraph: (model, subgraph, device, config, profile_dir, probe, *, shared) -> the call that
# creates the subgraph's session
PrepareSubgraph = Callable[..., Callable[[], CompiledSubgraph]]


SUPPORTED_PROPERTIES = str(properties.supported_properties)
EXECUTION_DEVICES = str(properties.execution_devices)
#: OpenVINO's ov::hetero::number_of_submodels; NUMBER_OF_SUBGRAPHS is its alias here (earlier releases' name)
HETERO_NUMBER_OF_SUBMODELS = "HETERO_NUMBER_OF_SUBMODELS"
NUMBER_OF_SUBGRAPHS = "NUMBER_OF_SUBGRAPHS"
#: OpenVINO's ov::loaded_from_cache: True where the compile loaded an export from CACHE_DIR or import_model made it
LOADED_FROM_CACHE = "LOADED_FROM_CACHE"
FALLBACK = cfg.FALLBACK
OPTIMAL_NUMBER_OF_INFER_REQUESTS = str(properties.optimal_number_of_infer_requests)
#: what get_property answers, in the order SUPPORTED_PROPERTIES lists them
COMPILED_PROPERTIES = (
    SUPPORTED_PROPERTIES,
    EXECUTION_DEVICES,
    HETERO_NUMBER_OF_SUBMODELS,
    NUMBER_OF_SUBGRAPHS,
    OPTIMAL_NUMBER_OF_INFER_REQUESTS,
    LOADED_FROM_CACHE,
    cfg.PERFORMANCE_HINT,
    cfg.DEVICE_PROPERTIES,
    cfg.PRIORITIES,
    FALLBACK,
)


class CompiledModel:
    """A model compiled for its devices: subgraph sessions in execution order, ready to infer.

    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU")
    results = compiled.create_infer_request().infer({"x": x})

    ``inputs`` / ``outputs``: the model's (TensorInfo); ``plan``: the Plan it compiled; ``subgraphs``:
    CompiledSubgraph in execution order. Made by compiler.compile_plan, which hands it the values of the
    model's constant outputs (``constants``) and how to compile one of its subgraphs again (``prepare``:
    compiler.prepare_subgraph, which relax uses; this module sits below the compiler).
    """

    def __init__(
        self,
        model: Model,
        plan: Plan,
        subgraphs: list[CompiledSubgraph],
        config: SplitConfig,
        device_name: str,
        runs: list[CompiledSubgraph] | None = None,
        *,
        constants: Mapping[str, np.ndarray],
        prepare: PrepareSubgraph,
    ) -> None:
        self.model = model
        self.plan = plan
        self.subgraphs = subgraphs
        # what an inference runs, in order: the subgraphs, or one entry standing for the whole plan where
        # one ORT session runs every subgraph (one_session)
        self.runs = subgraphs if runs is None else runs
        self.config = config
        self.device_name = device_name
        self.constants = dict(constants)
        self._prepare = prepare
        self.dot_files: tuple[Path, ...] = ()  # .dot files the compile wrote (OPENVINO_HETERO_VISUALIZE)
        self.profile_dir: Path | None = None  # where profiled sessions write their traces
        # how many times relax() or a fallback changed the subgraphs: a request's steps are of one revision
        self.revision = 0
        # HETERO_FALLBACK: on or off, the priority list and the moves so far (compile_with_fallback sets it)
        self.fallback: falling.Fallback | None = None
        self._change_lock = threading.Lock()
        self.loaded_from_cache = False  # made from an export (CACHE_DIR's, or Core.import_model's)
        self.inputs: list[TensorInfo] = model.inputs
        self.outputs: list[TensorInfo] = model.outputs

    @property
    def one_session(self) -> bool:
        """True when one ONNX Runtime session runs all of several subgraphs (PERFORMANCE_HINT=LATENCY, where
        the query's session of the whole model placed every node as the plan does)."""
        return len(self.runs) < len(self.subgraphs)

    @property
    def execution_devices(self) -> list[str]:
        """Devices that run the model's nodes, unique: the plan's in execution order, then the CPU where
        ORT ran part of a subgraph on its CPU EP (the subgraph's description names those nodes)."""
        devices = list(self.plan.devices)
        if "CPU" not in devices and any(
            ep == "CPUExecutionProvider" for run in self.runs for _, _, ep in run.fallback_nodes
        ):
            devices.append("CPU")
        return devices

    def create_infer_request(self) -> InferRequest:
        """A new InferRequest with its own intermediate tensors: one per thread for concurrent inference
        (a request runs one inference at a time), or several in an AsyncInferQueue."""
        from .infer_request import InferRequest

        return InferRequest(self)

    def __call__(self, inputs: Any) -> dict[str, np.ndarray]:
        """Infer once with a throwaway request: ``compiled({"x": x})`` gives {output name: array}, as
        InferRequest.infer, and raises as it does (InferenceError)."""
        return self.create_infer_request().infer(inputs)

    def get_property(self, name: str) -> Any:
        """The value of one of COMPILED_PROPERTIES (SUPPORTED_PROPERTIES lists them): EXECUTION_DEVICES
        a list of device names, HETERO_NUMBER_OF_SUBMODELS (as OpenVINO names it; NUMBER_OF_SUBGRAPHS is its
        alias) and OPTIMAL_NUMBER_OF_INFER_REQUESTS ints,
        PERFORMANCE_HINT and MULTI_DEVICE_PRIORITIES strs, DEVICE_PROPERTIES {device: {key: value}},
        HETERO_FALLBACK a bool (whether this compile's subgraphs move where their device fails them),
        LOADED_FROM_CACHE a bool (whether it was made from an export: CACHE_DIR's or import_model's).
        ConfigError for any other name."""
        key = str(name).upper()
        if key == SUPPORTED_PROPERTIES:
            return list(COMPILED_PROPERTIES)
        if key == EXECUTION_DEVICES:
            return self.execution_devices
        if key in (HETERO_NUMBER_OF_SUBMODELS, NUMBER_OF_SUBGRAPHS):
            return len(self.subgraphs)
        if key == LOADED_FROM_CACHE:
            return self.loaded_from_cache
        if key == OPTIMAL_NUMBER_OF_INFER_REQUESTS:
            # one request per pipeline stage keeps every device busy (OpenVINO: the max over submodels)
            return max(1, len({r.device for r in self.runs}))
        if key == cfg.PERFORMANCE_HINT:
            return self.config.performance_mode
        if key == cfg.DEVICE_PROPERTIES:  # of the devices this compile could use, not every one configured
            named = {registry.lookup(name).name for name in self._priorities().split(",") if name}
            return {k: dict(v) for k, v in self.config.devices.items() if k in named}
        if key == cfg.PRIORITIES:
            return self._priorities()
        if key == FALLBACK:
            return self.fallback is not None and self.fallback.enabled
        raise ConfigError(f"unknown compiled-model property {name!r}: use {', '.join(COMPILED_PROPERTIES)}")

    def export_model(self, path: str | os.PathLike[str] | None = None) -> bytes:
        """This compiled model as it runs now, as one self-contained artifact (exporting.export_compiled):
        its bytes, also written to ``path`` (whole or not at all) where one is given. Core.import_model
        loads it. Raises ModelError where ``path`` cannot be written."""
        from .exporting import export_compiled, write_artifact

        with self._change_lock:
            data = export_compiled(self)
        if path is not None:
            write_artifact(data, path)
        return data

    def relax(self, refused: Mapping[str, tuple[int, ...] | None], failed: CompiledSubgraph) -> bool:
        """Compile again, with those dimensions dynamic, every subgraph that passes a tensor subgraph
        ``failed`` refused at run time: ``refused`` is {tensor: the dimensions it refused, None for the
        rank}.

        The model said the tensor has a shape (its value_info, or onnx's shape inference, which differs
        from ONNX Runtime's kernels in places: MaxPool with ceil_mode, ConvTranspose with SAME padding) that
        the producing subgraph did not make; one ORT session over the whole model only warns, so a split
        runs it too. True when the caller should take the subgraphs again (relaxed now, or ``failed`` was
        compiled again already, for another request); False when nothing is left to relax (the refusal
        stands). What is relaxed is the type ``failed``'s session declares, whatever gave it
        (type_repair.relaxed_types).
        """
        with self._change_lock:
            if self.one_session:
                return False
            if all(c is not failed for c in self.subgraphs):
                return True
            relaxed = type_repair.relaxed_types(failed.session.get_inputs(), refused)
            if not relaxed:
                return False
            before = type_repair.correct(self.model, relaxed)
            type_repair.warn_relaxed(relaxed, refused)
            shared = len(self.subgraphs) > 1
            try:
                fresh = [
                    self._prepare(
                        self.model, c.subgraph, c.target, self.config, self.profile_dir, None, shared=shared
                    )()
                    if relaxed.keys() & {*c.inputs, *c.outputs}
                    else c
                    for c in self.subgraphs
                ]
            except HeteroError as exc:  # the refusal stands, with this reason beside it in the log
                log.warning("the subgraphs could not be compiled again: %s", exc)
                type_repair.take_back(self.model, before)
                return False
            self.subgraphs[:] = fresh
            self.revision += 1
            return True

    def fall_back(self, failed: CompiledSubgraph, cause: BaseException, values: Mapping[str, Any]) -> bool:
        """HETERO_FALLBACK at run time: ``failed`` failed its first inference with ``cause``; ``values`` holds
        that inference's model inputs. True when the caller should take the subgraphs again and start the
        inference over (fallback.settle moved what fails, now or for another request); False when fallback
        does not apply. InferenceError where no device of the priority list runs the subgraph."""
        with self._change_lock:
            return falling.settle(self, failed, cause, values)

    def prepare(self, subgraph: Subgraph, device: Device) -> CompiledSubgraph:
        """A session of ``subgraph`` on ``device``, with this compile's config (a fallback's move)."""
        shared = len(self.plan.subgraphs) > 1
        return self._prepare(
            self.model, subgraph, device, self.config, self.profile_dir, None, shared=shared
        )()

    def replace_subgraphs(self, plan: Plan, subgraphs: list[CompiledSubgraph]) -> None:
        """Run ``subgraphs`` (one session each) for ``plan`` from now on: a new revision."""
        self.plan = plan
        self.subgraphs[:] = subgraphs
        self.runs = self.subgraphs
        self.revision += 1

    def _priorities(self) -> str:
        """The devices this compile chose from: HETERO's priorities, or the one device it was given."""
        head, rest = split_device(self.device_name)
        if head != HETERO:
            return self.device_name
        return rest or self.config.priorities or ""

    def __repr__(self) -> str:
        return f"<CompiledModel {self.model.name} on {self.device_name}: {len(self.subgraphs)} subgraph(s)>"
