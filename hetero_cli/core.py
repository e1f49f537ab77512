"""Core: the entry point, shaped like ``openvino.Core`` (read_model, query_model, compile_model).

core = hetero_cli.Core()
model = core.read_model("model.onnx")
compiled = core.compile_model(model, "HETERO:OPENVINO,CPU")
outputs = compiled.create_infer_request().infer({"x": x})
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from . import __version__
from . import device as device_keys
from . import properties as props
from .errors import ArtifactError, CompileError, ConfigError, HeteroError
from .graph import Model, read_model
from .placement import affinities as affinity_marks
from .placement import config as cfg
from .placement import device_memory, device_string, memory_split, qdq, query, visualize
from .placement import devices as registry
from .placement.device_string import DeviceRequest
from .placement.devices import Device
from .placement.partition import Plan, partition
from .placement.schedule import CONCURRENT, Schedule, plan_schedule
from .runtime import (
    Compiled,
    CompiledModel,
    Fallback,
    check_loadable,
    compile_with_fallback,
    runtime_versions,
)
from .runtime.artifacts import cache as compile_cache
from .runtime.artifacts import importing
from .runtime.artifacts.artifact import Unpacked

log = logging.getLogger("hetero_cli")

ModelSource = Model | str | os.PathLike[str] | bytes | onnx.ModelProto
SUPPORTED_PROPERTIES = str(props.supported_properties)
FULL_DEVICE_NAME = str(device_keys.full_name)
EXECUTION_PROVIDER = "EXECUTION_PROVIDER"
#: what get_property(HETERO, SUPPORTED_PROPERTIES) answers: its config keys and its name
HETERO_READABLE = (*cfg.HETERO_KEYS, FULL_DEVICE_NAME)
#: a device's read-only properties besides SUPPORTED_PROPERTIES (which answers cfg.known_keys, the ones set)
DEVICE_READ_ONLY = (FULL_DEVICE_NAME, EXECUTION_PROVIDER)


class Core:
    """Devices, their properties, and the read / query / compile steps.

    Holds what set_property set; every query, plan and compile of this Core starts from it, with the
    call's own ``config`` over it. Errors are hetero_cli's (errors.py), each saying what would fix it.
    """

    def __init__(self) -> None:
        self._properties = cfg.SplitConfig()
        # models read from exports: compile_model of one on its export's devices imports the export
        self._exports: weakref.WeakKeyDictionary[Model, _Export] = weakref.WeakKeyDictionary()

    @property
    def available_devices(self) -> list[str]:
        """Canonical names of the devices that can run on this machine (``["OPENVINO", "CPU"]``): the
        devices whose ONNX Runtime EP is installed and can open them."""
        return registry.available_devices()

    def read_model(self, model: ModelSource, weights: Any = None) -> Model:
        """Load an ONNX model: a file path, its serialized bytes, an onnx.ModelProto, or a Model (returned
        as it is). Returns a Model with the affinities saved in it (NodeProto.metadata_props) restored.

        An export (CompiledModel.export_model, ``hetero compile``: told by its first bytes, not its name)
        gives the model it was compiled from; compile_model of that Model on the export's device string,
        its affinities as read, imports the export instead of compiling (exported_device names it).
        ``weights`` is ignored (OpenVINO's signature; ONNX external data is found beside the model).
        Raises ModelError for a missing or unreadable file, bytes that are no ONNX model, a model that
        breaks ONNX's rules, or one whose IR version and opset this ONNX Runtime cannot load (refused
        here rather than at the first session). ArtifactError for an export that is damaged or foreign.
        """
        if isinstance(model, Model):
            return model
        if importing.is_export(model):
            return self._read_export(model)
        return read_model(model, check_loadable)

    def _read_export(self, source: Any) -> Model:
        """The source model of an export, remembered with it (read_model)."""
        read = importing.read_source(source)
        (unpacked, saved), where = importing.read_artifact(read), read.where
        model = importing.source_model(unpacked, where)
        try:
            device = str(device_string.parse(str(unpacked.header.get("device_name")), saved.priorities))
        except HeteroError as exc:
            raise ArtifactError(f"{where} is damaged: its device string is refused ({exc})") from None
        self._exports[model] = _Export(unpacked, saved, where, device, model.affinities())
        return model

    def exported_device(self, model: Model) -> str | None:
        """The device string ``model`` was compiled for, where it was read from an export (read_model);
        None for a model read from ONNX."""
        held = self._exports.get(model) if isinstance(model, Model) else None
        return held.device if held is not None else None

    def set_property(
        self, device_name: str | Mapping[str, Any], properties: Mapping[str, Any] | None = None
    ) -> None:
        """Set properties that later queries and compiles use: ``set_property("CPU", {key: value})`` for a
        device (INFERENCE_NUM_THREADS, provider options...), ``set_property("HETERO", {...})`` for HETERO's
        keys (MULTI_DEVICE_PRIORITIES, PERFORMANCE_HINT, PERF_COUNT...), ``set_property({...})`` for a
        whole config as compile_model takes it. Keys set before and not named here are kept.

        Values are checked now, not at compile time: ConfigError for an unknown key, a bad value or
        properties that are not a mapping; DeviceError for a device name that is not a string or unknown.
        """
        if properties is None:
            if not isinstance(device_name, Mapping):
                raise ConfigError("set_property takes (device_name, {key: value}) or ({key: value})")
            update = cfg.split(device_name)
        else:
            _check_mapping(properties, "set_property's properties")
            name = registry.check_name(device_name)
            if device_string.is_hetero_name(name):
                update = cfg.split(properties)
            else:
                update = cfg.split({registry.lookup(name).name: dict(properties)})
        merged = update.merged_over(self._properties)
        for device in update.devices:  # the device's keys together (a precision against its device_type)
            merged.settings(registry.lookup(device))
        self._properties = merged

    def get_available_devices(self) -> list[str]:
        """``available_devices`` under OpenVINO's name: canonical names of the devices that can run here."""
        return self.available_devices

    def get_versions(self, device_name: str) -> dict[str, Version]:
        """OpenVINO's get_versions: {device: Version} for ``device_name`` (a device, or a HETERO device
        string: HETERO itself, then each device it lists), each naming what runs it (hetero-cli, or its
        execution provider) and the release (hetero-cli's, or ONNX Runtime's with its flavour's wheel).
        DeviceError as compile_model's device string."""
        request = device_string.parse(device_name, self._properties.priorities)
        ort_release = runtime_versions()["onnxruntime"]
        versions = {d.name: Version(d.ep, ort_release) for d in request.priorities}
        if request.hetero:
            versions = {device_string.HETERO: Version("hetero-cli", __version__), **versions}
        return versions

    def get_property(self, device_name: str, name: str) -> Any:
        """Property ``name`` of ``device_name`` (a device or "HETERO"): as set_property set it, else its
        default; or a read-only one (FULL_DEVICE_NAME, SUPPORTED_PROPERTIES, EXECUTION_PROVIDER). Values
        are typed as OpenVINO's: PERF_COUNT a bool, INFERENCE_NUM_THREADS an int.

        Raises ConfigError for a property the device does not know (the message lists those it does),
        DeviceError for an unknown device.
        """
        if not isinstance(name, str):
            raise ConfigError(f"a property name is a string, such as INFERENCE_NUM_THREADS: not {name!r:.60}")
        key = name.upper()
        device_name = registry.check_name(device_name)
        if device_string.is_hetero_name(device_name):
            return _hetero_property(self._properties, name, key)
        device = registry.lookup(device_name)
        if key == FULL_DEVICE_NAME:
            return device.kind.full_name
        if key == SUPPORTED_PROPERTIES:
            return cfg.known_keys(device)
        if key == EXECUTION_PROVIDER:
            return device.ep
        values = self._properties.device_values(device)
        if key in cfg.NAMED_KEYS and key in cfg.known_keys(device):
            return cfg.named_value(key, values.get(key, cfg.NAMED_DEFAULTS[key]))
        if name in device.kind.provider_option_names:
            return values.get(name, device.provider_options.get(name))
        raise ConfigError(
            f"unknown property {name!r} for {device.name}: it knows {', '.join(cfg.known_keys(device))}"
        )

    def configured(self, device_name: str, name: str) -> Any:
        """The value set_property (or a compile config file read into it) gave ``name`` for
        ``device_name`` ("HETERO" or a device), as set; None where it was never set (get_property would
        answer the default). DeviceError for an unknown device; never ConfigError."""
        key = str(name).upper()
        device_name = registry.check_name(device_name)
        if device_string.is_hetero_name(device_name):
            return self._properties.hetero.get(key)
        values = self._properties.devices.get(registry.lookup(device_name).name, {})
        return values.get(cfg.canonical_key(str(name)))

    # --- the pipeline ----------------------------------------------------------------------------------

    def _config(self, device_name: str, config: Mapping[str, Any] | None) -> tuple[cfg.SplitConfig, Any]:
        if config is not None:
            _check_mapping(config, "the config")
        target = None
        if not device_string.is_hetero(device_name):
            request = device_string.parse(device_name)
            target = request.priorities[0].name
        merged = cfg.split(config, target=target).merged_over(self._properties)
        request = device_string.parse(device_name, merged.priorities)
        return merged, request

    def _devices(self, device_name: str, config: Mapping[str, Any] | None):
        merged, request = self._config(device_name, config)
        merged = _usable_cache(merged)  # an unusable CACHE_DIR gives OpenVINO's probes no cache either
        devices = device_string.available_priorities(request)
        if merged.pipeline_parallel and (not request.hetero or len(devices) < 2):
            available = ", ".join(d.name for d in devices)
            raise ConfigError(
                f"{cfg.DISTRIBUTION_POLICY}={cfg.PIPELINE_PARALLEL} splits a model across devices, and "
                f"{request} has one available ({available}): name two or more, e.g. HETERO:OPENVINO,CPU, or "
                f"leave {cfg.DISTRIBUTION_POLICY} unset"
            )
        return merged, request, devices

    def query_model(
        self, model: ModelSource, device_name: str, config: Mapping[str, Any] | None = None
    ) -> dict[str, str]:
        """{friendly name: device} for ``model`` (as read_model takes it) on ``device_name``
        ("HETERO:OPENVINO,CPU": each node on the first device that supports it; "CPU": what it supports
        alone). What a device supports is what its EP claims in one probe session of the model.

        Never raises for unsupported nodes: they are simply absent from the map. Raises DeviceError for
        a bad device string, DeviceUnavailableError when none of its devices can run here, ConfigError
        for a bad ``config`` or a device ONNX Runtime cannot open with it, ModelError as read_model.
        """
        model = self.read_model(model)
        merged, request, devices = self._devices(device_name, config)
        probes = _probes(merged, devices)
        if not request.hetero:
            return query.query_device(model, devices[0], probes)
        if merged.pipeline_parallel:
            return _split_by_memory(model, devices, merged, probes)
        return query.greedy(model, devices, probes)

    def plan(self, model: ModelSource, device_name: str, config: Mapping[str, Any] | None = None) -> Plan:
        """The Plan (subgraphs, devices, links) a compile_model with the same arguments would compile,
        without creating its sessions; automatic mode runs the query's probe sessions, manual affinities
        need none. For inspecting or drawing a split before paying for it.

        Raises as query_model, and: AffinityError for affinities set by hand that miss nodes or name
        devices outside the priorities (or unavailable here); UnsupportedNodesError (automatic mode) for
        nodes no listed device supports; ModelError for a node the CPU EP refuses as invalid ONNX.
        """
        model = self.read_model(model)
        merged, request, devices = self._devices(device_name, config)
        merged = _with_saved_mode(model, merged)
        return _plan(model, request, devices, _probes(merged, devices), merged)

    def schedule(
        self,
        plan: Plan,
        device_name: str,
        config: Mapping[str, Any] | None = None,
        *,
        model: ModelSource | None = None,
    ) -> Schedule:
        """Which of ``plan``'s subgraphs (Core.plan's, for ``device_name`` and ``config``) an inference
        would run at the same time, and the intra-op threads its host sessions would share the cores by
        (HETERO_CONCURRENCY; placement.schedule): plain data, nothing compiles or runs. ``model``: the
        model ``plan`` splits; with it, a plan whose subgraphs pass strings, sequences or maps is shown in
        turn, as a compile runs it (without it, that is not checked). A compile that runs an automatic
        split in one session (PERFORMANCE_HINT=LATENCY) leaves that to ONNX Runtime.

        Raises DeviceError, DeviceUnavailableError and ConfigError as compile_model, and as read_model
        for ``model``; ConfigError for a ``plan`` that is no Plan."""
        if not isinstance(plan, Plan):
            raise ConfigError(f"schedule takes a Plan (Core.plan's), not {type(plan).__name__}")
        merged, _, devices = self._devices(device_name, config)
        value_type = None if model is None else self.read_model(model).value_type
        return plan_schedule(plan, {d.name: d for d in devices}, merged, value_type)

    def compile_model(
        self, model: ModelSource, device_name: str | None = None, config: Mapping[str, Any] | None = None
    ) -> CompiledModel:
        """Split ``model`` by affinity (manual, or automatic over the priorities) and create an ONNX
        Runtime session for each part. ``device_name``: "CPU" (the default), "HETERO:OPENVINO,CPU", or
        "HETERO" with MULTI_DEVICE_PRIORITIES in ``config`` or set_property; ``config``: keys as for
        set_property, over what it set, for this compile only.

        Returns the CompiledModel. Raises as plan, and CompileError where ONNX Runtime cannot create a
        subgraph's session (the message names the subgraph, its nodes and device). With HETERO_FALLBACK
        (YES by default in automatic mode, NO in manual mode) such a subgraph moves to the next device
        of the priority list that supports its nodes instead, with a warning; the CompileError then names
        every device tried. .dot files of the
        split are written only once the compile succeeded (OPENVINO_HETERO_VISUALIZE or
        HETERO_DUMP_GRAPH_DOT). With CACHE_DIR set, a compile of the same model, device string, config
        and versions loads the export the first one kept there (LOADED_FROM_CACHE; docs/export.md).
        """
        model = self.read_model(model)
        device_name = "CPU" if device_name is None else device_name
        merged, request, devices = self._devices(device_name, config)
        merged = _with_saved_mode(model, merged)
        folder = Path(merged.cache_dir) if merged.cache_dir else None  # made by _devices
        # drawn once the compile succeeded: a failed one leaves nothing behind (hetero query draws any plan)
        dots = {"draw": visualize.wanted(merged.dump_dot), "dot_dir": merged.dot_dir}
        held = self._exports.get(model)
        if held is not None and held.device == str(request) and held.affinities == model.affinities():
            imported = merged.merged_over(held.config)
            made = importing.import_compiled(
                held.unpacked,
                held.where,
                devices,
                imported,
                str(request),
                request.hetero,
                model,
                **dots,
            )
            return CompiledModel(made)
        entry = compile_cache.key(model, str(request), merged, folder) if folder is not None else ""
        compiled = None
        if folder is not None:
            compiled = compile_cache.load(
                folder, entry, model, devices, merged, str(request), request.hetero, **dots
            )
        if compiled is None:
            compiled = _compile(model, merged, request, devices, **dots)
            if folder is not None:
                compile_cache.store(folder, entry, compiled)
        return CompiledModel(compiled)

    def import_model(
        self, model_stream: Any, device_name: str | None = None, config: Mapping[str, Any] | None = None
    ) -> CompiledModel:
        """A CompiledModel from an export (CompiledModel.export_model, ``hetero compile``): its bytes, its
        path, or a binary file open on it. Its sessions are created straight from the subgraph models it
        holds: no query, partition or export. ``device_name``: the devices to run on (default: the
        export's own device string); a subgraph whose device is not among them, or not available here,
        runs on the CPU (else the last of them), with a warning. ``config``: keys over the export's own.

        Raises ArtifactError for what is no export, is damaged, truncated or tampered with, of another
        format version or hetero-cli release, or refers to data outside itself; DeviceError,
        DeviceUnavailableError and ConfigError as compile_model; CompileError where ONNX Runtime cannot
        create a session of a subgraph.
        """
        read = importing.read_source(model_stream)
        (unpacked, saved), where = importing.read_artifact(read), read.where
        if config is not None:
            _check_mapping(config, "the config")
        merged = _usable_cache(cfg.split(config).merged_over(saved), self._properties.cache_dir)
        if device_name is None:
            device_name = str(unpacked.header.get("device_name") or "CPU")
        request = device_string.parse(device_name, merged.priorities)
        devices = device_string.available_priorities(request)
        compiled = importing.import_compiled(unpacked, where, devices, merged, str(request), request.hetero)
        return CompiledModel(compiled)


