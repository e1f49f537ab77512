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
    from . import device, hint, properties
    from .app.tune import TuneReport, tune_model
    from .app.tune.chart import write_chart
    from .app.validate import Tolerances, ValidationReport, validate_model
    from .core import Core
    from .errors import (
        AffinityError,
        ArtifactError,
        BenchmarkError,
        CompileError,
        ConfigError,
        DeviceError,
        DeviceUnavailableError,
        ExportError,
        HeteroError,
        ImageError,
        InferenceError,
        ModelError,
        NotClassScoresError,
        RequestError,
        ServeError,
        TuneBudgetError,
        TuneError,
        UnsupportedNodesError,
        ValidationError,
    )
    from .graph import Model, Node, TensorInfo
    from .placement.partition import Plan
    from .properties import Type
    from .runtime import AsyncInferQueue, CompiledModel, InferRequest

#: the exception classes: every one a public function raises (errors.py)
_ERRORS = (
    "AffinityError",
    "ArtifactError",
    "BenchmarkError",
    "CompileError",
    "ConfigError",
    "DeviceError",
    "DeviceUnavailableError",
    "ExportError",
    "HeteroError",
    "ImageError",
    "InferenceError",
    "ModelError",
    "NotClassScoresError",
    "RequestError",
    "ServeError",
    "TuneBudgetError",
    "TuneError",
    "UnsupportedNodesError",
    "ValidationError",
)
#: the property-key modules (OpenVINO's ``openvino.properties``, ``.hint``, ``.device``): imported as modules
_MODULES = ("device", "hint", "properties")
#: where each public name lives: imported the first time it is asked for (PEP 562), so that importing the
#: package (the console scripts do, before they can take Ctrl-C: entry.py) loads neither ONNX Runtime
#: nor numpy. Only these names: no attribute imports any other module.
_HOMES = {
    **dict.fromkeys(("TuneReport", "tune_model"), ".app.tune"),
    "write_chart": ".app.tune.chart",
    **dict.fromkeys(("Tolerances", "ValidationReport", "validate_model"), ".app.validate"),
    "Core": ".core",
    **dict.fromkeys(_ERRORS, ".errors"),
    **dict.fromkeys(("Model", "Node", "TensorInfo"), ".graph"),
    "Plan": ".placement.partition",
    "Type": ".properties",
    **dict.fromkeys(("AsyncInferQueue", "CompiledModel", "InferRequest"), ".runtime"),
}


def __getattr__(name: str) -> Any:
    """A public name (``__all__``), imported from its module the first time it is asked for."""
    if name in _MODULES:
        value = importlib.import_module(f".{name}", __name__)
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__version__ = "0.1.0"

__all__ = [
    "AffinityError",
    "ArtifactError",
    "AsyncInferQueue",
    "BenchmarkError",
    "CompileError",
    "CompiledModel",
    "ConfigError",
    "Core",
    "DeviceError",
    "DeviceUnavailableError",
    "ExportError",
    "HeteroError",
    "ImageError",
    "InferRequest",
    "InferenceError",
    "Model",
    "ModelError",
    "Node",
    "NotClassScoresError",
    "Plan",
    "RequestError",
    "ServeError",
    "TensorInfo",
    "Tolerances",
    "TuneBudgetError",
    "TuneError",
    "TuneReport",
    "Type",
    "UnsupportedNodesError",
    "ValidationError",
    "ValidationReport",
    "device",
    "hint",
    "properties",
    "tune_model",
    "validate_model",
    "write_chart",
]
