"""onnx's shape inference in a TypeTable: run once where the types it gives with the model's declarations
are those it gives without them (a compile needs both: the boundaries' types, and the static shape values'
truth), and twice where a declared shape reaches another tensor's inference."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from onnx import numpy_helper
from support.helpers import make_model, vi

import hetero_cli as hc
from hetero_cli.graph.types import type_shape


@pytest.fixture
def inferences(monkeypatch):
    """A list that grows by one at each call of onnx's shape inference."""
    calls: list[None] = []
    real = onnx.shape_inference.infer_shapes

    def counted(*args, **kwargs):
        calls.append(None)
        return real(*args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counted)
    return calls


def chain(output_read: bool) -> onnx.ModelProto:
    """x [n,3] -> Relu -> y -> Neg -> t -> Abs -> w, outputs declared [2,3]; y an output too where
    ``output_read`` (so its declared shape reaches t's inference), else only w."""
    nodes = [
        h.make_node("Relu", ["x"], ["y"], name="relu"),
        h.make_node("Neg", ["y"], ["t"], name="neg"),
        h.make_node("Abs", ["t"], ["w"], name="abs"),
    ]
    outputs = [vi("y", [2, 3])] * output_read + [vi("w", [2, 3])]
    return make_model(nodes, [vi("x", ["n", 3])], outputs)


def test_one_inference_serves_both_tables_where_no_output_is_read(inferences):
    model = hc.Core().read_model(chain(output_read=False))
    assert type_shape(model.value_type("t")) == ("n", 3)
    assert type_shape(model.types_without_value_info["t"]) == ("n", 3)
    assert type_shape(model.value_type("w")) == (2, 3)  # an output keeps the type it declares
    assert len(inferences) == 1


def test_a_declared_output_shape_that_reaches_a_reader_is_inferred_with(inferences):
    model = hc.Core().read_model(chain(output_read=True))
    assert type_shape(model.value_type("t")) == (2, 3)  # from y's declared shape, as onnx infers it
    assert type_shape(model.types_without_value_info["t"]) == ("n", 3)
    assert len(inferences) == 2


def test_value_info_is_inferred_with(inferences):
    proto = chain(output_read=False)
    proto.graph.value_info.append(vi("y", [2, 3]))
    model = hc.Core().read_model(proto)
    assert type_shape(model.value_type("t")) == (2, 3)
    assert type_shape(model.types_without_value_info["t"]) == ("n", 3)
    assert len(inferences) == 2


def test_large_constant_nodes_reach_inference_as_typed_inputs_not_as_weights(monkeypatch):
    """paddle2onnx writes every weight as a Constant node: onnx's inference gets each large one as an
    input of its type and shape (it reads no more of it), so the weights are not serialized for it; the
    constant's own type is still known, and a small one (a shape) still folds."""
    seen: list[onnx.ModelProto] = []
    real = onnx.shape_inference.infer_shapes

    def keep(proto, *args, **kwargs):
        seen.append(proto)
        return real(proto, *args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", keep)
    weights = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    nodes = [
        h.make_node("Constant", [], ["w"], name="w", value=numpy_helper.from_array(weights, "w")),
        h.make_node(
            "Constant",
            [],
            ["shape"],
            name="shape",
            value=numpy_helper.from_array(np.array([-1, 4, 8]), "shape"),
        ),
        h.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
        h.make_node("Reshape", ["m", "shape"], ["y"], name="reshape"),
    ]
    model = hc.Core().read_model(make_model(nodes, [vi("x", ["n", 64])], [vi("y", None)]))
    assert type_shape(model.types_without_value_info["w"]) == (64, 32)
    assert type_shape(model.types_without_value_info["m"]) == ("n", 32)
    assert type_shape(model.value_type("w")) == (64, 32)
    assert type_shape(model.types_without_value_info["y"])[1:] == (4, 8)  # the small constant read
    assert seen and all(p.ByteSize() < weights.nbytes for p in seen)
    assert all([n.name for n in p.graph.node] == ["shape", "matmul", "reshape"] for p in seen)
