"""A compiled model: a sequence of frozen revisions (runtime.revision), each a plan's subgraphs with their
ONNX Runtime sessions and what runs them in order, and its read-only properties. ``relax`` (a run showed a
declared shape wrong), ``fall_back`` (HETERO_FALLBACK) and ``renew`` (a session its EP left in a failed
run's state) build the next revision and swap it in."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from . import renewal, type_repair
from .profiling import SessionProfile
from .revision import Revision, first_revision

if TYPE_CHECKING:
    from .infer_request import InferRequest

log = logging.getLogger("hetero_cli")

HOST_EPS = frozenset({"CPUExecutionProvider", "OpenVINOExecutionProvider"})


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: each is one session
class CompiledSubgraph:
    """A plan subgraph with its ORT session and what ORT really did with its nodes; never changed.

    Made by the compile (read them as ``compiled.subgraphs``, in execution order). ``session``: the
    onnxruntime.InferenceSession; ``placement``: ((EP, ((node, op type), ...)), ...) as ORT assigned the
    nodes; ``profiler``: set when profiling is on (PERF_COUNT).
    """

    subgraph: Subgraph
    target: Device
    session: ort.InferenceSession
    placement: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    profiler: SessionProfile | None = None
    from_probe: bool = False  # the session is a query probe (of the whole model, or of a part): compiled once
    label: str = ""  # what the session runs where that is several subgraphs (CompiledModel.one_session)
    # what its runs showed, not what it is: set once it completed an inference (``proven``), never unset
    _completed: threading.Event = field(default_factory=threading.Event, repr=False)

    def __post_init__(self) -> None:
        placement = tuple((ep, tuple(placed)) for ep, placed in self.placement)
        object.__setattr__(self, "placement", placement)  # ORT's lists, frozen

    @property
    def proven(self) -> bool:
        """It completed an inference: HETERO_FALLBACK never moves it at run time (a failure is the input's)."""
        return self._completed.is_set()

    def prove(self) -> None:
        """Record that it completed an inference (``proven`` from now on)."""
        self._completed.set()

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
    cfg.DISTRIBUTION_POLICY,
)