@dataclass(frozen=True)
class Version:
    """What Core.get_versions gives per device, shaped like ``openvino.Version``: ``description``, what
    runs the device, and ``build_number``, its release."""

    description: str
    build_number: str


def _hetero_property(settings: cfg.SplitConfig, name: str, key: str) -> Any:
    """HETERO's property ``key`` (asked for as ``name``) from what set_property gave (``settings``)."""
    if key == SUPPORTED_PROPERTIES:
        return list(HETERO_READABLE)
    if key == FULL_DEVICE_NAME:
        return device_string.HETERO
    if key == cfg.PRIORITIES:
        return settings.priorities or ""
    if key == cfg.DEVICE_PROPERTIES:
        return {device: cfg.shown_values(values) for device, values in settings.devices.items()}
    if key == cfg.PERFORMANCE_HINT:
        return settings.performance_mode
    if key == cfg.DISTRIBUTION_POLICY:
        return set(cfg.parse_distribution_policy(settings.hetero.get(key, "")))
    if key in (cfg.PERF_COUNT, cfg.DUMP_GRAPH_DOT):
        return cfg.parse_bool(key, settings.hetero.get(key, False))
    if key == cfg.FALLBACK:  # unset: automatic mode's default (manual mode's is False)
        return settings.fallback(manual=False)
    if key == cfg.DOT_DIR:
        return settings.dot_dir or ""
    if key == cfg.CACHE_DIR:
        return settings.cache_dir or ""
    if key == cfg.CONCURRENCY:
        return settings.concurrency
    raise ConfigError(f"unknown HETERO property {name!r}: HETERO knows {', '.join(HETERO_READABLE)}")


