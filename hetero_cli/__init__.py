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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: where each public name lives: imported the first time it is asked for (PEP 562), so that importing the
#: package (the console scripts do, before they can take Ctrl-C: entry.py) loads neither ONNX Runtime
#: nor numpy
_HOMES = {
    **dict.fromkeys(("TuneReport", "tune_model"), ".app.tune"),
    "validate_model": ".app.validate",
    "Core": ".core",
    **dict.fromkeys(
        (
            "AffinityError",
            "ArtifactError",
            "CompileError",
            "ConfigError",
            "DeviceError",
            "DeviceUnavailableError",
            "HeteroError",
            "InferenceError",
            "ModelError",
            "UnsupportedNodesError",
        ),
        ".errors",
    ),
    **dict.fromkeys(("Model", "Node", "TensorInfo"), ".graph"),
    **dict.fromkeys(("Link", "Plan", "Subgraph"), ".placement.partition"),
    "Type": ".properties",
    **dict.fromkeys(
        ("AsyncInferQueue", "CompiledModel", "CompiledSubgraph", "InferRequest", "Pipeline"), ".runtime"
    ),
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time; a subpackage (``hetero_cli.cli``) likewise."""
    home = _HOMES.get(name)
    if home is None:
        try:
            if not name.startswith("_"):
                return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the subpackage is there, and something it imports is missing: say what
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
