"""Compile: one ONNX Runtime session per subgraph of a plan, each checked to really run on its device; or,
under PERFORMANCE_HINT=LATENCY, the query's one session of the whole model where it placed every node as
the plan does (whole_plan_probe)."""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import itertools
import logging
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import CompileError, ConfigError, HeteroError, ModelError
from ..graph import Model, TensorInfo, shape_text, type_shape
from ..ort.failures import about_shapes, failure_reason, refused_model
from ..ort.session import assignment, ort, record_assignment, session_options
from ..ort.types import arg_type
from ..placement import devices as registry
from ..placement.config import LATENCY, SplitConfig
from ..placement.devices import Device
from ..placement.export import extract, fed_initializers, subgraph_model
from ..placement.partition import CONSTANT, INPUT, Plan, Subgraph
from ..placement.query import KNOWN_FAILURES, Probe, known_claims, known_to_fail
from ..quirks.cpu import FORCE_SPINNING_STOP
from .profiling import SessionProfile

if TYPE_CHECKING:
    from .infer_request import InferRequest

log = logging.getLogger("hetero_cli")

HOST_EPS = frozenset({"CPUExecutionProvider", "OpenVINOExecutionProvider"})
_TRACES = itertools.count(1)  # numbers the profiled sessions' trace files apart


@dataclass
class CompiledSubgraph:
    """A plan subgraph with its ORT session and what ORT really did with its nodes."""

    subgraph: Subgraph
    target: Device
    session: ort.InferenceSession
    placement: list[tuple[str, list[tuple[str, str]]]]
    profiler: SessionProfile | None = None
    from_probe: bool = False  # the session is the query's probe of the whole model (compiled only once)
    label: str = ""  # what the session runs where that is several subgraphs (CompiledModel.one_session)

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


def prepare_subgraph(
    model: Model,
    subgraph: Subgraph,
    device: Device,
    config: SplitConfig,
    profile_dir: Path | None = None,
    probe: Probe | None = None,
    *,
    shared: bool = False,
) -> Callable[[], CompiledSubgraph]:
    """Export one subgraph now; the returned call creates its session on its device's EP with that
    device's settings (the EP compile).

    With PERF_COUNT on for the device, ORT's profiler writes its trace under ``profile_dir``. ``probe``: the
    query's session of the whole model on this device, used as is where it is what a compile would make.

    The split lets a compile export one subgraph (Python) while others' sessions are created (C++) on
    other threads. With ``shared``, the session's thread pool stops spinning as soon as its run returns
    (``session.force_spinning_stop``): the next subgraph's session needs those cores, and idle pool
    threads spinning for them made a two-session chain up to twice as slow as one session.
    """
    refuse_known_failures(model, subgraph, device)
    settings = config.settings(device)
    profiling = settings.profiling and profile_dir is not None
    providers = device.providers(settings.provider_options)
    # overridable initializers this EP would fold: inputs of an exported model, never the model as it is
    fed = fed_initializers(model, subgraph, device.kind.folds_initializers)
    if (
        probe is not None
        and not profiling
        and not fed
        and _serves(probe, subgraph, providers, settings.intra_op_num_threads or None)
    ):
        placement = assignment(probe.session)
        reused = CompiledSubgraph(subgraph, device, probe.session, placement, from_probe=True)
        return lambda: _checked(reused)
    whole = model.session_file if not fed and _is_whole_model(model, subgraph) else None
    data = str(whole) if whole is not None else subgraph_model(model, subgraph, fed=fed).SerializeToString()
    so = session_options(external_dir=model.external_dir)
    record_assignment(so)
    if shared:
        so.add_session_config_entry(FORCE_SPINNING_STOP, "1")
    if settings.intra_op_num_threads:
        so.intra_op_num_threads = settings.intra_op_num_threads
    if profiling:
        so.enable_profiling = True

    def create() -> ort.InferenceSession:
        if profiling:
            # ORT names a trace <prefix>_<date and time to the second>.json: sessions of one subgraph made
            # within a second (profiling restarts after every flush; relax compiles it again) need
            # prefixes of their own
            so.profile_file_prefix = str(profile_dir / f"{subgraph.name}_{next(_TRACES)}")
        # no fallback: ORT would otherwise print to stdout and quietly retry on the CPU EP alone
        return ort.InferenceSession(data, so, providers=providers, enable_fallback=0)

    def finish() -> CompiledSubgraph:
        try:
            session = create()
        except Exception as exc:
            where = (
                f"{subgraph.name} ({len(subgraph.nodes)} node(s) on {device.name}: {_ops(model, subgraph)})"
            )
            refused = refused_model(f"the model ({where})", exc)
            if refused is not None and (device.is_cpu or not _loads_on_cpu(data, model)):
                raise refused from None
            valid = (
                " (the CPU EP loads the subgraph: it is the EP's split of it ORT refuses)" if refused else ""
            )
            raise CompileError(
                f"{where} could not be compiled by {device.ep}: {failure_reason(exc)}{valid}; move its nodes "
                f"to another device (affinities){_unclaimed_note(model, subgraph, device)}, or change its "
                "config"
            ) from None
        if device.ep not in session.get_providers():
            raise CompileError(
                f"{subgraph.name} could not run on {device.name}: ONNX Runtime dropped {device.ep} while "
                f"creating its session (usually a provider option it refused: "
                f"{dict(settings.provider_options)}); check the config for {device.name}"
            )
        profiler = SessionProfile(create, session) if profiling else None
        return _checked(CompiledSubgraph(subgraph, device, session, assignment(session), profiler))

    return finish


