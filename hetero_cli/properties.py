"""Property keys shaped like ``openvino.properties``: usable as config keys or called as ``key(value)``.

import hetero_cli.properties as props
core.set_property("CPU", {props.enable_profiling: True})
core.set_property("CPU", dict([props.inference_num_threads(2)]))
compiled.get_property(props.execution_devices)     # the devices that run its subgraphs

enable_profiling (PERF_COUNT, a bool, for HETERO or a device: InferRequest.get_profiling_info's counters);
inference_num_threads (INFERENCE_NUM_THREADS, an int, CPU and OPENVINO; 0: the EP's default);
available_device_mem_size (AVAILABLE_DEVICE_MEM_SIZE, bytes, any device: the memory
MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL plans with instead of the device's own);
supported_properties, execution_devices, optimal_number_of_infer_requests: read-only, for get_property.
A bad key or value is a ConfigError when it is set (Core.set_property, compile_model's config).
"""

from __future__ import annotations

import enum
from typing import Any


class Property(str):
    """A configuration key; calling it with a value gives the ``(key, value)`` pair, with none the key, with
    several (``device.priorities("GPU", "CPU")``, as OpenVINO's C++ takes them) their comma-joined list.

    >>> priorities = Property("MULTI_DEVICE_PRIORITIES")
    >>> priorities("GPU", "CPU"), priorities("GPU,CPU"), priorities()
    (('MULTI_DEVICE_PRIORITIES', 'GPU,CPU'), ('MULTI_DEVICE_PRIORITIES', 'GPU,CPU'), 'MULTI_DEVICE_PRIORITIES')
    """

    __slots__ = ()

    def __call__(self, *values: Any, value: Any = None) -> Any:
        """The key alone (no value, or None), ``(key, value)`` for one, ``(key, "a,b")`` for several."""
        values = (value,) if value is not None and not values else values
        if not values or (len(values) == 1 and values[0] is None):
            return str(self)
        if len(values) == 1:
            return (str(self), values[0])
        return (str(self), ",".join(str(v) for v in values))


class Type(enum.Enum):
    """Element types for INFERENCE_PRECISION_HINT, shaped like ``openvino.Type``; ``str(Type.f16)`` is
    "f16", the value get_property answers (strings such as "fp16" are accepted too)."""

    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"

    def __str__(self) -> str:
        return self.value


enable_profiling = Property("PERF_COUNT")
inference_num_threads = Property("INFERENCE_NUM_THREADS")
available_device_mem_size = Property("AVAILABLE_DEVICE_MEM_SIZE")
supported_properties = Property("SUPPORTED_PROPERTIES")
execution_devices = Property("EXECUTION_DEVICES")
optimal_number_of_infer_requests = Property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