def _compile(
    model: Model,
    merged: cfg.SplitConfig,
    request: DeviceRequest,
    devices: Sequence[Device],
    draw: bool,
    dot_dir: str | None,
) -> Compiled:
    """compile_model's query, partition and sessions (no cache); the .dot files drawn with ``draw``, in
    ``dot_dir``."""
    probes = _probes(merged, devices)  # the query keeps its probes there; the compile may use them
    plan = _plan(model, request, devices, probes, merged)
    by_name: dict[str, Device] = {d.name: d for d in devices}
    manual = bool(model.affinities())
    if _saved_automatic(model, manual, request, devices, merged):
        # the automatic plan's affinities, saved: the query's probes let it run in one session as it did
        # (whole_plan_probe checks that the probe placed every node as the plan does)
        query.greedy(model, devices, probes)
    fallback = Fallback(
        request.hetero and len(devices) > 1 and merged.fallback(manual), manual, tuple(devices)
    )
    try:
        compiled = compile_with_fallback(
            model, plan, by_name, merged, str(request), probes, fallback, draw, dot_dir
        )
    except CompileError:
        if query.unprobed(request, devices, model):
            query.check_supported(model, devices)  # names the nodes the CPU EP lacks
        raise
    probes.clear()
    return compiled


@dataclass(frozen=True)
class _Export:
    """An export read_model read: the artifact, its config, how messages name it, its device string and
    the affinities its source model had when read."""

    unpacked: Unpacked
    config: cfg.SplitConfig
    where: str
    device: str
    affinities: dict[str, str]


