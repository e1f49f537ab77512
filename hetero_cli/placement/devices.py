"""Device registry: maps hetero-cli device names to ONNX Runtime execution providers.

Supporting another execution provider is one more ``DeviceKind`` in ``KINDS``.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import DeviceError
from ..ort.session import CHECK, ORT_ERRORS, create_session, ort, session_options
from ..quirks import folds_initializers

log = logging.getLogger("hetero_cli")
T = TypeVar("T")


@dataclass(frozen=True)
class Device:
    """One concrete device: canonical name, execution provider and the provider options it implies."""

    name: str
    kind: DeviceKind
    provider_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def ep(self) -> str:
        """ONNX Runtime execution provider name, e.g. ``CUDAExecutionProvider``."""
        return self.kind.ep

    def providers(self, options: Mapping[str, str] | None = None) -> list[Any]:
        """ORT's provider list for a session on this device: its EP first (with ``options``, default its
        own), then the CPU EP, which ORT adds anyway for what the EP leaves."""
        chosen = dict(self.provider_options if options is None else options)
        providers: list[Any] = [(self.ep, chosen)]
        if not self.is_cpu:
            providers.append("CPUExecutionProvider")
        return providers

    @property
    def is_cpu(self) -> bool:
        """True for the plain CPU execution provider (host memory, per-node kernels)."""
        return self.kind.ep == "CPUExecutionProvider"


@dataclass(frozen=True)
class DeviceKind:
    """A family of device names served by one execution provider."""

    family: str
    ep: str
    extra: str
    pattern: re.Pattern[str]
    spelled: tuple[str, ...]
    make: Callable[[re.Match[str]], tuple[str, dict[str, str]]]
    hardware: Callable[[Device], bool]
    provider_option_names: frozenset[str] = frozenset()
    full_name: str = ""
    # the query probes the whole model as a compile runs it (ORT's graph optimizations on), so that probe
    # is the session a compile would create: kept for a plan of one subgraph, or for a LATENCY split that
    # ORT placed as the plan does (runtime.one_session.whole_plan_probe)
    optimized_probe: bool = False
    # its EP builds initializers into what it compiles and ignores a value fed for an overridable one
    # (OpenVINO; TensorRT builds them into its engine): such initializers are handed to it as inputs
    folds_initializers: bool = False

    def parse(self, name: str) -> Device | None:
        """The device this kind makes of ``name`` (already upper-case), or None if it is not one of its names."""
        m = self.pattern.fullmatch(name)
        if not m:
            return None
        canonical, options = self.make(m)
        return Device(canonical, self, options)


def _always(_: Device) -> bool:
    return True


def _definite(failed: T) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A device probe (by hashable arguments) whose every answer is kept for the process, but where ORT
    could not be asked (one of ORT_ERRORS: a device busy or out of memory): then ``failed`` is answered
    this time, the reason logged, and the probe runs again next time, so one transient failure never
    hides a device for the whole process."""

    def wrap(probe: Callable[..., T]) -> Callable[..., T]:
        answers: dict[tuple[Any, ...], T] = {}

        @functools.wraps(probe)
        def checked(*args: Any) -> T:
            if args in answers:
                return answers[args]
            try:
                answer = answers[args] = probe(*args)
            except ORT_ERRORS as exc:
                log.debug("%s%s could not be asked (asked again next time): %s", probe.__name__, args, exc)
                return failed
            return answer

        return checked

    return wrap


@_definite(False)
def _session_runs_on(ep: str, options_items: tuple[tuple[str, str], ...]) -> bool:
    """Whether a one-node session with this EP really places its node there (the hardware answers).
    Raises ORT_ERRORS where ORT refused the session (an EP whose libraries or device cannot be loaded)."""
    import onnx.helper as h
    from onnx import TensorProto

    graph = h.make_graph(
        [h.make_node("Relu", ["x"], ["y"], name="probe")],
        "availability",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])
    # no fallback: ORT would print the EP's failure to stdout and quietly retry on the CPU EP (a
    # TensorRT EP without its libraries)
    sess = create_session(
        model.SerializeToString(),
        session_options(),
        [(ep, dict(options_items))],
        purpose=CHECK,
        subject=ep,
    )
    return ep in sess.get_providers()


def _ep_session_works(device: Device) -> bool:
    return _session_runs_on(device.ep, tuple(sorted(device.provider_options.items())))


