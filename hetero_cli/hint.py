"""Hint property keys shaped like ``openvino.hint``.

import hetero_cli.hint as hints
core.set_property("CPU", {hints.inference_precision: hetero_cli.Type.f32})
core.set_property("HETERO", {hints.performance_mode: hints.PerformanceMode.THROUGHPUT})

inference_precision (INFERENCE_PRECISION_HINT, a device's: a Type or "f32", "f16", "bf16"; OPENVINO and
TENSORRT take f16, other EPs compute in the model's own precision and take f32 only);
performance_mode (PERFORMANCE_HINT, HETERO's: a PerformanceMode or its name); model_distribution_policy
(MODEL_DISTRIBUTION_POLICY, HETERO's: ``{ModelDistributionPolicy.PIPELINE_PARALLEL}`` or its name splits
the model by device memory, docs/api.md). Any other value is a ConfigError when it is set.
"""

from __future__ import annotations

import enum

from .properties import Property

inference_precision = Property("INFERENCE_PRECISION_HINT")
performance_mode = Property("PERFORMANCE_HINT")
model_distribution_policy = Property("MODEL_DISTRIBUTION_POLICY")


class PerformanceMode(enum.Enum):
    """PERFORMANCE_HINT's values, shaped like ``openvino.hint.PerformanceMode``.

    LATENCY (the default) may run several subgraphs in one ONNX Runtime session (CompiledModel.one_session);
    THROUGHPUT and CUMULATIVE_THROUGHPUT keep one session per subgraph, the pipeline stages that requests
    in flight overlap on.
    """

    LATENCY = "LATENCY"
    THROUGHPUT = "THROUGHPUT"
    CUMULATIVE_THROUGHPUT = "CUMULATIVE_THROUGHPUT"

    def __str__(self) -> str:
        return self.value


class ModelDistributionPolicy(enum.Enum):
    """MODEL_DISTRIBUTION_POLICY's values, shaped like ``openvino.hint.ModelDistributionPolicy``; HETERO
    takes PIPELINE_PARALLEL only (as OpenVINO's does): each device gets a part of the model by its memory."""

    PIPELINE_PARALLEL = "PIPELINE_PARALLEL"

    def __str__(self) -> str:
        return self.value
