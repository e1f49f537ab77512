"""The one place that imports onnxruntime, so a missing flavour gives one actionable message."""

from __future__ import annotations

try:
    import onnxruntime as ort
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError(
        "hetero-cli needs ONNX Runtime, which comes in three mutually exclusive flavours: install exactly one "
        "of the extras hetero-cli[openvino] (OpenVINO + CPU execution providers), hetero-cli[cpu] (CPU only) "
        "or hetero-cli[gpu] (CUDA + TensorRT + CPU), e.g. pip install 'hetero-cli[openvino]'"
    ) from exc

# ORT's own log lines ("Removing initializer ...", errors it also raises as exceptions) are noise a user
# cannot act on; 4 = fatal only. Failures still reach hetero-cli as exceptions with ORT's message.
QUIET = 4


def session_options(*, optimize: bool = True) -> ort.SessionOptions:
    """Fresh SessionOptions with ORT's own log noise turned down."""
    so = ort.SessionOptions()
    so.log_severity_level = QUIET
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return so


def record_assignment(so: ort.SessionOptions) -> None:
    """Ask ORT to record which EP runs which node (read back with get_provider_graph_assignment_info)."""
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")


def assignment(session: ort.InferenceSession) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(ep name, [(node name, op type), ...]), ...] as ORT placed the session's nodes."""
    return [
        (sg.ep_name, [(n.name, n.op_type) for n in sg.get_nodes()])
        for sg in session.get_provider_graph_assignment_info()
    ]


__all__ = ["QUIET", "assignment", "ort", "record_assignment", "session_options"]
