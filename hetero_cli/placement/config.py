"""Configuration: HETERO's own keys and per-device keys (the doc's ov::device::properties).

A config is ``{"MULTI_DEVICE_PRIORITIES": "GPU,CPU", "CPU": {"INFERENCE_NUM_THREADS": 2}, ...}``; each
device's part becomes ONNX Runtime provider options and session options for that device's subgraphs.
"""

from __future__ import annotations

import enum
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import device as device_keys
from .. import hint, properties
from ..errors import ConfigError
from ..quirks import in_force
from ..quirks import openvino as openvino_quirks
from . import devices as registry
from .device_string import HETERO as HETERO_NAME
from .device_string import is_hetero_name
from .device_string import parse as parse_device_string
from .devices import Device
from .schedule import AUTO, parse_mode

# the keys' names, spelled once: in the public property keys (properties, device, hint) where they have one
PRIORITIES = str(device_keys.priorities)
DEVICE_PROPERTIES = str(device_keys.properties)
PERF_COUNT = str(properties.enable_profiling)
DUMP_GRAPH_DOT = "HETERO_DUMP_GRAPH_DOT"
DOT_DIR = "HETERO_DOT_DIR"
FALLBACK = "HETERO_FALLBACK"
CONCURRENCY = "HETERO_CONCURRENCY"  # SEQUENTIAL, CONCURRENT or AUTO (placement.schedule)
CACHE_DIR = (
    "CACHE_DIR"  # OpenVINO's ov::cache_dir: where compiles keep exports to load later (docs/export.md)
)
NUM_THREADS = str(properties.inference_num_threads)
PRECISION = str(hint.inference_precision)
PERFORMANCE_HINT = str(hint.performance_mode)
DISTRIBUTION_POLICY = str(hint.model_distribution_policy)
DEVICE_MEMORY = str(properties.available_device_mem_size)

HETERO_KEYS = (
    PRIORITIES,
    DEVICE_PROPERTIES,
    PERF_COUNT,
    PERFORMANCE_HINT,
    DISTRIBUTION_POLICY,
    DUMP_GRAPH_DOT,
    DOT_DIR,
    FALLBACK,
    CACHE_DIR,
    CONCURRENCY,
)
# HETERO's keys that stay HETERO's when a plain device is the target: all but PERF_COUNT (a plain device's
# config takes it as its own) and DEVICE_PROPERTIES (which names devices itself); derived, so that a key
# added to HETERO_KEYS is HETERO-only unless said otherwise here
HETERO_ONLY_KEYS = tuple(k for k in HETERO_KEYS if k not in (PERF_COUNT, DEVICE_PROPERTIES))

# MODEL_DISTRIBUTION_POLICY's values HETERO takes (OpenVINO's ov::hint::ModelDistributionPolicy; HETERO
# accepts only PIPELINE_PARALLEL, as OpenVINO's does)
PIPELINE_PARALLEL = hint.ModelDistributionPolicy.PIPELINE_PARALLEL.value

# PERFORMANCE_HINT's values (OpenVINO's ov::hint::PerformanceMode). LATENCY, the default, lets one ONNX Runtime
# session run several subgraphs where it places every node as the plan does; the throughput modes keep one
# session per subgraph, the stages that requests in flight overlap on.
LATENCY = hint.PerformanceMode.LATENCY.value
PERFORMANCE_MODES = tuple(mode.value for mode in hint.PerformanceMode)

# The most threads INFERENCE_NUM_THREADS may ask for. ONNX Runtime's SessionOptions.intra_op_num_threads is a
# C int (a larger number fails inside ORT with a TypeError), and its thread pool creates every thread it is
# given: far more threads than any machine has cores only exhausts the machine.
MAX_THREADS = 4096

