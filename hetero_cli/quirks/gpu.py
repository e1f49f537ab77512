"""The known defects of ONNX Runtime's NVIDIA execution providers (CUDA, TensorRT), one Quirk each."""

from __future__ import annotations

from .record import unfixed

TENSORRT_FOLDS_OVERRIDABLE_INITIALIZERS = unfixed(
    id="tensorrt-folds-overridable-initializers",
    ep="TensorrtExecutionProvider",
    versions_seen="not seen: assumed (TensorRT builds initializers into its engine), never checked",
    summary=(
        "As the OpenVINO EP does, the TensorRT EP is assumed to build overridable initializers into its "
        "engine and ignore a value fed for one. No plain-ORT repro: no TensorRT where the tests run"
    ),
    repro="",
    hook=(
        "placement.devices (DeviceKind.folds_initializers) and placement.export.fed_initializers: such "
        "initializers become inputs of the subgraph's session"
    ),
)

CUDA_PLUGIN_WARNING = unfixed(
    id="cuda-plugin-ep-warning",
    ep="CUDAExecutionProvider",
    versions_seen="onnxruntime-gpu 1.31.1 (one H100)",
    summary=(
        "ORT's Python binding warns \"No registered plugin EP device found for 'CUDAExecutionProvider'\" on "
        "stderr for every CUDA session it creates. No repro here: the tests' ORT is another flavour"
    ),
    repro="",
    hook=(
        "none specific: the command line silences ORT's logger (runtime.environment.set_log_level); the "
        "library leaves it to the caller"
    ),
)

QUIRKS = (TENSORRT_FOLDS_OVERRIDABLE_INITIALIZERS, CUDA_PLUGIN_WARNING)