def _checked(compiled: CompiledSubgraph) -> CompiledSubgraph:
    if compiled.fallback_nodes:
        log.warning("%s", compiled.description)
    return compiled


def _is_whole_model(model: Model, subgraph: Subgraph) -> bool:
    """Whether ``subgraph`` is the model itself: every node, every input, every model output (one that is
    an input or a constant, served without a session, must not come from the file: the OpenVINO EP refuses
    an initializer as a graph output, quirk openvino-initializer-output)."""
    return (
        len(subgraph.nodes) + len(subgraph.constant_nodes) == len(model)
        and set(subgraph.inputs) == set(model.input_names)
        and set(subgraph.outputs) == set(model.output_names)
    )


def _serves(probe: Probe, subgraph: Subgraph, providers: list[Any], threads: int | None) -> bool:
    """Whether a probe session is the session a compile would create for ``subgraph``: same providers
    and threads, the same inputs and (at least) its outputs."""
    session = probe.session
    return (
        probe.providers == providers
        and probe.intra_op_num_threads == threads
        and {i.name for i in session.get_inputs()} == set(subgraph.inputs)
        and set(subgraph.outputs) <= {o.name for o in session.get_outputs()}
    )


def refuse_known_failures(model: Model, subgraph: Subgraph, device: Device) -> None:
    """CompileError for nodes the device's EP is known to fail on (KNOWN_FAILURES), before ORT tries."""
    bad = [model.node(n) for n in subgraph.nodes if known_to_fail(model.node(n), device)]
    if bad:
        names = ", ".join(f"{n.get_friendly_name()} ({n.get_type_name()})" for n in bad[:5])
        raise CompileError(
            f"{subgraph.name} ({len(subgraph.nodes)} node(s) on {device.name}) holds {names}: "
            f"{KNOWN_FAILURES[device.kind.family][1]}. Move these nodes to another device (affinities), e.g. CPU"
        )


def _ops(model: Model, subgraph: Subgraph) -> str:
    kinds = list(dict.fromkeys(model.node(n).get_type_name() for n in subgraph.nodes))
    return ", ".join(kinds[:6]) + (" ..." if len(kinds) > 6 else "")


def _loads_on_cpu(data: str | bytes, model: Model) -> bool:
    """Whether the CPU EP alone creates a session of an exported subgraph: where another EP's session of it
    was refused as an invalid model (the OpenVINO EP can take nodes around one it leaves to the CPU EP,
    which ORT then finds to be a cycle: quirk openvino-cyclic-split), the EP is at fault, not the model."""
    try:
        ort.InferenceSession(
            data, session_options(external_dir=model.external_dir), providers=["CPUExecutionProvider"]
        )
    except Exception:
        return False
    return True