# Provider options that name a file or folder: ONNX Runtime takes them as given, so a number or a mapping
# would become a path (a folder named "5" or "{'a': 1}")
OPENVINO_CACHE = "openvino"  # CACHE_DIR's subfolder for OpenVINO's model cache (SplitConfig.settings)
PATH_OPTIONS = frozenset({"cache_dir", "trt_engine_cache_path"})
# Provider options that take JSON text (the OpenVINO EP's load_config: {"CPU": {"NUM_STREAMS": "1"}}): a
# mapping given for one is written as that text
JSON_OPTIONS = frozenset({"load_config"})

# Provider options that are counts, with the range each takes ({family: {key: (lowest, highest)}}): the
# OpenVINO EP fails on a number beyond a C int and quietly uses 1 for 0 or less
COUNT_OPTIONS: dict[str, dict[str, tuple[int, int]]] = {
    "OPENVINO": {"num_of_threads": (1, MAX_THREADS), "num_streams": (1, MAX_THREADS)},
}


@dataclass
class DeviceSettings:
    """What one device's configuration means for ONNX Runtime."""

    provider_options: dict[str, str] = field(default_factory=dict)
    intra_op_num_threads: int | None = None
    profiling: bool = False
    #: AVAILABLE_DEVICE_MEM_SIZE in bytes, where set (MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL reads it)
    memory: int | None = None


def parse_bool(key: str, value: Any) -> bool:
    """YES/NO, true/false, 1/0 (any case) or a bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().upper()
    if text in {"YES", "TRUE", "1", "ON"}:
        return True
    if text in {"NO", "FALSE", "0", "OFF"}:
        return False
    raise ConfigError(f"bad value {value!r} for {key}: use YES or NO")


def _whole_number(value: Any) -> int | None:
    """``value`` as an int where it is an integer (not a bool) or the text of one, else None."""
    if isinstance(value, str | numbers.Integral) and not isinstance(value, bool):
        try:
            return int(str(value).strip())
        except ValueError:
            pass
    return None


def _parse_threads(key: str, value: Any) -> int:
    n = _whole_number(value)
    if n is None or not 0 <= n <= MAX_THREADS:
        raise ConfigError(
            f"bad value {value!r:.60} for {key}: use a whole number from 0 to {MAX_THREADS} (0 = the default)"
        )
    return n


def parse_performance_mode(value: Any) -> str:
    """LATENCY, THROUGHPUT or CUMULATIVE_THROUGHPUT, from any case or a PerformanceMode member."""
    text = (value.value if isinstance(value, enum.Enum) else str(value)).strip().upper()
    if text not in PERFORMANCE_MODES:
        raise ConfigError(f"bad value {value!r} for {PERFORMANCE_HINT}: use {', '.join(PERFORMANCE_MODES)}")
    return text


def parse_distribution_policy(value: Any) -> frozenset[str]:
    """MODEL_DISTRIBUTION_POLICY's policies: "PIPELINE_PARALLEL" (any case), a set or list of it (OpenVINO's
    Python takes a set), or "" / an empty set for none; ConfigError for anything else."""
    items = [value] if isinstance(value, str | enum.Enum) else value
    if isinstance(items, list | tuple | set | frozenset):
        names = {(v.value if isinstance(v, enum.Enum) else v) for v in items}
        texts = {v.strip().upper() for v in names if isinstance(v, str)}
        if len(texts) == len(names) and texts <= {PIPELINE_PARALLEL, ""}:
            return frozenset(texts - {""})
    raise ConfigError(
        f"bad value {value!r:.60} for {DISTRIBUTION_POLICY}: HETERO takes {PIPELINE_PARALLEL} (split the "
        f'model by device memory), or "" for none'
    )


def parse_memory_size(value: Any) -> int:
    """AVAILABLE_DEVICE_MEM_SIZE: a whole number of bytes above 0 (an int or its text); ConfigError else."""
    n = _whole_number(value)
    if n is None or n <= 0:
        raise ConfigError(
            f"bad value {value!r:.60} for {DEVICE_MEMORY}: give the device's memory as a whole number of "
            f'bytes above 0, e.g. {{"OPENVINO": {{"{DEVICE_MEMORY}": 4000000000}}}}'
        )
    return n


def _parse_precision(key: str, value: Any) -> str:
    text = (value.value if isinstance(value, enum.Enum) else str(value)).strip().lower()
    aliases = {
        "f32": "f32",
        "fp32": "f32",
        "float32": "f32",
        "f16": "f16",
        "fp16": "f16",
        "float16": "f16",
        "bf16": "bf16",
        "bfloat16": "bf16",
    }
    if text not in aliases:
        raise ConfigError(f"bad value {value!r} for {key}: use f32, f16 or bf16")
    return aliases[text]


def provider_option_value(device: Device, key: str, value: Any) -> str:
    """A provider option's value as the text ONNX Runtime takes: strings as they are, numbers and true/false
    as text; anything else (a list, a mapping, None) is refused, naming the device and the key."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, np.generic):  # numpy's scalars (np.True_, np.int64(2)) as Python's
        value = value.item()
    if key in JSON_OPTIONS and isinstance(value, Mapping):
        return json.dumps(value)
    if key in PATH_OPTIONS:
        if isinstance(value, str | os.PathLike):
            return os.fspath(value) if not isinstance(value, str) else value
        raise ConfigError(
            f"bad value {value!r:.60} for {device.name}'s {key}: it is a path, give it as a string, "
            f'e.g. {{"{device.name}": {{"{key}": "path/to/it"}}}}'
        )
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool):
        text = str(value)
    elif isinstance(value, numbers.Integral):
        text = str(int(value))
    elif isinstance(value, numbers.Real) and math.isfinite(value):
        number = float(value)
        text = str(int(number)) if number.is_integer() else repr(number)
    else:
        raise ConfigError(
            f"bad value {value!r:.60} for {device.name}'s {key}: a provider option takes a string, a number "
            f"or true/false (passed to {device.ep} as text), not {type(value).__name__}"
        )
    bounds = COUNT_OPTIONS.get(device.kind.family, {}).get(key)
    if bounds is not None:
        n = None if isinstance(value, bool) else _whole_number(text)
        if n is None or not bounds[0] <= n <= bounds[1]:
            raise ConfigError(
                f"bad value {value!r:.60} for {device.name}'s {key}: use a whole number from {bounds[0]} to "
                f"{bounds[1]}"
            )
        text = str(n)
    return text