@_definite(())
def _openvino_device_ids() -> tuple[str, ...]:
    """The devices the OpenVINO EP sees (() in an ORT build without it). Raises ORT_ERRORS where
    OpenVINO could not be asked."""
    listing = getattr(ort.capi._pybind_state, "get_available_openvino_device_ids", None)
    return () if listing is None else tuple(listing())


def _openvino_hardware(device: Device) -> bool:
    wanted = device.provider_options["device_type"]
    if wanted == "CPU":
        # OpenVINO's CPU plugin ships in every OpenVINO EP build; asking the runtime would load its GPU
        # and NPU plugins as well (about 4 MiB resident) only to hear so
        return True
    return any(d == wanted or d.split(".")[0] == wanted for d in _openvino_device_ids())


def _indexed(family: str, key: str) -> Callable[[re.Match[str]], tuple[str, dict[str, str]]]:
    def make(m: re.Match[str]) -> tuple[str, dict[str, str]]:
        index = int(m.group(1) or 0)
        return (family if index == 0 else f"{family}.{index}"), {key: str(index)}

    return make


def _openvino(m: re.Match[str]) -> tuple[str, dict[str, str]]:
    target = m.group(1) or "CPU"
    return ("OPENVINO" if target == "CPU" else f"OPENVINO.{target}"), {"device_type": target}


KINDS: tuple[DeviceKind, ...] = (
    DeviceKind(
        family="CPU",
        ep="CPUExecutionProvider",
        extra="cpu",
        pattern=re.compile(r"CPU"),
        spelled=("CPU",),
        make=lambda m: ("CPU", {}),
        hardware=_always,
        full_name="ONNX Runtime CPU execution provider",
    ),
    DeviceKind(
        family="GPU",
        ep="CUDAExecutionProvider",
        extra="gpu",
        pattern=re.compile(r"GPU(?:\.(\d+))?"),
        spelled=("GPU", "GPU.<n>"),
        make=_indexed("GPU", "device_id"),
        hardware=_ep_session_works,
        optimized_probe=True,
        provider_option_names=frozenset(
            {
                "device_id",
                "gpu_mem_limit",
                "arena_extend_strategy",
                "cudnn_conv_algo_search",
                "do_copy_in_default_stream",
                "cudnn_conv_use_max_workspace",
                "cudnn_conv1d_pad_to_nc1d",
                "enable_cuda_graph",
                "enable_skip_layer_norm_strict_mode",
                "prefer_nhwc",
                "use_tf32",
                "tunable_op_enable",
                "tunable_op_tuning_enable",
            }
        ),
        full_name="NVIDIA GPU through ONNX Runtime's CUDA execution provider",
    ),
    DeviceKind(
        family="OPENVINO",
        ep="OpenVINOExecutionProvider",
        extra="openvino",
        pattern=re.compile(r"OPENVINO(?:\.(CPU|GPU(?:\.\d+)?|NPU))?"),
        spelled=("OPENVINO", "OPENVINO.CPU", "OPENVINO.GPU", "OPENVINO.NPU"),
        make=_openvino,
        hardware=_openvino_hardware,
        optimized_probe=True,
        folds_initializers=folds_initializers("OpenVINOExecutionProvider"),
        provider_option_names=frozenset(
            {
                "device_type",
                "precision",
                "num_of_threads",
                "cache_dir",
                "num_streams",
                "load_config",
                "enable_opencl_throttling",
                "enable_qdq_optimizer",
                "disable_dynamic_shapes",
                "model_priority",
                "reshape_input",
                "layout",
                "device_luid",
            }
        ),
        full_name="Intel device through ONNX Runtime's OpenVINO execution provider",
    ),
    DeviceKind(
        family="TENSORRT",
        ep="TensorrtExecutionProvider",
        extra="gpu",
        pattern=re.compile(r"TENSORRT(?:\.(\d+))?"),
        spelled=("TENSORRT", "TENSORRT.<n>"),
        make=_indexed("TENSORRT", "device_id"),
        hardware=_ep_session_works,
        folds_initializers=folds_initializers("TensorrtExecutionProvider"),
        provider_option_names=frozenset(
            {
                "device_id",
                "trt_max_workspace_size",
                "trt_fp16_enable",
                "trt_int8_enable",
                "trt_engine_cache_enable",
                "trt_engine_cache_path",
                "trt_timing_cache_enable",
                "trt_builder_optimization_level",
                "trt_min_subgraph_size",
                "trt_max_partition_iterations",
                "trt_dump_subgraphs",
                "trt_detailed_build_log",
                "trt_cuda_graph_enable",
            }
        ),
        full_name="NVIDIA GPU through ONNX Runtime's TensorRT execution provider",
    ),
)


