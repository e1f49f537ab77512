"""README's Limits on the OpenVINO EP, reproduced in plain ONNX Runtime (no hetero-cli involved): if one of
these starts failing, the installed EP changed and README's Limits need another look."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as h
from support.helpers import make_model, needs_openvino, seeded, vi

OPENVINO = ["OpenVINOExecutionProvider", "CPUExecutionProvider"]


def run(proto, feeds, providers):
    return ort.InferenceSession(proto.SerializeToString(), providers=providers).run(None, feeds)[0]


@needs_openvino
def test_an_empty_tensor_comes_out_of_openvino_with_each_0_made_1():
    """x [B,4] -> Shape[:1] -> Concat [B,0,1] -> ConstantOfShape -> Mul: an empty [1,0,1] tensor."""
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape", start=0, end=1),
        h.make_node("Concat", ["s", "zero_one"], ["dims"], name="concat", axis=0),
        h.make_node(
            "ConstantOfShape",
            ["dims"],
            ["c"],
            name="fill",
            value=h.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
        ),
        h.make_node("Mul", ["c", "m"], ["y"], name="mul"),
    ]
    inits = [
        h.make_tensor("zero_one", TensorProto.INT64, [2], [0, 1]),
        h.make_tensor("m", TensorProto.FLOAT, [], [-1.0]),
    ]
    proto = make_model(nodes, [vi("x", ["B", 4])], [vi("y", None)], inits)
    x = np.ones((1, 4), np.float32)
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).shape == (1, 0, 1)
    assert run(proto, {"x": x}, ["OpenVINOExecutionProvider"]).shape == (1, 1, 1)


@needs_openvino
def test_openvino_keeps_a_ceil_mode_pools_last_window_the_cpu_ep_drops():
    nodes = [h.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[1], strides=[3], ceil_mode=1)]
    proto = make_model(nodes, [vi("x", [1, 1, 3])], [vi("y", None)])
    x = seeded((1, 1, 3))
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).shape == (1, 1, 1)
    assert run(proto, {"x": x}, OPENVINO).shape == (1, 1, 2)


@needs_openvino
def test_a_value_info_lie_cuts_a_batch_inside_orts_own_openvino_cpu_split():
    shape = [h.make_tensor("s", TensorProto.INT64, [2], [-1, 3])]
    nodes = [
        h.make_node("Reshape", ["x", "s"], ["b"], name="reshape"),
        h.make_node("Relu", ["b"], ["r"], name="relu"),
        h.make_node("Hardmax", ["r"], ["hm"], name="hardmax", axis=1),  # the OpenVINO EP leaves it to CPU
        h.make_node("Mul", ["hm", "r"], ["m"], name="mul"),
        h.make_node("Sigmoid", ["m"], ["y"], name="sig"),
    ]
    lies = [vi(t, [2, 3]) for t in ("b", "r", "hm", "m")]
    proto = make_model(nodes, [vi("x", ["N", 6])], [vi("y", None)], shape, value_info=lies)
    x = seeded((2, 6))  # a batch of 4 rows of 3
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).shape == (4, 3)
    assert run(proto, {"x": x}, OPENVINO).shape == (2, 3)
