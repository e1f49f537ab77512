"""A model whose value_info contradicts its tensors: ONNX Runtime runs it whole (it warns and goes by what
it infers), so a split of it must run too and give the same results."""

from __future__ import annotations

import logging

import pytest
from helpers import assert_same, cpu_split, make_model, needs_openvino, ort_run, seeded, vi
from onnx import TensorProto
from onnx import helper as h

import hetero_cli as hc

LIES = {
    "a wrong dimension": vi("t", [3, 3]),
    "a wrong rank": vi("t", [6]),
    "a wrong dimension and rank": vi("t", [5, 3, 1]),
}


def relu_neg(declared=None):
    nodes = [h.make_node("Relu", ["x"], ["t"], name="relu"), h.make_node("Neg", ["t"], ["y"], name="neg")]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])
    if declared is not None:
        proto.graph.value_info.append(declared)
    return proto


@pytest.mark.parametrize("declared", list(LIES.values()), ids=list(LIES))
def test_a_split_at_a_tensor_whose_value_info_lies_gives_the_whole_models_results(declared, caplog):
    proto = relu_neg(declared)
    x = seeded((2, 3)) - 0.5
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto)
    assert "value_info contradicts" in caplog.text and "t (" in caplog.text
    request = compiled.create_infer_request()
    for _ in range(2):  # the first inference and one with the request's buffers in place
        assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}))


CHAINED_LIES = {
    "two wrong shapes in a row": [vi("t", [3, 2]), vi("n", [3, 2])],
    "a wrong rank in symbols": [vi("t", ["a", "b", "c"])],
    "a partly fixed wrong shape": [vi("t", [3, "b"])],
}


@pytest.mark.parametrize("declared", list(CHAINED_LIES.values()), ids=list(CHAINED_LIES))
def test_value_info_lies_over_two_boundaries_are_all_corrected(declared, caplog):
    """relu -> t -> neg -> n -> abs on three subgraphs: correcting t re-infers nothing by itself, and n's
    type (declared wrong, or inferred from t's lie) is reported by ORT's session as declared: both are
    corrected, with symbolic or partly fixed lies too."""
    nodes = [
        h.make_node("Relu", ["x"], ["t"], name="relu"),
        h.make_node("Neg", ["t"], ["n"], name="neg"),
        h.make_node("Abs", ["n"], ["y"], name="abs"),
    ]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])
    proto.graph.value_info.extend(declared)
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto, ["A", "B", "A"])
    assert "value_info contradicts" in caplog.text
    x = seeded((2, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_lie_that_fixes_a_dynamic_batch_is_corrected_too():
    """x [N,3]: t declared [3,4] and n [3,3]; ORT's session reports n as [3,?], keeping the lie's 3 where
    the tensor's batch is N: the type inferred without the value_info wins."""
    nodes = [
        h.make_node("Relu", ["x"], ["t"], name="relu"),
        h.make_node("Neg", ["t"], ["n"], name="neg"),
        h.make_node("Abs", ["n"], ["y"], name="abs"),
    ]
    proto = make_model(nodes, [vi("x", ["N", 3])], [vi("y", ["N", 3])])
    proto.graph.value_info.extend([vi("t", [3, 4]), vi("n", [3, 3])])
    compiled = cpu_split(proto, ["A", "B", "A"])
    x = seeded((2, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_true_value_info_is_kept_as_declared(caplog):
    proto = relu_neg(vi("t", [2, 3]))
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto)
    assert "contradicts" not in caplog.text
    assert compiled.subgraphs[0].session.get_outputs()[0].shape == [2, 3]


def test_a_minus_one_dimension_is_dynamic_not_contradicted(caplog):
    """paddle2onnx declares a dynamic batch as dim_value -1: ORT's [?, 3] for such a tensor contradicts
    nothing (it was called a contradiction, and the sessions on both sides were made twice)."""
    proto = relu_neg(vi("t", [-1, 3]))
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    proto.graph.output[0].type.tensor_type.shape.dim[0].dim_value = -1
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto)
    assert "contradicts" not in caplog.text
    x = seeded((4, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_wrong_element_type_fails_as_it_does_in_onnx_runtime():
    proto = relu_neg(vi("t", [2, 3], TensorProto.DOUBLE))
    with pytest.raises(Exception, match="double"):
        ort_run(proto, {"x": seeded((2, 3))})  # ORT refuses the model whole too
    with pytest.raises(hc.HeteroError):
        cpu_split(proto)({"x": seeded((2, 3))})


@needs_openvino
def test_a_lying_value_info_between_openvino_and_cpu(caplog):
    proto = relu_neg(vi("t", [3, 3]))
    model = hc.Core().read_model(proto)
    model.set_affinities({"relu": "OPENVINO", "neg": "CPU"})
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU"]
    assert "contradicts" in caplog.text
    x = seeded((2, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)