def known_names() -> list[str]:
    """Every device name spelling the registry accepts, for error messages."""
    return [s for kind in KINDS for s in kind.spelled]


def known_names_text() -> str:
    """Known device names as one line, for messages."""
    return ", ".join(known_names())


def check_name(name: object) -> str:
    """``name`` stripped, when it is a string; DeviceError saying what a device name is otherwise."""
    if not isinstance(name, str):
        raise DeviceError(
            f'a device name must be a string such as "CPU", "OPENVINO" or "HETERO", not '
            f"{type(name).__name__} {name!r:.60}; known devices are {known_names_text()}"
        )
    return name.strip()


def shown(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, once: as given up to ``limit`` characters, else its first ``limit``
    and "..." with its length (a 10,000-character device string is not echoed whole).

    >>> shown("CPU"), shown("X" * 100, 4)
    ("'CPU'", "'XXXX...' (100 characters)")
    """
    return repr(text) if len(text) <= limit else f"{text[:limit] + '...'!r} ({len(text)} characters)"


def lookup(name: str) -> Device:
    """The device a (case-insensitive) name stands for; DeviceError naming the known names if none."""
    key = check_name(name).upper()
    for kind in KINDS:
        device = kind.parse(key)
        if device is not None:
            return device
    raise DeviceError(f"unknown device {shown(name.strip())}: known devices are {known_names_text()}")


def canonical_name(name: object) -> str | None:
    """The canonical name of the device ``name`` stands for (lookup's), None where it names no known device
    (or is no string): the one check that a name given for a device is valid, each caller wording its own
    error."""
    try:
        return lookup(name).name  # type: ignore[arg-type]
    except ValueError:  # DeviceError, or a device index too long to be a number
        return None


def unavailable_reason(device: Device) -> str | None:
    """Why ``device`` cannot run here and what would make it available, or None when it can."""
    providers = ort.get_available_providers()
    if device.ep not in providers:
        return (
            f"this onnxruntime has no {device.ep} (it has {', '.join(providers)}); "
            f"install the {device.kind.extra} flavour in place of the current one (`make FLAVOUR="
            f"{device.kind.extra} install` in hetero-cli's source tree, i.e. pip install -e '.[{device.kind.extra}]')"
        )
    if not device.kind.hardware(device):
        return (
            f"{device.ep} is installed but the hardware for {device.name} did not answer "
            f"(is the device present and its driver installed?)"
        )
    return None


def is_available(device: Device) -> bool:
    """True when the device's EP is installed and its hardware answers."""
    return unavailable_reason(device) is None


def candidate_devices() -> list[Device]:
    """One representative device per registered spelling that has a concrete name (no ``<n>``)."""
    out = []
    for kind in KINDS:
        for spelled in kind.spelled:
            if "<" not in spelled:
                device = lookup(spelled)
                if device not in out:
                    out.append(device)
    return out


def available_devices() -> list[str]:
    """Canonical names of the devices that can run on this machine, registry order."""
    names = [d.name for d in candidate_devices() if is_available(d)]
    names += _extra_indexed_available(names)
    return names


def _extra_indexed_available(already: list[str]) -> list[str]:
    """OpenVINO GPU.<n> devices reported by the OpenVINO runtime beyond the first."""
    extra = []
    if "OpenVINOExecutionProvider" in ort.get_available_providers():
        for dev in _openvino_device_ids():
            if dev.startswith("GPU."):
                name = lookup(f"OPENVINO.{dev}").name
                if name not in already and name not in extra:
                    extra.append(name)
    return extra


def unavailable_known_devices() -> list[tuple[str, str]]:
    """[(name, what would make it available)] for the registry's devices that cannot run here."""
    out = []
    for device in candidate_devices():
        reason = unavailable_reason(device)
        if reason is not None:
            out.append((device.name, reason))
    return out
