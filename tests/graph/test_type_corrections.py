"""Type corrections carry over between compiles of one Model (issue 19): a correction is a fact learned
about the model's own value_info, kept in its TypeTable like a cache, not a setting of one compile."""

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


def test_a_second_compile_of_one_model_starts_from_the_first_ones_correction(caplog):
    proto = relu_neg_with_a_lie()
    model = hc.Core().read_model(proto)
    assert type_shape(model.value_type("t")) == (3, 3) and not model.is_corrected("t")
    x = seeded((2, 3)) - 0.5
    want = ort_run(proto, {"x": x})

    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        first = cpu_split(model)
    assert "value_info contradicts" in caplog.text and "t (" in caplog.text
    assert model.is_corrected("t")
    corrected = model.correction("t")
    assert model.value_type("t") is corrected and type_shape(corrected) != (3, 3)  # ORT's shape for t
    assert_same(first({"x": x}), want)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        second = cpu_split(model)
    # the second compile found t's type corrected already: no session refused it, nothing to correct
    assert "value_info contradicts" not in caplog.text
    assert model.correction("t") is corrected and model.value_type("t") is corrected
    assert_same(second({"x": x}), want)
    assert_same(first({"x": x}), want)  # the first compiled model is untouched by the second


def test_a_correction_outranks_the_declared_type_until_taken_back():
    model = hc.Core().read_model(relu_neg_with_a_lie())
    real = h.make_tensor_type_proto(TensorProto.FLOAT, [2, 3])
    model.correct_type("t", real)
    assert model.value_type("t") is real and model.tensor_info("t").shape == (2, 3)
    model.correct_type("t", None)
    assert not model.is_corrected("t") and model.correction("t") is None
    assert model.tensor_info("t").shape == (3, 3)  # the declared type again
