"""hetero-cli: OpenVINO-HETERO-style heterogeneous execution of ONNX models on ONNX Runtime.

import hetero_cli as hc
core = hc.Core()
model = core.read_model("model.onnx")
compiled = core.compile_model(model, "HETERO:OPENVINO,CPU")
outputs = compiled.create_infer_request().infer({"x": x})

# a session per subgraph: the pipeline stages that requests in flight overlap on across devices
staged = core.compile_model(model, "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
queue = hc.AsyncInferQueue(staged, jobs=4)
queue.set_callback(lambda request, userdata: print(userdata, request.results))
queue.start_async({"x": x}, userdata=0)
queue.wait_all()
"""

from __future__ import annotations

from .app.tune import TuneReport, tune_model
from .app.validate import validate_model
from .core import Core
from .errors import (
    AffinityError,
    ArtifactError,
    CompileError,
    ConfigError,
    DeviceError,
    DeviceUnavailableError,
    HeteroError,
    InferenceError,
    ModelError,
    UnsupportedNodesError,
)
from .graph import Model, Node, TensorInfo
from .placement.partition import Link, Plan, Subgraph
from .properties import Type
from .runtime import AsyncInferQueue, CompiledModel, CompiledSubgraph, InferRequest, Pipeline

__version__ = "0.1.0"

__all__ = [
    "AffinityError",
    "ArtifactError",
    "AsyncInferQueue",
    "CompileError",
    "CompiledModel",
    "CompiledSubgraph",
    "ConfigError",
    "Core",
    "DeviceError",
    "DeviceUnavailableError",
    "HeteroError",
    "InferRequest",
    "InferenceError",
    "Link",
    "Model",
    "ModelError",
    "Node",
    "Pipeline",
    "Plan",
    "Subgraph",
    "TensorInfo",
    "TuneReport",
    "Type",
    "UnsupportedNodesError",
    "tune_model",
    "validate_model",
]