# the OpenVINO EP's device_type values: an OpenVINO device (CPU, GPU, GPU.1, NPU) or a virtual one over
# them (AUTO:GPU,CPU); the EP takes any string and, for one it does not know, claims no node at all
OPENVINO_DEVICE_TYPE = re.compile(
    r"(CPU|GPU|NPU)(\.\d+)?|(AUTO|HETERO|MULTI):[A-Z]+(\.\d+)?(,[A-Z]+(\.\d+)?)*"
)


def _check_openvino_device_type(device: Device, options: Mapping[str, Any]) -> None:
    """ConfigError for a device_type the OpenVINO EP knows no device by (it would run no node there)."""
    value = options.get("device_type", "CPU")
    if not isinstance(value, str) or not OPENVINO_DEVICE_TYPE.fullmatch(value):
        raise ConfigError(
            f"bad device_type {value!r} for {device.name}: the OpenVINO EP knows CPU, GPU, GPU.<n> and NPU "
            "(or AUTO:, HETERO: or MULTI: over them); OPENVINO.GPU and OPENVINO.NPU name those devices too"
        )


def _check_openvino_precision(device: Device, options: Mapping[str, str]) -> None:
    """ConfigError for a precision the OpenVINO EP refuses on the OpenVINO device ``options`` name."""
    precision = options.get("precision")
    target = options.get("device_type", "CPU").split(".")[0]
    # the precisions the EP takes there, where it drops itself for another ("Unsupported inference
    # precision is selected. CPU only supports FP32, ACCURACY"): quirk openvino-cpu-precision
    allowed = openvino_quirks.PRECISIONS.get(target) if in_force(openvino_quirks.CPU_PRECISION) else None
    if precision is not None and allowed is not None and precision.upper() not in allowed:
        raise ConfigError(
            f"{device.name} cannot compute in {precision}: ONNX Runtime's OpenVINO EP takes precision "
            f"{' or '.join(allowed)} on OpenVINO's {target} device; use "
            f"{PRECISION}={'f32' if 'FP32' in allowed else 'f16'}"
            + (", or OPENVINO.GPU for f16" if target == "CPU" else "")
        )