class CompiledModel:
    """A model compiled for its devices: subgraph sessions in execution order, ready to infer.

    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU")
    results = compiled.create_infer_request().infer({"x": x})

    ``inputs`` / ``outputs``: the model's (TensorInfo). What runs is the current Revision (``current()``:
    plan, sessions, types, frozen); ``plan``, ``subgraphs`` (CompiledSubgraph in execution order), ``runs``,
    ``one_session``, ``dot_files`` and ``revision`` (its number) read it. A request takes the current
    revision when an inference starts and runs that one to its end; ``relax`` and ``fall_back`` build the
    next revision and swap it in under one lock (which no inference takes). Made by compiler.compile_plan,
    which hands it the values of the model's constant outputs (``constants``) and how to compile one of its
    subgraphs again (``prepare``: compiler.prepare_subgraph; this module sits below the compiler).
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
        # what an inference runs, in order (runs): the subgraphs, or one entry standing for the whole plan
        # where one ORT session runs every subgraph (one_session)
        self._revision = first_revision(model, plan, subgraphs, runs)
        self.config = config
        self.device_name = device_name
        self.constants = dict(constants)
        self._prepare = prepare
        self.profile_dir: Path | None = None  # where profiled sessions write their traces
        # HETERO_FALLBACK: on or off, the priority list and the moves so far (compile_with_fallback sets it)
        self.fallback: falling.Fallback | None = None
        self._change_lock = threading.Lock()
        # runs whose session failed a run and could not be made again (renew), by ``where``: the reason
        self.unrenewed: dict[str, str] = {}
        self.loaded_from_cache = False  # made from an export (CACHE_DIR's, or Core.import_model's)
        self.inputs: list[TensorInfo] = model.inputs
        self.outputs: list[TensorInfo] = model.outputs

    def current(self) -> Revision:
        """The revision that runs now (what a new inference takes, and what an export writes)."""
        return self._revision

    @property
    def plan(self) -> Plan:
        """The current revision's Plan (devices as HETERO_FALLBACK left them)."""
        return self._revision.plan

    @property
    def subgraphs(self) -> tuple[CompiledSubgraph, ...]:
        """The current revision's subgraphs, in execution order."""
        return self._revision.subgraphs

    @property
    def runs(self) -> tuple[CompiledSubgraph, ...]:
        """What an inference of the current revision runs, in order (Revision.runs)."""
        return self._revision.runs

    @property
    def revision(self) -> int:
        """The current revision's number: 0 as compiled, one more for each relax or fallback since."""
        return self._revision.number

    @property
    def dot_files(self) -> tuple[Path, ...]:
        """The .dot files drawn of the current revision's plan (OPENVINO_HETERO_VISUALIZE), if any."""
        return self._revision.dot_files

    @dot_files.setter
    def dot_files(self, files: tuple[Path, ...]) -> None:
        """Record the .dot files the compile drew of the current plan (a fallback draws its next one)."""
        with self._change_lock:
            self._revision = self._revision.drawn(files)

    @property
    def one_session(self) -> bool:
        """True when one ONNX Runtime session runs all of several subgraphs (PERFORMANCE_HINT=LATENCY, where
        the query's session of the whole model placed every node as the plan does)."""
        return self._revision.one_session

    @property
    def execution_devices(self) -> list[str]:
        """Devices that run the model's nodes, unique: the plan's in execution order, then the CPU where
        ORT ran part of a subgraph on its CPU EP (the subgraph's description names those nodes)."""
        current = self._revision
        devices = list(current.plan.devices)
        if "CPU" not in devices and any(
            ep == "CPUExecutionProvider" for run in current.runs for _, _, ep in run.fallback_nodes
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
        LOADED_FROM_CACHE a bool (whether it was made from an export: CACHE_DIR's or import_model's),
        MODEL_DISTRIBUTION_POLICY the set of policies the compile used, as Core.get_property gives them
        ({"PIPELINE_PARALLEL"}, or the empty set, OpenVINO's default). ConfigError for any other name."""
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
        if key == cfg.DISTRIBUTION_POLICY:
            return set(cfg.parse_distribution_policy(self.config.hetero.get(key, "")))
        raise ConfigError(f"unknown compiled-model property {name!r}: use {', '.join(COMPILED_PROPERTIES)}")

    def export_model(self, path: str | os.PathLike[str] | None = None) -> bytes:
        """This compiled model as it runs now, as one self-contained artifact (exporting.export_compiled):
        its bytes, also written to ``path`` (whole or not at all) where one is given. Core.import_model
        loads it. Raises ModelError where ``path`` cannot be written."""
        from .artifacts.exporting import export_compiled, write_artifact

        data = export_compiled(self)
        if path is not None:
            write_artifact(data, path)
        return data

    def relax(self, refused: Mapping[str, tuple[int, ...] | None], failed: CompiledSubgraph) -> bool:
        """Compile again, with those dimensions dynamic, every subgraph that passes a tensor subgraph
        ``failed`` refused at run time (``refused``: {tensor: the dimensions it refused, None for the
        rank}), as the next revision.

        The model said the tensor has a shape (its value_info, or onnx's shape inference, which differs
        from ONNX Runtime's kernels in places: MaxPool with ceil_mode, ConvTranspose with SAME padding) that
        the producing subgraph did not make; one ORT session over the whole model only warns, so a split
        runs it too. True when the caller should start over on the current revision (relaxed now, or
        ``failed`` was compiled again already, for another request); False when nothing is left to relax
        (the refusal stands). What is relaxed is the type ``failed``'s session declares, whatever gave it
        (type_repair.relaxed_types).
        """
        return self._advance(failed, lambda current: self._relaxed(current, refused, failed))

    def _relaxed(
        self, current: Revision, refused: Mapping[str, tuple[int, ...] | None], failed: CompiledSubgraph
    ) -> Revision | None:
        """relax's next revision after ``current``, or None where nothing is left to relax."""
        if current.one_session:
            return None
        relaxed = type_repair.relaxed_types(failed.session.get_inputs(), refused)
        if not relaxed:
            return None
        before = type_repair.correct(self.model, relaxed)
        type_repair.warn_relaxed(relaxed, refused)
        shared = len(current.subgraphs) > 1
        try:
            fresh = [
                self._prepare(
                    self.model, c.subgraph, c.target, self.config, self.profile_dir, None, shared=shared
                )()
                if relaxed.keys() & {*c.inputs, *c.outputs}
                else c
                for c in current.subgraphs
            ]
        except HeteroError as exc:  # the refusal stands, with this reason beside it in the log
            log.warning("the subgraphs could not be compiled again: %s", exc)
            type_repair.take_back(self.model, before)
            return None
        return current.next(self.model, fresh)

    def fall_back(self, failed: CompiledSubgraph, cause: BaseException, values: Mapping[str, Any]) -> bool:
        """HETERO_FALLBACK at run time: ``failed`` failed its first inference with ``cause``; ``values`` holds
        that inference's model inputs. True when the caller should start the inference over on the current
        revision (fallback.settle built the next one, now or for another request); False when fallback
        does not apply. InferenceError where no device of the priority list runs the subgraph."""
        return self._advance(failed, lambda current: falling.settle(self, current, failed, cause, values))

    def renew(self, failed: CompiledSubgraph, cause: BaseException) -> bool:
        """After ``failed``'s session failed a run with ``cause``: where its EP keeps a failed run's state
        (renewal.applies: quirk openvino-failed-shape-kept), make its session again and swap in the next
        revision with it, so that the next inference starts on a fresh session (requests in flight finish on
        theirs). True where the current revision no longer holds ``failed`` (made again now, or already
        for another request); False where nothing applies or it could not be made again."""
        if not renewal.applies(failed, cause):
            return False
        return self._advance(failed, lambda current: renewal.renewed(current, failed, cause, self.unrenewed))

    def _advance(self, failed: CompiledSubgraph, build: Callable[[Revision], Revision | None]) -> bool:
        """Swap in ``build(current revision)``, unless ``failed`` is no longer the current revision's (another
        request swapped in the next one already): True then, or where a revision was swapped in; False
        where ``build`` gives None (nothing changes). Builds run one at a time; inference never waits."""
        with self._change_lock:
            current = self._revision
            if not current.holds(failed):
                return True
            following = build(current)
            if following is None:
                return False
            self._revision = following
            return True

    def prepare(self, subgraph: Subgraph, device: Device, *, shared: bool) -> CompiledSubgraph:
        """A session of ``subgraph`` on ``device``, with this compile's config (a fallback's move);
        ``shared``: it is one of several subgraphs (compiler.prepare_subgraph)."""
        return self._prepare(
            self.model, subgraph, device, self.config, self.profile_dir, None, shared=shared
        )()

    def _priorities(self) -> str:
        """The devices this compile chose from: HETERO's priorities, or the one device it was given."""
        head, rest = split_device(self.device_name)
        if head != HETERO:
            return self.device_name
        return rest or self.config.priorities or ""

    def __repr__(self) -> str:
        return f"<CompiledModel {self.model.name} on {self.device_name}: {len(self.subgraphs)} subgraph(s)>"