def _saved_automatic(
    model: Model, manual: bool, request: DeviceRequest, devices: Sequence[Device], config: cfg.SplitConfig
) -> bool:
    """Whether a manual-mode compile holds the automatic plan's affinities as saved (affinities.
    mark_automatic) where one session may run the split (PERFORMANCE_HINT=LATENCY, two devices)."""
    return (
        manual
        and affinity_marks.marked_automatic(model)
        and request.hetero
        and len(devices) == 2
        and config.performance_mode == cfg.LATENCY
    )


def _usable_cache(config: cfg.SplitConfig, inherited: str | None = None) -> cfg.SplitConfig:
    """``config`` with a usable CACHE_DIR (its folder made where missing; ``inherited``, the Core's
    CACHE_DIR, where ``config`` sets none), or without CACHE_DIR where that folder cannot be used (a
    warning says so: compile_cache.usable): nothing is cached then, OpenVINO's own model cache included
    (cfg.SplitConfig.settings)."""
    if config.cache_dir is None and inherited is not None:
        config = cfg.SplitConfig({**config.hetero, cfg.CACHE_DIR: inherited}, config.devices)
    if config.cache_dir is None or compile_cache.usable(config.cache_dir) is not None:
        return config
    return config.without_cache()


def _probes(config: cfg.SplitConfig, devices: Sequence[Device]) -> query.Probes:
    """An empty query.Probes with, by device name, the provider options and threads its sessions get: the
    query's probes use them too, so that a query answers for the sessions a compile creates."""
    return query.Probes(
        {
            d.name: (s.provider_options, s.intra_op_num_threads or None)
            for d in devices
            for s in (config.settings(d),)
        }
    )