def _threads(device: Device, settings: DeviceSettings, value: Any) -> None:
    n = _parse_threads(NUM_THREADS, value)
    if device.kind.family == "OPENVINO":
        if n:
            settings.provider_options["num_of_threads"] = str(n)
        else:  # 0: the EP's own default (its num_of_threads=0 would mean one thread)
            settings.provider_options.pop("num_of_threads", None)
    settings.intra_op_num_threads = n


def _precision(device: Device, settings: DeviceSettings, value: Any) -> None:
    precision = _parse_precision(PRECISION, value)
    family = device.kind.family
    if family == "OPENVINO" and precision in ("f32", "f16"):
        settings.provider_options["precision"] = precision.upper().replace("F", "FP")
    elif family == "TENSORRT" and precision in ("f32", "f16"):
        settings.provider_options["trt_fp16_enable"] = "True" if precision == "f16" else "False"
    elif precision != "f32":
        raise ConfigError(
            f"{device.name} cannot take {PRECISION}={precision}: {device.ep} computes in the model's own "
            f"precision; use f32 here, or convert the model"
        )


def _profiling(device: Device, settings: DeviceSettings, value: Any) -> None:
    settings.profiling = parse_bool(PERF_COUNT, value)


def _memory(device: Device, settings: DeviceSettings, value: Any) -> None:
    settings.memory = parse_memory_size(value)


ALL_FAMILIES = frozenset({"CPU", "GPU", "OPENVINO", "TENSORRT"})


NAMED_KEYS: dict[str, tuple[Callable[[Device, DeviceSettings, Any], None], frozenset[str]]] = {
    PERF_COUNT: (_profiling, ALL_FAMILIES),
    NUM_THREADS: (_threads, frozenset({"CPU", "OPENVINO"})),
    PRECISION: (_precision, ALL_FAMILIES),
    DEVICE_MEMORY: (_memory, ALL_FAMILIES),
}


NAMED_DEFAULTS: dict[str, Any] = {PERF_COUNT: False, NUM_THREADS: 0, PRECISION: "f32", DEVICE_MEMORY: None}


def canonical_key(key: str) -> str:
    """A named key in its one spelling (``perf_count`` is PERF_COUNT: set twice, the later value wins);
    provider options as given (ONNX Runtime's names are case-sensitive)."""
    upper = key.upper()
    return upper if upper in NAMED_KEYS else key


def named_value(key: str, value: Any) -> Any:
    """A named key's value as get_property answers it, typed as OpenVINO's are: PERF_COUNT a bool,
    INFERENCE_NUM_THREADS an int, INFERENCE_PRECISION_HINT its short name (f32, f16, bf16)."""
    if key == PERF_COUNT:
        return parse_bool(key, value)
    if key == NUM_THREADS:
        return _parse_threads(key, value)
    if key == PRECISION:
        return _parse_precision(key, value)
    if key == DEVICE_MEMORY and value is not None:
        return parse_memory_size(value)
    return value


def shown_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """A device's values as DEVICE_PROPERTIES answers them: each named key's typed as named_value types it
    (INFERENCE_PRECISION_HINT "f32" however it was set), provider options as set."""
    return {k: named_value(k, v) if k in NAMED_KEYS else v for k, v in values.items()}


