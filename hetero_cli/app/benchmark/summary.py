"""What a benchmark writes for programs: ``hetero benchmark --json``'s summary and -exec_graph_path's plan.

doc = summary(compiled, result, device="HETERO:CPU", hint="latency", read_ms=3.1, compile_ms=40.2)
json.dumps(doc)
exec_graph(compiled)      # {"model", "subgraphs": [...], "links": [...], ...}
"""

from __future__ import annotations

from typing import Any

from ...runtime import CompiledModel
from .measure import Measurement


def exec_graph(compiled: CompiledModel) -> dict[str, Any]:
    """The compiled plan as JSON-ready data, -exec_graph_path's file (benchmark_app writes OpenVINO's
    executable graph there; here the graph is the plan): Plan.to_dict() (model, inputs, outputs, where each
    output comes from, each subgraph's device, nodes and tensors), each subgraph's EP, the links (each tensor
    passed into a subgraph, from which subgraph and device to which, and whether it crosses devices), and
    whether one ONNX Runtime session runs all the subgraphs."""
    doc = compiled.plan.to_dict()
    doc["device"] = compiled.device_name
    doc["execution_devices"] = compiled.execution_devices
    doc["one_session"] = compiled.one_session
    for entry, sub in zip(doc["subgraphs"], compiled.subgraphs, strict=True):
        entry["where"], entry["ep"] = sub.where, sub.target.ep
    doc["links"] = [
        {
            "tensor": link.tensor,
            "from_subgraph": None if link.producer is None else compiled.plan.subgraphs[link.producer].name,
            "from_device": link.source_device,
            "to_subgraphs": [compiled.plan.subgraphs[k].name for k in link.consumers],
            "to_devices": list(link.target_devices),
            "crosses_devices": link.crosses_devices,
        }
        for link in compiled.plan.links()
    ]
    return doc


def compile_summary(
    compiled: CompiledModel, *, hint: str, read_ms: float, compile_ms: float
) -> dict[str, Any]:
    """``hetero benchmark -niter 0 --json``: what was compiled, and how long it took (count 0: nothing ran)."""
    return {
        "device": compiled.device_name,
        "execution_devices": compiled.execution_devices,
        "hint": hint.upper() if hint != "none" else "none",
        "subgraphs": _subgraphs(compiled),
        "count": 0,
        "read_model_ms": round(read_ms, 3),
        "compile_model_ms": round(compile_ms, 3),
    }


def _subgraphs(compiled: CompiledModel) -> list[dict[str, Any]]:
    return [{"name": s.name, "device": s.device, "nodes": len(s.nodes)} for s in compiled.subgraphs]


def summary(
    compiled: CompiledModel,
    result: Measurement,
    *,
    hint: str,
    read_ms: float,
    compile_ms: float,
) -> dict[str, Any]:
    """``hetero benchmark --json``: the run's settings and what it measured, for scripts.

    Keys: device, execution_devices, hint (PERFORMANCE_HINT, or "none"), api, nireq, batch, subgraphs
    ([{name, device, nodes}]), count, duration_ms, first_inference_ms, latency_ms ({median, average, min,
    max, percentile: {p: value}}), throughput_fps, read_model_ms, compile_model_ms.
    """
    return {
        "device": compiled.device_name,
        "execution_devices": compiled.execution_devices,
        "hint": hint.upper() if hint != "none" else "none",
        "api": result.api,
        "nireq": result.nireq,
        "batch": result.batch,
        "subgraphs": _subgraphs(compiled),
        "count": result.count,
        "duration_ms": round(result.duration_ms, 3),
        "first_inference_ms": round(result.first_inference_ms, 3),
        "latency_ms": {
            "median": round(result.latency_median_ms, 4),
            "average": round(result.latency_average_ms, 4),
            "min": round(result.latency_min_ms, 4),
            "max": round(result.latency_max_ms, 4),
            "percentile": {str(result.percentile): round(result.latency_percentile_ms, 4)},
        },
        "throughput_fps": round(result.throughput_fps, 3),
        "read_model_ms": round(read_ms, 3),
        "compile_model_ms": round(compile_ms, 3),
    }