def _unclaimed_note(model: Model, subgraph: Subgraph, device: Device) -> str:
    """The subgraph's nodes ``device`` does not take, for a compile error's advice: from the query when
    it probed the device (automatic mode), else a pointer to ``hetero query``."""
    if device.is_cpu:
        return ""
    claimed = known_claims(model, device)
    if claimed is None:
        return f" (`hetero query -d HETERO:{device.name},CPU` shows which nodes {device.name} takes)"
    refused = [n for n in subgraph.nodes if n not in claimed]
    if not refused:
        return ""
    shown = ", ".join(f"{n} ({model.node(n).get_type_name()})" for n in refused[:5])
    return f", first those {device.name} does not take: {shown}" + (" ..." if len(refused) > 5 else "")


def constant_outputs(model: Model, plan: Plan) -> dict[str, np.ndarray]:
    """Values of model outputs that are constants, computed once at compile time."""
    wanted = [name for name, src in plan.output_sources.items() if src == CONSTANT]
    values: dict[str, np.ndarray] = {}
    if not wanted:
        return values
    rest = []
    for name in wanted:
        if name in model.dense_initializer_names:
            values[name] = model.initializer_array(name)  # read alone: the other weights stay in the file
        elif name in model.sparse_initializers:
            values[name] = _dense(model.sparse_initializers[name])
        else:
            rest.append(name)
    if rest:
        proto = extract(model, model.constant_nodes_for(rest), [], rest, name=f"{model.name}_constants")
        what = f"the model's constant output(s) {', '.join(map(repr, rest))}"
        try:
            sess = ort.InferenceSession(
                proto.SerializeToString(),
                session_options(external_dir=model.external_dir),
                providers=["CPUExecutionProvider"],
                enable_fallback=0,
            )
            values.update(zip(rest, sess.run(rest, {}), strict=True))
        except RuntimeError as exc:  # an element type ORT's Python API has no numpy type for (bfloat16...)
            raise CompileError(
                f"{what} cannot be handed over as numpy arrays ({failure_reason(exc)}): add a Cast to "
                "float32 after them in the model"
            ) from None
        except Exception as exc:  # ORT's own error classes: the model is refused, or the computation failed
            raise refused_model(what, exc) or CompileError(
                f"{what} could not be computed: {failure_reason(exc)}"
            ) from None
    return values


COMPILED_PROPERTIES = (
    "SUPPORTED_PROPERTIES",
    "EXECUTION_DEVICES",
    "NUMBER_OF_SUBGRAPHS",
    "OPTIMAL_NUMBER_OF_INFER_REQUESTS",
    "PERFORMANCE_HINT",
    "DEVICE_PROPERTIES",
    "MULTI_DEVICE_PRIORITIES",
)


def _dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A sparse initializer's value as a dense array (hetero-cli hands every output over as numpy)."""
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dense = np.zeros(tuple(sparse.dims), dtype=values.dtype)
    if indices.ndim == 1:  # linear positions in the flattened tensor
        dense.reshape(-1)[indices] = values
    else:  # one row of coordinates per value
        dense[tuple(indices.T)] = values
    return dense


