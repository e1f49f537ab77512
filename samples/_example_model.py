"""Shared by the samples: a tiny model built in memory, seeded inputs, and the check against plain ORT.

The tiny model holds a Hardmax, an op the OpenVINO execution provider refuses, so automatic
``HETERO:OPENVINO,CPU`` really splits it: OPENVINO -> CPU (Hardmax) -> OPENVINO.
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper
from onnx import helper as h

import hetero_cli


def build_model() -> onnx.ModelProto:
    """x[2,4] -> MatMul -> Add -> Relu -> Hardmax (not on OpenVINO) -> Mul(relu, onehot) -> Sigmoid -> y."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "w")
    b = numpy_helper.from_array(np.full((4,), 0.1, np.float32), "b")
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
        h.make_node("Add", ["mm", "b"], ["biased"], name="add_bias"),
        h.make_node("Relu", ["biased"], ["relu_out"], name="relu"),
        h.make_node("Hardmax", ["relu_out"], ["onehot"], name="hardmax", axis=-1),
        h.make_node("Mul", ["relu_out", "onehot"], ["picked"], name="pick"),
        h.make_node("Sigmoid", ["picked"], ["y"], name="sigmoid"),
    ]
    graph = h.make_graph(
        nodes,
        "tiny_example",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [w, b],
    )
    # ir_version set explicitly: make_model's default can be newer than ONNX Runtime accepts.
    return h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])


def model_source(argv: list[str]) -> str | onnx.ModelProto:
    """The model path given on the command line, else the tiny in-memory model."""
    return argv[1] if len(argv) > 1 else build_model()


def random_inputs(model: hetero_cli.Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random values in [0, 1) for every model input (image-like; unknown dimensions taken as 1)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for info in model.inputs:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in (info.shape or ())]
        dtype = info.dtype or np.dtype(np.float32)
        if dtype == np.bool_:
            feeds[info.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[info.name] = rng.integers(0, 4, shape).astype(dtype)
        else:
            feeds[info.name] = rng.random(shape).astype(dtype)
    return feeds


def print_subgraphs(compiled: hetero_cli.CompiledModel) -> None:
    """One line per subgraph: device, nodes, inputs and outputs."""
    print(f"{compiled.device_name}: {len(compiled.subgraphs)} subgraph(s)")
    for s in compiled.subgraphs:
        print(f"  {s.description}")
        print(f"    nodes {list(s.nodes)}, inputs {list(s.inputs)}, outputs {list(s.outputs)}")


def check(model: hetero_cli.Model, feeds: dict[str, np.ndarray], results: dict[str, np.ndarray]) -> None:
    """Compare with one plain onnxruntime CPU session over the whole model; exit 1 on a mismatch."""
    session = ort.InferenceSession(model.proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))
    for name, want in expected.items():
        got = results[name]
        same = (
            np.allclose(got, want, rtol=1e-3, atol=1e-5, equal_nan=True)
            if np.issubdtype(want.dtype, np.floating)
            else np.array_equal(got, want)
        )
        if got.shape != want.shape or not same:
            diff = np.abs(got.astype(np.float64) - want) if got.shape == want.shape else "n/a"
            print(
                f"MISMATCH in output {name!r}: shapes {got.shape} / {want.shape}, max |diff| {np.max(diff)}"
            )
            sys.exit(1)
    print(f"  outputs {', '.join(expected)} match one onnxruntime session")
