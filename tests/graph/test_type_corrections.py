"""Type corrections belong to a compile (issue 44): a compile corrects a declared type ONNX Runtime
contradicts in its own copy of the model (Model.typed_copy), so the Model the caller holds is never
changed by a compile or an inference, and each compile of it finds its corrections itself."""

from __future__ import annotations

import logging

from onnx import TensorProto
from onnx import helper as h
from support.helpers import assert_same, cpu_split, make_model, ort_run, seeded, vi

import hetero_cli as hc
from hetero_cli.graph.types import type_shape


def relu_neg_with_a_lie():
    """x [2,3] -> Relu -> t -> Neg -> y, with a value_info that declares t [3,3] (as in
    tests/runtime/test_declared_types.py): a split at t refuses it until it is corrected."""
    nodes = [h.make_node("Relu", ["x"], ["t"], name="relu"), h.make_node("Neg", ["t"], ["y"], name="neg")]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])
    proto.graph.value_info.append(vi("t", [3, 3]))
    return proto


def test_each_compile_corrects_its_own_copy_and_the_callers_model_stays_as_read(caplog):
    proto = relu_neg_with_a_lie()
    model = hc.Core().read_model(proto)
    assert type_shape(model.value_type("t")) == (3, 3) and model.correction("t") is None
    x = seeded((2, 3)) - 0.5
    want = ort_run(proto, {"x": x})

    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        first = cpu_split(model)
    assert "value_info contradicts" in caplog.text and "t (" in caplog.text
    corrected = first.model.correction("t")
    assert corrected is not None and type_shape(corrected) != (3, 3)  # ORT's shape for t
    assert first.model.value_type("t") is corrected
    assert model.correction("t") is None and type_shape(model.value_type("t")) == (3, 3)  # untouched
    assert_same(first({"x": x}), want)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        second = cpu_split(model)
    # the second compile finds the correction itself, in a copy of its own
    assert "value_info contradicts" in caplog.text
    assert second.model is not first.model and second.model.correction("t") is not None
    assert model.correction("t") is None
    assert_same(second({"x": x}), want)
    assert_same(first({"x": x}), want)  # the first compiled model is untouched by the second


def test_a_typed_copy_shares_the_graph_and_keeps_corrections_of_its_own():
    model = hc.Core().read_model(relu_neg_with_a_lie())
    copy = model.typed_copy()
    assert copy.proto is model.proto and copy.get_ops()[0] is model.get_ops()[0]  # nothing copied
    copy.correct_type("t", h.make_tensor_type_proto(TensorProto.FLOAT, [2, 3]))
    assert copy.tensor_info("t").shape == (2, 3) and model.tensor_info("t").shape == (3, 3)
    assert model.typed_copy().correction("t") is None


def test_a_correction_outranks_the_declared_type_until_taken_back():
    model = hc.Core().read_model(relu_neg_with_a_lie())
    real = h.make_tensor_type_proto(TensorProto.FLOAT, [2, 3])
    model.correct_type("t", real)
    assert model.value_type("t") is real and model.tensor_info("t").shape == (2, 3)
    model.correct_type("t", None)
    assert model.correction("t") is None
    assert model.tensor_info("t").shape == (3, 3)  # the declared type again