class CompiledModel:
    """A model compiled for its devices: subgraph sessions in execution order, ready to infer.

    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU")
    results = compiled.create_infer_request().infer({"x": x})
    """

    def __init__(
        self,
        model: Model,
        plan: Plan,
        subgraphs: list[CompiledSubgraph],
        config: SplitConfig,
        device_name: str,
        runs: list[CompiledSubgraph] | None = None,
    ):
        self.model = model
        self.plan = plan
        self.subgraphs = subgraphs
        # what an inference runs, in order: the subgraphs, or one entry standing for the whole plan where
        # one ORT session runs every subgraph (one_session)
        self.runs = subgraphs if runs is None else runs
        self.config = config
        self.device_name = device_name
        self.constants = constant_outputs(model, plan)
        self.dot_files: tuple[Path, ...] = ()  # .dot files the compile wrote (OPENVINO_HETERO_VISUALIZE)
        self.profile_dir: Path | None = None  # where profiled sessions write their traces
        # how many times relax() compiled subgraphs again: a request's steps are of one revision
        self.revision = 0
        self._relax_lock = threading.Lock()
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
        """A new request with its own intermediate tensors (one per thread for concurrent inference)."""
        from .infer_request import InferRequest

        return InferRequest(self)

    def __call__(self, inputs: Any) -> dict[str, np.ndarray]:
        """Infer once with a throwaway request."""
        return self.create_infer_request().infer(inputs)

    def get_property(self, name: str) -> Any:
        """One of COMPILED_PROPERTIES (SUPPORTED_PROPERTIES lists them)."""
        key = str(name).upper()
        if key == "SUPPORTED_PROPERTIES":
            return list(COMPILED_PROPERTIES)
        if key == "EXECUTION_DEVICES":
            return self.execution_devices
        if key == "NUMBER_OF_SUBGRAPHS":
            return len(self.subgraphs)
        if key == "OPTIMAL_NUMBER_OF_INFER_REQUESTS":
            # one request per pipeline stage keeps every device busy (OpenVINO: the max over submodels)
            return max(1, len({r.device for r in self.runs}))
        if key == "PERFORMANCE_HINT":
            return self.config.performance_mode
        if key == "DEVICE_PROPERTIES":  # of the devices this compile could use, not every one configured
            named = {registry.lookup(name).name for name in self._priorities().split(",") if name}
            return {k: dict(v) for k, v in self.config.devices.items() if k in named}
        if key == "MULTI_DEVICE_PRIORITIES":
            return self._priorities()
        raise ConfigError(f"unknown compiled-model property {name!r}: use {', '.join(COMPILED_PROPERTIES)}")

    def relax(self, refused: Mapping[str, tuple[int, ...] | None], failed: CompiledSubgraph) -> bool:
        """Compile again, with those dimensions dynamic, every subgraph that passes a tensor subgraph
        ``failed`` refused at run time: ``refused`` is {tensor: the dimensions it refused, None for the
        rank}.

        The model said the tensor has a shape (its value_info, or onnx's shape inference, which differs
        from ONNX Runtime's kernels in places: MaxPool with ceil_mode, ConvTranspose with SAME padding) that
        the producing subgraph did not make; one ORT session over the whole model only warns, so a split
        runs it too. True when the caller should take the subgraphs again (relaxed now, or ``failed`` was
        compiled again already, for another request); False when nothing is left to relax (the refusal
        stands). What is relaxed is the type ``failed``'s session declares, whatever gave it.
        """
        with self._relax_lock:
            if self.one_session:
                return False
            if all(c is not failed for c in self.subgraphs):
                return True
            declared = {arg.name: arg_type(arg) for arg in failed.session.get_inputs()}
            relaxed = {}
            for name, dims in refused.items():
                t = _dynamic(name, declared.get(name), dims)
                if t is not None:
                    relaxed[name] = t
            if not relaxed:
                return False
            before = {name: self.model.correction(name) for name in relaxed}
            for name, t in relaxed.items():
                self.model.correct_type(name, t)
            log.warning(
                "ONNX Runtime computes %s with another shape than the model declares (its value_info, or "
                "onnx's shape inference): the subgraphs that pass it are compiled again, %s dynamic",
                ", ".join(relaxed),
                "; ".join(
                    f"{name}: {'its rank' if dims is None else 'dimension(s) ' + ', '.join(map(str, dims))}"
                    for name, dims in refused.items()
                    if name in relaxed
                ),
            )
            shared = len(self.subgraphs) > 1
            try:
                fresh = [
                    prepare_subgraph(
                        self.model, c.subgraph, c.target, self.config, self.profile_dir, None, shared=shared
                    )()
                    if relaxed.keys() & {*c.inputs, *c.outputs}
                    else c
                    for c in self.subgraphs
                ]
            except HeteroError as exc:  # the refusal stands, with this reason beside it in the log
                log.warning("the subgraphs could not be compiled again: %s", exc)
                for name, t in before.items():
                    self.model.correct_type(name, t)
                return False
            self.subgraphs[:] = fresh
            self.revision += 1
            return True

    def _priorities(self) -> str:
        """The devices this compile chose from: HETERO's priorities, or the one device it was given."""
        head, _, rest = self.device_name.partition(":")
        if head.strip().upper() != "HETERO":
            return self.device_name
        return rest or self.config.priorities or ""

    def __repr__(self) -> str:
        return f"<CompiledModel {self.model.name} on {self.device_name}: {len(self.subgraphs)} subgraph(s)>"


