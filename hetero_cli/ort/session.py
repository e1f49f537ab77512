"""The one place that imports onnxruntime, so a missing flavour gives one actionable message."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator

from .failures import failure_reason

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

# Sessions are created from serialized bytes, which have no folder: ORT finds the external data files of
# a model (weights kept beside the .onnx file) in the folder this session config entry names.
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"
_external_dir: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "hetero_external_dir", default=None
)


def session_options(
    *, optimize: bool = True, external_dir: str | os.PathLike[str] | None = None
) -> ort.SessionOptions:
    """Fresh SessionOptions with ORT's own log noise turned down.

    ``external_dir`` (else the one ``external_data_dir`` set for this thread) is where ORT reads the
    model's external data files.
    """
    so = ort.SessionOptions()
    so.log_severity_level = QUIET
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    folder = os.fspath(external_dir) if external_dir is not None else _external_dir.get()
    if folder:
        so.add_session_config_entry(EXTERNAL_DATA_FOLDER, folder)
    return so


@contextlib.contextmanager
def external_data_dir(folder: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within the block (this thread or task only), sessions made with session_options() read external
    data from ``folder``: how the query's probe sessions find a big model's weights."""
    token = _external_dir.set(os.fspath(folder) if folder is not None else None)
    try:
        yield
    finally:
        _external_dir.reset(token)


@functools.cache
def unloadable(ir_version: int, opset: int) -> str | None:
    """Why this ORT loads no model of this IR version and default-domain opset (None if it does): checked
    once per pair on a one-node model, so that a model ORT cannot load is refused when it is read."""
    from onnx import TensorProto, helper

    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "ir_and_opset_check",
        [value],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    proto = helper.make_model(graph, ir_version=ir_version, opset_imports=[helper.make_opsetid("", opset)])
    try:
        ort.InferenceSession(proto.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
    except Exception as exc:
        return failure_reason(exc)
    return None


def record_assignment(so: ort.SessionOptions) -> None:
    """Ask ORT to record which EP runs which node (read back with get_provider_graph_assignment_info)."""
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")


def assignment(session: ort.InferenceSession) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(ep name, [(node name, op type), ...]), ...] as ORT placed the session's nodes."""
    return [
        (sg.ep_name, [(n.name, n.op_type) for n in sg.get_nodes()])
        for sg in session.get_provider_graph_assignment_info()
    ]


__all__ = [
    "EXTERNAL_DATA_FOLDER",
    "QUIET",
    "assignment",
    "external_data_dir",
    "ort",
    "record_assignment",
    "session_options",
    "unloadable",
]