def known_keys(device: Device) -> list[str]:
    """The keys a device accepts: named keys first, then its EP's provider options."""
    named = [k for k, (_, families) in NAMED_KEYS.items() if device.kind.family in families]
    return named + sorted(device.kind.provider_option_names)


def device_settings(device: Device, config: Mapping[str, Any], *, whole: bool = True) -> DeviceSettings:
    """Validate one device's configuration and translate it; unknown keys are refused, naming known ones.
    ``whole=False`` checks each key alone (a part of a config, which keys set elsewhere complete)."""
    settings = DeviceSettings(provider_options=dict(device.provider_options))
    for raw_key, value in config.items():
        key = str(raw_key)
        named = NAMED_KEYS.get(key.upper())
        if named is not None and device.kind.family in named[1]:
            named[0](device, settings, value)
        elif key in device.kind.provider_option_names:
            settings.provider_options[key] = provider_option_value(device, key, value)
        else:
            hetero = (
                f" ({key.upper()} is HETERO's: give it at the config's top level, not under a device)"
                if key.upper() in HETERO_KEYS
                else ""
            )
            raise ConfigError(
                f"unknown config key {key!r} for {device.name}{hetero}: it knows {', '.join(known_keys(device))}"
            )
    if whole and device.kind.family == "OPENVINO":  # the precision against the device_type it ends up with
        _check_openvino_device_type(device, settings.provider_options)
        _check_openvino_precision(device, settings.provider_options)
    return settings


