"""CompiledModel: a compiled split as its user holds it, OpenVINO's CompiledModel API. It holds what the
compile made (runtime.compiled: a value whose current revision is replaced whole, never changed under a
request), the pipeline its asynchronous requests run on, and answers its read-only properties; it makes
requests (runtime.infer_request) and exports (runtime.artifacts)."""

from __future__ import annotations

import os
import weakref
from typing import Any, BinaryIO

import numpy as np

from .. import properties
from ..errors import ConfigError, ModelError
from ..graph import Model, TensorInfo
from ..placement import config as cfg
from ..placement import devices as registry
from ..placement.config import SplitConfig
from ..placement.device_string import HETERO, split_device
from ..placement.partition import Plan
from ..placement.schedule import CONCURRENT, SEQUENTIAL, Schedule
from .artifacts.exporting import export_compiled, write_artifact
from .compiled import Compiled
from .compiled_subgraph import CompiledSubgraph
from .fallback import Fallback
from .infer_request import InferRequest
from .pipeline import Pipeline
from .results import port_name
from .revision import Move, Revision

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
    cfg.DISTRIBUTION_POLICY,
    cfg.CONCURRENCY,
)


class CompiledModel:
    """A model compiled for its devices: subgraph sessions in execution order, ready to infer.

    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU")
    results = compiled.create_infer_request().infer({"x": x})

    ``inputs`` / ``outputs``: the model's (TensorInfo). What runs is the current Revision (``current()``:
    model, plan, sessions, moves, frozen); ``plan``, ``subgraphs`` (CompiledSubgraph in execution order),
    ``runs``, ``one_session``, ``dot_files`` and ``revision`` (its number) read it. A request takes the
    current revision when an inference starts and runs that one to its end; where a run shows a session
    wrong, the next revision is built off to the side and swapped in whole. Made by Core from what a
    compile, an import or CACHE_DIR made (``compiled``).
    """

    def __init__(self, compiled: Compiled) -> None:
        self._compiled = compiled
        self._pipeline = Pipeline(compiled.current().model.name)
        # not at exit: lanes closed then would start again for the next stages of the inferences in flight
        # (pipeline.in_flight.drain waits for those), a new thread where Python 3.12 refuses one
        weakref.finalize(self, self._pipeline.close, 1.0).atexit = False

    # --- what was compiled --------------------------------------------------------------------------

    @property
    def model(self) -> Model:
        """The model as the current revision's sessions were compiled from it: the graph read, with type
        corrections of the compile's own (the Model compiled is never changed)."""
        return self._compiled.current().model

    @property
    def inputs(self) -> list[TensorInfo]:
        """The model's inputs (name, dtype, shape), in order."""
        return self._compiled.current().model.inputs

    @property
    def outputs(self) -> list[TensorInfo]:
        """The model's outputs (name, dtype, shape), in order."""
        return self._compiled.current().model.outputs

    @property
    def config(self) -> SplitConfig:
        """The compile's configuration (HETERO's keys and each device's)."""
        return self._compiled.config

    @property
    def device_name(self) -> str:
        """The device string compiled for ("HETERO:OPENVINO,CPU", "CPU")."""
        return self._compiled.device_name

    @property
    def constants(self) -> dict[str, np.ndarray]:
        """{model output: its value} of the outputs that are constants, computed at compile time."""
        return dict(self._compiled.constants)

    @property
    def fallback(self) -> Fallback:
        """The HETERO_FALLBACK policy: on or off, manual or automatic, the priority list."""
        return self._compiled.fallback

    @property
    def moves(self) -> tuple[Move, ...]:
        """The subgraphs HETERO_FALLBACK moved so far (at compile time and at run time), in order."""
        return self._compiled.current().moves

    @property
    def loaded_from_cache(self) -> bool:
        """Whether it was made from an export: CACHE_DIR's, or Core.import_model's."""
        return self._compiled.loaded_from_cache

    @property
    def profile_dir(self) -> Any:
        """Where profiled sessions write their traces (None without profiling)."""
        return self._compiled.profile_dir

    @property
    def unrenewed(self) -> dict[str, str]:
        """{run: why} for sessions an EP left in a failed run's state that could not be made again."""
        return dict(self._compiled.unrenewed)

    @property
    def pipeline(self) -> Pipeline:
        """The device lanes asynchronous requests run on; set its ``observer`` to trace the stages."""
        return self._pipeline

    # --- the revision that runs now -----------------------------------------------------------------

    def current(self) -> Revision:
        """The revision that runs now (what a new inference takes, and what an export writes)."""
        return self._compiled.current()

    @property
    def plan(self) -> Plan:
        """The current revision's Plan (devices as HETERO_FALLBACK left them)."""
        return self._compiled.current().plan

    @property
    def subgraphs(self) -> tuple[CompiledSubgraph, ...]:
        """The current revision's subgraphs, in execution order."""
        return self._compiled.current().subgraphs

    @property
    def runs(self) -> tuple[CompiledSubgraph, ...]:
        """What an inference of the current revision runs, in order (Revision.runs)."""
        return self._compiled.current().runs

    @property
    def revision(self) -> int:
        """The current revision's number: 0 as compiled, one more for each one a run made since."""
        return self._compiled.current().number

    @property
    def dot_files(self) -> tuple[Any, ...]:
        """The .dot files drawn of the current revision's plan (OPENVINO_HETERO_VISUALIZE), if any."""
        return self._compiled.current().dot_files

    @property
    def schedule(self) -> Schedule | None:
        """Which subgraphs an inference runs at the same time, and the threads their sessions got
        (placement.schedule; None for a model compiled without one, as an import of an older export)."""
        return self._compiled.current().schedule

    @property
    def one_session(self) -> bool:
        """True when one ONNX Runtime session runs all of several subgraphs (PERFORMANCE_HINT=LATENCY, where
        the query's session of the whole model placed every node as the plan does)."""
        return self._compiled.current().one_session

    @property
    def execution_devices(self) -> list[str]:
        """Devices that run the model's nodes, unique: the plan's in execution order, then the CPU where
        ORT ran part of a subgraph on its CPU EP (the subgraph's description names those nodes)."""
        current = self._compiled.current()
        devices = list(current.plan.devices)
        if "CPU" not in devices and any(
            ep == "CPUExecutionProvider" for run in current.runs for _, _, ep in run.fallback_nodes
        ):
            devices.append("CPU")
        return devices

    # --- requests and exports -----------------------------------------------------------------------

    def create_infer_request(self) -> InferRequest:
        """A new InferRequest with its own intermediate tensors: one per thread for concurrent inference
        (a request runs one inference at a time), or several in an AsyncInferQueue."""
        return InferRequest(self._compiled, self._pipeline)

    def __call__(
        self, inputs: Any = None, share_inputs: bool = False, share_outputs: bool = False
    ) -> dict[str, np.ndarray]:
        """Infer once with a throwaway request: ``compiled({"x": x})`` gives {output name: array}, as
        InferRequest.infer (which takes ``share_inputs`` and ``share_outputs`` as it does), and raises as
        it does (InferenceError)."""
        return self.create_infer_request().infer(inputs, share_inputs, share_outputs)

    def infer_new_request(self, inputs: Any = None) -> dict[str, np.ndarray]:
        """OpenVINO's name for ``compiled(inputs)``: one inference with a throwaway request."""
        return self(inputs)

    def input(self, key: int | str | None = None) -> TensorInfo:
        """The model input ``key`` names (its index or name; None: the only one), OpenVINO's port: results
        and infer() take it as a key. ModelError for a key that names none, or None with several inputs."""
        return _port(self.inputs, key, "input")

    def output(self, key: int | str | None = None) -> TensorInfo:
        """The model output ``key`` names (its index or name; None: the only one), OpenVINO's port:
        ``compiled(x)[compiled.output(0)]``. ModelError as ``input``."""
        return _port(self.outputs, key, "output")

    def set_property(self, properties: Any) -> None:
        """Refused (ConfigError): what a compile decided is fixed, as this compiled model's requests rely on
        it. Properties are given to Core.compile_model's config, or to Core.set_property before it."""
        raise ConfigError(
            "a compiled model's properties are fixed by its compile: give them in Core.compile_model's config "
            "(or Core.set_property before compiling), then compile again"
        )

    def export_model(self, path: str | os.PathLike[str] | BinaryIO | None = None) -> bytes:
        """This compiled model as it runs now, as one self-contained artifact (exporting.export_compiled):
        its bytes, also written to ``path`` (a file, whole or not at all; or a binary stream such as
        io.BytesIO, as OpenVINO's export_model writes one) where one is given. Core.import_model loads it.
        Raises ModelError where ``path`` cannot be written or is neither."""
        if path is not None and not isinstance(path, str | os.PathLike) and not hasattr(path, "write"):
            raise ModelError(
                f"cannot export to {type(path).__name__}: give a file path, a binary stream, or nothing (the "
                "bytes are returned)"
            )
        data = export_compiled(self._compiled)
        if isinstance(path, str | os.PathLike):
            write_artifact(data, path)
        elif path is not None:
            try:
                path.write(data)
            except TypeError:  # a text stream: str only
                raise ModelError("cannot export to a text stream: open it in binary mode ('wb')") from None
        return data

    def get_property(self, name: str) -> Any:
        """The value of one of COMPILED_PROPERTIES (SUPPORTED_PROPERTIES lists them): EXECUTION_DEVICES
        a list of device names, HETERO_NUMBER_OF_SUBMODELS (as OpenVINO names it; NUMBER_OF_SUBGRAPHS is its
        alias) and OPTIMAL_NUMBER_OF_INFER_REQUESTS ints,
        PERFORMANCE_HINT and MULTI_DEVICE_PRIORITIES strs, DEVICE_PROPERTIES {device: {key: value}},
        HETERO_FALLBACK a bool (whether this compile's subgraphs move where their device fails them),
        LOADED_FROM_CACHE a bool (whether it was made from an export: CACHE_DIR's or import_model's),
        MODEL_DISTRIBUTION_POLICY the set of policies the compile used, as Core.get_property gives them
        ({"PIPELINE_PARALLEL"}, or the empty set, OpenVINO's default), HETERO_CONCURRENCY CONCURRENT or
        SEQUENTIAL (whether an inference runs independent subgraphs at the same time). ConfigError for any other name."""
        key = str(name).upper()
        config = self._compiled.config
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
            return config.performance_mode
        if key == cfg.DEVICE_PROPERTIES:  # of the devices this compile could use, not every one configured
            named = {registry.lookup(name).name for name in self._priorities().split(",") if name}
            return {k: cfg.shown_values(v) for k, v in config.devices.items() if k in named}
        if key == cfg.PRIORITIES:
            return self._priorities()
        if key == FALLBACK:
            return self.fallback.enabled
        if key == cfg.DISTRIBUTION_POLICY:
            return set(cfg.parse_distribution_policy(config.hetero.get(key, "")))
        if key == cfg.CONCURRENCY:  # what an inference does, whatever was asked
            return CONCURRENT if self._compiled.current().concurrent else SEQUENTIAL
        raise ConfigError(f"unknown compiled-model property {name!r}: use {', '.join(COMPILED_PROPERTIES)}")

    def _priorities(self) -> str:
        """The devices this compile chose from: HETERO's priorities, or the one device it was given."""
        head, rest = split_device(self.device_name)
        if head != HETERO:
            return self.device_name
        return rest or self.config.priorities or ""

    def __repr__(self) -> str:
        return f"<CompiledModel {self.model.name} on {self.device_name}: {len(self.subgraphs)} subgraph(s)>"


def _port(ports: list[TensorInfo], key: int | str | None, what: str) -> TensorInfo:
    """The one of ``ports`` (the model's inputs or outputs) that ``key`` names (CompiledModel.input)."""
    names = [p.name for p in ports]
    if key is None:
        if len(ports) == 1:
            return ports[0]
        raise ModelError(
            f"the model has {len(ports)} {what}s ({', '.join(names)}): give {what}(index) or {what}(name)"
        )
    name = port_name(key, names)
    if name not in names:
        raise ModelError(
            f"no {what} {key!r:.60}: the model's {what}s are {', '.join(names)}, by name or index"
        )
    return ports[names.index(name)]
