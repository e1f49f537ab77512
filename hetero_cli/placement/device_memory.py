"""Each device's memory for MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL: set (AVAILABLE_DEVICE_MEM_SIZE),
read from the device, or unlimited (None).

OpenVINO reads a GPU's total memory (GPU_DEVICE_TOTAL_MEM_SIZE, not its free memory) and takes the CPU as
unlimited. Here: the CPU and the OpenVINO EP on OpenVINO's CPU device share the host's memory, unlimited;
a CUDA device (GPU, TENSORRT) is read through NVIDIA's management library (the ``pynvml`` module of the
nvidia-ml-py package, where installed; ONNX Runtime's device list, ``get_ep_devices``, names no memory
size in the releases hetero-cli supports); any other device, or a CUDA one without that library, must be
given AVAILABLE_DEVICE_MEM_SIZE.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence

from ..errors import ConfigError
from . import config as cfg
from .devices import Device

log = logging.getLogger("hetero_cli")

#: device families whose memory is read through NVIDIA's management library (their device_id is the index)
CUDA_FAMILIES = frozenset({"GPU", "TENSORRT"})


def device_memories(devices: Sequence[Device], config: cfg.SplitConfig) -> list[int | None]:
    """The memory in bytes of each of ``devices`` (None: unlimited) for a split by memory: the
    device's AVAILABLE_DEVICE_MEM_SIZE in ``config`` where set, else what device_memory reads.

    Raises ConfigError for a device whose memory cannot be read, saying how to set it."""
    return [config.settings(d).memory or device_memory(d) for d in devices]


def device_memory(device: Device) -> int | None:
    """``device``'s total memory in bytes, None where it shares the host's memory (unlimited, as OpenVINO
    takes the CPU). Raises ConfigError where it cannot be read, naming AVAILABLE_DEVICE_MEM_SIZE."""
    if device.is_cpu or (
        device.kind.family == "OPENVINO" and device.provider_options.get("device_type", "CPU") == "CPU"
    ):
        return None
    if device.kind.family in CUDA_FAMILIES:
        return _nvml_total(device)
    raise _unreadable(device, "ONNX Runtime does not report its memory")


def _nvml_total(device: Device) -> int:
    """The total memory of the CUDA device ``device`` names (its device_id), read through pynvml."""
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        raise _unreadable(
            device,
            "ONNX Runtime does not report its memory, and NVIDIA's management library is not installed "
            "(pip install nvidia-ml-py reads it)",
        ) from None
    index = int(device.provider_options.get("device_id", "0"))
    try:
        nvml.nvmlInit()
        try:
            total = int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(index)).total)
        finally:
            nvml.nvmlShutdown()
    except Exception as exc:  # pynvml raises its own NVMLError kinds, and OSError without a driver
        log.debug("nvml could not read %s's memory: %r", device.name, exc)
        raise _unreadable(device, f"NVIDIA's management library could not read it ({exc})") from None
    if total <= 0:
        raise _unreadable(device, f"NVIDIA's management library reported {total} bytes")
    return total


def _unreadable(device: Device, why: str) -> ConfigError:
    return ConfigError(
        f"{cfg.DISTRIBUTION_POLICY}={cfg.PIPELINE_PARALLEL} needs {device.name}'s memory and cannot read it: "
        f'{why}; set it in bytes, e.g. {{"{device.name}": {{"{cfg.DEVICE_MEMORY}": 8000000000}}}}'
    )