@dataclass
class SplitConfig:
    """A compile config taken apart: HETERO's own keys and each device's keys (canonical device names)."""

    hetero: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)

    def merged_over(self, base: SplitConfig) -> SplitConfig:
        """This config with ``base`` underneath (keys here win)."""
        out = SplitConfig(dict(base.hetero), {k: dict(v) for k, v in base.devices.items()})
        out.hetero.update(self.hetero)
        for name, values in self.devices.items():
            out.devices.setdefault(name, {}).update(values)
        return out

    @property
    def priorities(self) -> str | None:
        """MULTI_DEVICE_PRIORITIES, as a comma-separated string, if set."""
        value = self.hetero.get(PRIORITIES)
        if value is None:
            return None
        return ",".join(check_priorities(value)) if isinstance(value, list | tuple) else str(value)

    @property
    def pipeline_parallel(self) -> bool:
        """Whether MODEL_DISTRIBUTION_POLICY asks for PIPELINE_PARALLEL (a split by device memory)."""
        return PIPELINE_PARALLEL in parse_distribution_policy(self.hetero.get(DISTRIBUTION_POLICY, ""))

    @property
    def dump_dot(self) -> bool:
        """HETERO_DUMP_GRAPH_DOT (the older API's switch for .dot dumps)."""
        return parse_bool(DUMP_GRAPH_DOT, self.hetero.get(DUMP_GRAPH_DOT, False))

    @property
    def performance_mode(self) -> str:
        """PERFORMANCE_HINT, LATENCY unless set."""
        return parse_performance_mode(self.hetero.get(PERFORMANCE_HINT, LATENCY))

    def with_threads(self, devices: Iterable[str], threads: int) -> SplitConfig:
        """This config with INFERENCE_NUM_THREADS ``threads`` for each of ``devices`` that sets none: the
        share of the cores a concurrent schedule gives each host session (placement.schedule)."""
        out = self.merged_over(SplitConfig())
        for name in devices:
            values = out.devices.setdefault(name, {})
            if not values.get(NUM_THREADS):
                values[NUM_THREADS] = threads
        return out

    @property
    def concurrency(self) -> str:
        """HETERO_CONCURRENCY (placement.schedule.MODES), AUTO unless set."""
        return parse_mode(self.hetero.get(CONCURRENCY, AUTO))

    def fallback(self, manual: bool) -> bool:
        """HETERO_FALLBACK as set; unset, YES in automatic mode and NO in ``manual`` mode (affinities set by
        hand are honoured unless the user lets a failing subgraph move)."""
        value = self.hetero.get(FALLBACK)
        return not manual if value is None else parse_bool(FALLBACK, value)

    @property
    def dot_dir(self) -> str | None:
        """Where .dot files go (HETERO_DOT_DIR), None for the current directory."""
        value = self.hetero.get(DOT_DIR)
        return None if value in (None, "") else str(value)

    @property
    def cache_dir(self) -> str | None:
        """Where compiles keep their exports (CACHE_DIR), None where unset or empty (no cache)."""
        value = self.hetero.get(CACHE_DIR)
        return None if value in (None, "") else os.fspath(value)

    def settings(self, device: Device) -> DeviceSettings:
        """The device's settings, with HETERO-level PERF_COUNT applying to every device, and, with CACHE_DIR
        set, OpenVINO's own model cache (the EP's ``cache_dir``) in its OPENVINO_CACHE subfolder for an
        OPENVINO device that sets no ``cache_dir`` of its own: a later compile or import in another process
        then loads what OpenVINO compiled instead of compiling it again, and its blobs stay inside
        CACHE_DIR. Not on the CPU while quirk openvino-cpu-blob-unreadable is in force: there the EP cannot
        read a blob back, so the cache would only write (docs/limits.md); ``{"OPENVINO": {"cache_dir":
        ...}}`` still asks for it."""
        settings = device_settings(device, self.device_values(device))
        folder = self.cache_dir
        options = settings.provider_options
        unreadable = options.get("device_type") == "CPU" and in_force(openvino_quirks.CPU_BLOB_UNREADABLE)
        if folder is not None and device.kind.family == "OPENVINO" and not unreadable:
            options.setdefault("cache_dir", os.path.join(folder, OPENVINO_CACHE))
        return settings

    def without_cache(self) -> SplitConfig:
        """This config with CACHE_DIR left out (a folder that cannot be used: nothing is cached)."""
        hetero = {k: v for k, v in self.hetero.items() if k != CACHE_DIR}
        return SplitConfig(hetero, {k: dict(v) for k, v in self.devices.items()})

    def device_values(self, device: Device) -> dict[str, Any]:
        """The device's keys as set, with HETERO-level PERF_COUNT where the device has none of its own."""
        values = dict(self.devices.get(device.name, {}))
        if PERF_COUNT in self.hetero and PERF_COUNT not in values:
            values[PERF_COUNT] = self.hetero[PERF_COUNT]
        return values


def check_priorities(value: Any) -> Any:
    """MULTI_DEVICE_PRIORITIES as given, when it is a string ("OPENVINO,CPU") or a list of device names
    that a HETERO device string takes; ConfigError saying what it takes otherwise, DeviceError for a list
    HETERO would refuse (an unknown device, one listed twice, HETERO inside it). Empty: none set."""
    if isinstance(value, str) or (
        isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
    ):
        listed = value if isinstance(value, str) else ",".join(value)
        if listed.strip():
            parse_device_string(HETERO_NAME, listed)  # checked now, as compile_model would
        return value
    raise ConfigError(
        f"bad value {value!r:.60} for {PRIORITIES}: use a string of device names, highest priority first, "
        f'such as "OPENVINO,CPU", or a list of them such as ["OPENVINO", "CPU"]'
    )


def _knows(device_name: str, key: str) -> bool:
    """Whether the device takes ``key`` (a named key or a provider option of its EP)."""
    device = registry.lookup(device_name)
    named = NAMED_KEYS.get(key.upper())
    return (named is not None and device.kind.family in named[1]) or key in device.kind.provider_option_names