def _split_by_memory(
    model: Model, devices: Sequence[Device], config: cfg.SplitConfig, probes: query.Probes
) -> dict[str, str]:
    """The automatic affinities under MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL (memory_split), each
    device's memory as device_memory gives it; nodes no device supports left out."""
    memories = device_memory.device_memories(devices, config)
    return memory_split.pipeline_affinities(
        model, devices, lambda d: query.supported_nodes(model, d, probes), memories
    )


def _with_saved_mode(model: Model, config: cfg.SplitConfig) -> cfg.SplitConfig:
    """``config`` with the HETERO_CONCURRENCY ``model``'s metadata records for its placement (hetero tune's
    choice: placement.affinities.marked_concurrency) where ``config`` sets none."""
    saved = affinity_marks.marked_concurrency(model)
    if saved is None or cfg.CONCURRENCY in config.hetero:
        return config
    return config.merged_over(cfg.split({cfg.CONCURRENCY: saved}))


def _plan(
    model: Model,
    request: DeviceRequest,
    devices: Sequence[Device],
    probes: query.Probes,
    config: cfg.SplitConfig,
) -> Plan:
    """The plan a compile runs: ``model`` cut by _affinities' devices; under HETERO_CONCURRENCY=CONCURRENT
    a split's branches that meet only at a model input are subgraphs of their own, even on one device, so
    that they can run at the same time."""
    branches = request.hetero and config.concurrency == CONCURRENT
    if not request.hetero and config.concurrency == CONCURRENT:
        log.warning(
            "HETERO_CONCURRENCY=CONCURRENT cuts a HETERO split's branches apart: %s runs the model whole, in "
            "one session (give HETERO:%s to cut it)",
            request,
            request,
        )
    return partition(model, _affinities(model, request, devices, probes, config), branches=branches)