def _dynamic(name: str, t: onnx.TypeProto | None, dims: tuple[int, ...] | None) -> onnx.TypeProto | None:
    """Tensor ``name``'s type ``t`` with dimensions ``dims`` made symbolic (a name of their own each; ``dims``
    None: with no shape at all), or None where they already are (nothing to relax)."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    out = onnx.TypeProto()
    out.CopyFrom(t)
    if dims is None:
        out.tensor_type.ClearField("shape")
        return out
    shape = out.tensor_type.shape.dim
    fixed = [i for i in dims if 0 <= i < len(shape) and shape[i].HasField("dim_value")]
    for i in fixed:
        shape[i].Clear()
        shape[i].dim_param = f"{name}_dim{i}"
    return out if fixed else None


def compile_plan(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    device_name: str,
    probes: Mapping[str, Probe] | None = None,
) -> CompiledModel:
    """Create every subgraph's session; the plan must only name devices in ``devices``.

    ``probes``: whole-model probe sessions by device (query.keep_probes); a plan of one subgraph on such a
    device uses its probe rather than compiling the model again, and so does a plan of several under
    PERFORMANCE_HINT=LATENCY where the probe placed every node as the plan does (whole_plan_probe). Probes
    not used are dropped from ``probes`` before any session is created. Sessions are created in parallel
    (``compile_workers`` threads) while this thread exports the next subgraphs.
    """
    kept = probes if probes is not None else {}
    whole = whole_plan_probe(model, plan, devices, config, kept)
    if whole is not None:
        return _one_session(model, plan, devices, config, device_name, *whole)
    if len(plan.subgraphs) != 1 or fed_initializers(
        model, plan.subgraphs[0], devices[plan.subgraphs[0].device].kind.folds_initializers
    ):
        # only a plan of one subgraph can use one now, and not one whose EP would fold an overridable
        # initializer (prepare_subgraph): the rest must not stay in memory while sessions are created
        kept.clear()
    profiled = any(config.settings(devices[s.device]).profiling for s in plan.subgraphs)
    profile_dir = Path(tempfile.mkdtemp(prefix="hetero_profile_")) if profiled else None
    probe = kept.get(plan.subgraphs[0].device) if len(plan.subgraphs) == 1 else None
    shared = len(plan.subgraphs) > 1
    try:
        compiled = _compile_subgraphs(model, plan, devices, config, profile_dir, probe, shared)
        # a correction can reveal the next one (a consumer's own output, declared wrong too, inferred again)
        for _ in range(len(plan.subgraphs)):
            contradicted = _contradicted_types(model, plan, compiled)
            if not contradicted:
                break
            contradicted.update(_led_astray(model, plan, contradicted))
            _warn_corrected(model, contradicted)
            for name, value_type in contradicted.items():
                model.correct_type(name, value_type)
            compiled = [
                prepare_subgraph(
                    model, c.subgraph, devices[c.subgraph.device], config, profile_dir, None, shared=True
                )()
                if contradicted.keys() & {*c.subgraph.inputs, *c.subgraph.outputs}
                else c
                for c in compiled
            ]
        result = CompiledModel(model, plan, compiled, config, device_name)  # constant outputs may fail
        result.profile_dir = profile_dir
    except BaseException:
        if profile_dir is not None:
            shutil.rmtree(profile_dir, ignore_errors=True)
        raise
    if profile_dir is not None:
        weakref.finalize(result, shutil.rmtree, profile_dir, True)
    return result


def _compile_subgraphs(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    profile_dir: Path | None,
    probe: Probe | None,
    shared: bool,
) -> list[CompiledSubgraph]:
    """Every subgraph's session (in parallel). A value_info that contradicts the graph, declared for a
    subgraph's input, can keep its session from loading (MatMul's shape inference refuses it) where ORT's
    one session of the model goes by what it infers: on a shape failure, the boundary types inference
    without the value_info contradicts are corrected and the sessions made once more; the corrections
    are taken back, and the first failure raised, if that fails too."""

    def attempt() -> list[CompiledSubgraph]:
        return _in_parallel(
            [
                functools.partial(
                    prepare_subgraph, model, s, devices[s.device], config, profile_dir, probe, shared=shared
                )
                for s in plan.subgraphs
            ]
        )

    try:
        return attempt()
    except (CompileError, ModelError) as exc:
        wrong = (
            _contradicted(model, plan.passed_tensors(), model.types_without_value_info)
            if about_shapes(exc) and model.declares_fixed_dims
            else {}
        )
        if not wrong:
            raise
        declared = {name: model.value_type(name) for name in wrong}
        before = {name: model.correction(name) for name in wrong}
        for name, value_type in wrong.items():
            model.correct_type(name, value_type)
        try:
            compiled = attempt()
        except (CompileError, ModelError):
            for name, value_type in before.items():
                model.correct_type(name, value_type)
            raise exc from None
        _warn_corrected(model, wrong, declared)
        return compiled


def whole_plan_probe(
    model: Model, plan: Plan, devices: Mapping[str, Device], config: SplitConfig, probes: Mapping[str, Probe]
) -> tuple[Device, Probe] | None:
    """The kept probe session (and its device) that can run all of a plan of several subgraphs, or None.

    ONNX Runtime splits a session between its EP and the CPU EP just as HETERO:<EP>,CPU does, so where the
    probe of the first device, created with the compile's settings for both devices, ran exactly the
    plan's CPU nodes on the CPU EP and every other node on its own, it already is the plan compiled: one
    session, with none of the per-subgraph sessions' runs and boundaries. Only under PERFORMANCE_HINT=
    LATENCY (the throughput modes keep one session per subgraph: the pipeline stages requests overlap on)
    and without profiling (PERF_COUNT counts each subgraph's own session).
    """
    if len(plan.subgraphs) < 2 or config.performance_mode != LATENCY or len(plan.devices) != 2:
        return None
    cpu, device = sorted((devices[name] for name in plan.devices), key=lambda d: not d.is_cpu)
    probe = probes.get(device.name)
    if not cpu.is_cpu or probe is None:
        return None
    if device.kind.folds_initializers and model.overridable_initializers:
        return None  # the probe folded them: a value fed for one would be ignored (prepare_subgraph)
    mine, theirs = config.settings(device), config.settings(cpu)
    threads = mine.intra_op_num_threads or None
    if (
        mine.profiling
        or theirs.profiling
        or probe.providers != device.providers(mine.provider_options)
        or probe.intra_op_num_threads != threads
        or theirs.provider_options  # the probe's CPU EP has no options
        or (theirs.intra_op_num_threads or None) != threads
    ):
        return None
    placed = assignment(probe.session)
    if {ep for ep, _ in placed} - {device.ep, cpu.ep}:
        return None
    passed = plan.passed_tensors()
    if model.declares_fixed_dims and _contradicted(model, passed, model.types_at_one_size):
        # the veto of quirk openvino-declared-shape-in-split: a value_info a run can contradict, on a tensor
        # between the EP's part and the CPU EP's: the OpenVINO EP returns the declared shape there, silently
        # (a batch cut to the declared size);
        # sessions of their own are relaxed when a run shows it
        return None
    # every node of the model the session ran, on the plan's device for it. Nodes ORT fused away (missing
    # from its record) run inside what they were fused into; a fusion's own name on the EP is the EP's
    # business, but one on the CPU EP may hold nodes the plan gives the EP: not the plan, then.
    where = {name: s.device for s in plan.subgraphs for name in s.nodes}
    for ep, nodes in placed:
        on = device.name if ep == device.ep else cpu.name
        for name, _ in nodes:
            if where.get(name, None if on == cpu.name else on) != on:
                return None
    return device, probe


def _one_session(
    model: Model,
    plan: Plan,
    devices: Mapping[str, Device],
    config: SplitConfig,
    device_name: str,
    device: Device,
    probe: Probe,
) -> CompiledModel:
    """A compiled model whose subgraphs all run in ``probe``'s session (whole_plan_probe said it may)."""
    session = probe.session
    subgraphs = [
        CompiledSubgraph(
            s,
            devices[s.device],
            session,
            [(devices[s.device].ep, [(n, model.node(n).get_type_name()) for n in s.nodes])],
            from_probe=True,
        )
        for s in plan.subgraphs
    ]
    outputs = tuple(t for t in plan.outputs if plan.output_sources[t] not in (INPUT, CONSTANT))
    whole = Subgraph(
        index=0,
        device=device.name,
        nodes=tuple(n for s in plan.subgraphs for n in s.nodes),
        constant_nodes=(),
        inputs=tuple(i.name for i in session.get_inputs()),
        outputs=tuple(dict.fromkeys(outputs)),
    )
    # model outputs that are all inputs or constants leave the session nothing to compute
    label = f"the one session of subgraph1-subgraph{len(subgraphs)} ({' and '.join(plan.devices)})"
    runs = (
        [CompiledSubgraph(whole, device, session, assignment(session), from_probe=True, label=label)]
        if outputs
        else []
    )
    log.info(
        "%d subgraphs run in one ONNX Runtime session: the query's, which placed every node as the plan does "
        "(PERFORMANCE_HINT=THROUGHPUT gives each subgraph its own)",
        len(subgraphs),
    )
    return CompiledModel(model, plan, subgraphs, config, device_name, runs=runs)


def _warn_corrected(
    model: Model,
    types: Mapping[str, onnx.TypeProto],
    declared: Mapping[str, onnx.TypeProto | None] | None = None,
) -> None:
    """The warning for corrected boundary types (``declared``: what they were, where already replaced)."""
    was = {name: (declared or {}).get(name, model.value_type(name)) for name in types}
    log.warning(
        "the model's value_info contradicts what ONNX Runtime infers for %s: using ONNX Runtime's "
        "shapes at these subgraph boundaries (fix or drop that value_info)",
        ", ".join(
            f"{name} ({shape_text(type_shape(was[name]))} declared, {shape_text(type_shape(t))} inferred)"
            for name, t in types.items()
        ),
    )


def _contradicted(
    model: Model, names: Iterable[str], truth: Mapping[str, onnx.TypeProto]
) -> dict[str, onnx.TypeProto]:
    """{tensor: its type in ``truth``} for those of ``names`` whose declared shape ``truth`` (an inference
    without the model's value_info) contradicts: another rank, or another fixed size."""
    out = {}
    for name in sorted(names):
        have, real = type_shape(model.value_type(name)), type_shape(truth.get(name))
        if have is not None and real is not None and _contradicts(have, real):
            out[name] = truth[name]
    return out


def _contradicts(declared: Sequence[Any], inferred: Sequence[Any]) -> bool:
    """Whether two shapes disagree: another rank, or a dimension fixed in both at different sizes."""
    return len(declared) != len(inferred) or any(
        isinstance(a, int) and isinstance(b, int) and a >= 0 and a != b
        for a, b in zip(declared, inferred, strict=True)
    )


def _led_astray(model: Model, plan: Plan, found: Mapping[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """{tensor: its type without the model's value_info} for the tensors passed between subgraphs whose
    type (as ``found`` corrects it, or as inferred from a value_info ORT contradicted) fixes a dimension
    that inference without the value_info gives another size or leaves dynamic, or has another rank:
    ORT's sessions report such a type as declared, so only inference without the value_info shows it."""
    passed = plan.passed_tensors()
    truth = model.types_without_value_info if passed else {}
    out = {}
    for name in sorted(passed):
        have = type_shape(found.get(name) or model.value_type(name))
        real = type_shape(truth.get(name))
        if have is None or real is None:
            continue
        if len(have) != len(real) or any(
            isinstance(a, int) and a != b for a, b in zip(have, real, strict=True)
        ):
            out[name] = truth[name]
    return out


def _contradicted_types(
    model: Model, plan: Plan, compiled: Sequence[CompiledSubgraph]
) -> dict[str, onnx.TypeProto]:
    """{tensor: the type ORT infers} for the tensors passed between subgraphs whose static shape the model
    declares and ORT contradicts. ORT runs such a model whole (it warns and goes by what it infers) and
    reports the dimensions in conflict as unknown: declared as they are, a consumer's input would refuse
    the real tensor."""
    passed = plan.passed_tensors()
    out: dict[str, onnx.TypeProto] = {}
    for c in compiled:
        for arg in c.session.get_outputs():
            declared = model.value_type(arg.name) if arg.name in passed else None
            if declared is None or not declared.HasField("tensor_type"):
                continue
            tensor = declared.tensor_type
            if not tensor.HasField("shape"):
                continue
            # a negative dim_value (paddle2onnx writes -1 for the batch) declares nothing: as dynamic as none;
            # the rank is declared even where every dimension is symbolic
            dims = [
                d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                for d in tensor.shape.dim
            ]
            seen = list(arg.shape)
            if len(seen) != len(dims):
                out[arg.name] = helper.make_tensor_type_proto(tensor.elem_type, None)
            elif any(d is not None and not isinstance(s, int) for d, s in zip(dims, seen, strict=True)):
                kept = [s if isinstance(s, int) else None for s in seen]
                out[arg.name] = helper.make_tensor_type_proto(tensor.elem_type, kept)
    return out


def compile_workers(subgraphs: int) -> int:
    """Threads that create subgraph sessions at once: one per core, at most 8, at most one per subgraph."""
    return max(1, min(subgraphs, os.cpu_count() or 1, 8))


def _in_parallel(jobs: Sequence[Callable[[], Callable[[], CompiledSubgraph]]]) -> list[CompiledSubgraph]:
    """Run each job's first stage here, in order, and its second on a pool or here; results in job order.

    This thread finishes a job itself whenever the pool's ``compile_workers - 1`` threads are all busy,
    so ``compile_workers`` sessions are created at once with one thread fewer: each new thread gets a
    malloc arena of its own, and an OpenVINO session made there kept about 4 MiB more resident than one
    made here. At most ``compile_workers`` first-stage results (exported models) exist at once, so a split
    never holds every subgraph's serialized copy. After a failure nothing new starts; the error raised is
    that of the first failing job in order, whatever finished first.
    """
    width = compile_workers(len(jobs))
    if width == 1:
        return [job()() for job in jobs]
    slots = threading.BoundedSemaphore(width - 1)
    futures: list[concurrent.futures.Future[CompiledSubgraph]] = []
    failed = threading.Event()

    def release(future: concurrent.futures.Future[CompiledSubgraph]) -> None:
        if future.cancelled() or future.exception() is not None:
            failed.set()
        slots.release()

    with concurrent.futures.ThreadPoolExecutor(width - 1, thread_name_prefix="hetero-compile") as pool:
        for job in jobs:
            if failed.is_set():
                break
            try:
                finish = job()
            except BaseException as exc:
                futures.append(_settled(exc))
                break
            if slots.acquire(blocking=False):
                future = pool.submit(contextvars.copy_context().run, finish)
                future.add_done_callback(release)
                futures.append(future)
                continue
            try:
                futures.append(_settled(finish()))
            except BaseException as exc:
                futures.append(_settled(exc))
                break
    for future in futures:
        exc = future.exception()
        if exc is not None:
            raise exc
    return [future.result() for future in futures]


def _settled(outcome: CompiledSubgraph | BaseException) -> concurrent.futures.Future[CompiledSubgraph]:
    """A finished future holding ``outcome`` (a result, or the exception to raise)."""
    future: concurrent.futures.Future[CompiledSubgraph] = concurrent.futures.Future()
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
    return future