def _json_text(value: Any) -> Any:
    """``value`` parsed if it is JSON text of an object, else as it is."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            return json.loads(value)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"{DEVICE_PROPERTIES} is not valid JSON ({exc}): {value!r:.80}") from None
    return value


def split(config: Mapping[str, Any] | None, *, target: str | None = None) -> SplitConfig:
    """Take a compile config apart; ``target`` is the device for plain-device keys, None for HETERO."""
    out = SplitConfig()
    for raw_key, value in (config or {}).items():
        key = str(raw_key)
        upper = key.upper()
        if upper == DEVICE_PROPERTIES:
            value = _json_text(value)  # --config DEVICE_PROPERTIES='{"CPU": {...}}' gives it as JSON text
            if not isinstance(value, Mapping):
                raise ConfigError(
                    f"{DEVICE_PROPERTIES} takes {{device: {{key: value}}}} (a mapping, or its JSON text), not {value!r}"
                )
            for dev_key, dev_values in value.items():
                _add_device(out, str(dev_key), dev_values)
        elif is_hetero_name(key):
            raise ConfigError(
                "HETERO's own keys go at the top level of this config (e.g. {'PERF_COUNT': 'YES'}), not under "
                "a 'HETERO' key"
            )
        elif isinstance(value, Mapping) and upper not in HETERO_KEYS and not _target_key(target, key):
            _add_device(out, key, value, target)
        elif target is not None and (
            upper not in HETERO_ONLY_KEYS
            or _knows(target, key)  # the EP's own option of that name (OpenVINO's cache_dir)
        ):
            out.devices.setdefault(target, {})[canonical_key(key)] = value
        elif upper in HETERO_KEYS:
            # a bad value fails when set, not at compile time
            if upper == PERFORMANCE_HINT:
                parse_performance_mode(value)
            elif upper == PRIORITIES:
                check_priorities(value)
            elif upper == DISTRIBUTION_POLICY:
                parse_distribution_policy(value)
            elif upper in (PERF_COUNT, DUMP_GRAPH_DOT, FALLBACK):
                parse_bool(upper, value)
            elif upper == CONCURRENCY:
                parse_mode(value)
            elif upper in (DOT_DIR, CACHE_DIR) and not (
                value is None or isinstance(value, str | os.PathLike)
            ):
                raise ConfigError(f"bad value {value!r:.60} for {upper}: give a folder path as a string")
            out.hetero[upper] = value
        else:
            raise ConfigError(
                f"unknown HETERO config key {key!r}: HETERO knows {', '.join(HETERO_KEYS)}; a device's own "
                f'keys go under its name, e.g. {{"CPU": {{"{NUM_THREADS}": 2}}}}'
            )
    if target is not None and target in out.devices:
        # validate early, so a bad key or value fails before anything runs
        device_settings(registry.lookup(target), out.devices[target])
    return out


def _target_key(target: str | None, key: str) -> bool:
    """Whether ``key`` is one of the plain target device's own keys rather than a device name."""
    return target is not None and registry.canonical_name(key) is None and _knows(target, key)


def _add_device(out: SplitConfig, key: str, values: Any, target: str | None = None) -> None:
    name = registry.canonical_name(key)
    if name is None and target is not None:
        raise ConfigError(
            f"unknown config key {key!r} for {target}: it knows "
            f"{', '.join(known_keys(registry.lookup(target)))}; nor is it a device (a mapping under a "
            f"device's name configures that device; known devices are {registry.known_names_text()})"
        )
    if name is None:
        raise ConfigError(
            f"config names unknown device {key!r}: known devices are {registry.known_names_text()}"
        )
    if not isinstance(values, Mapping):
        raise ConfigError(f"config for {name} must be a mapping of keys to values, not {values!r}")
    device = registry.lookup(name)
    device_settings(device, values, whole=False)  # each key early: a bad key fails before anything runs
    out.devices.setdefault(name, {}).update({canonical_key(str(k)): v for k, v in values.items()})