def _affinities(
    model: Model,
    request: DeviceRequest,
    devices: Sequence[Device],
    probes: query.Probes,
    config: cfg.SplitConfig,
) -> dict[str, str]:
    """Every node's device for a compile (query.resolve_affinities, or split by memory under
    PIPELINE_PARALLEL in automatic mode), QDQ groups kept whole (qdq); the query's probe sessions are made
    with ``probes``' settings and kept there."""
    resolved = query.resolve_affinities(model, request, devices, probes)
    if not request.hetero or len(devices) < 2:
        return resolved
    manual = bool(model.affinities())
    if config.pipeline_parallel and not manual:  # resolve_affinities checked that every node has a device
        resolved = _split_by_memory(model, devices, config, probes)
    by_name = {d.name: d for d in devices}

    def supports(device: str, node: str) -> bool:
        return node in query.supported_nodes(model, by_name[device], probes)

    return qdq.keep_groups_together(
        model, resolved, manual=manual, supports=None if manual else supports, priorities=list(by_name)
    )


def _check_mapping(value: Any, what: str) -> None:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'{what} must be a mapping of keys to values, e.g. {{"CPU": {{"INFERENCE_NUM_THREADS": 2}}}}, '
            f"not {type(value).__name__} {value!r:.60}"
        )
