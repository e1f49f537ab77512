"""Issue 5, quantized and mixed-precision models.

A DequantizeLinear -> op -> QuantizeLinear group is never cut across devices (hetero_cli.placement.qdq, a pass over
the affinity map before partitioning); float16 regions split across devices give the whole model's result.
"""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.helpers import const, make_model, needs_openvino, ort_run, vi
from support.robust import fp16_model, qdq_model

import hetero_cli as hc
from hetero_cli.placement import qdq

SPLIT = "HETERO:OPENVINO,CPU"
OPS = ["Conv", "MatMul", "Add"]
ACTIVATIONS = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8}


def subgraph_of(plan: hc.Plan) -> dict[str, int]:
    return {n: s.index for s in plan.subgraphs for n in s.nodes}


def set_all(model: hc.Model, placement: dict[str, str], default: str) -> None:
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = placement.get(node.get_friendly_name(), default)


def input_for(proto) -> np.ndarray:
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(5).standard_normal(shape).astype(np.float32)


# --- the groups ------------------------------------------------------------------------------------------


def test_groups_of_a_qdq_model():
    model = hc.Core().read_model(qdq_model("Conv"))
    groups = qdq.find_groups(model)
    # dq_w reads a constant weight: it is a constant, copied into every subgraph that needs it, never cut
    assert groups == [qdq.QdqGroup("op", ("dq_in",), ("q_out",)), qdq.QdqGroup("relu", ("dq_out",), ())]
    assert groups[0].members == ("dq_in", "op", "q_out")


def two_groups_sharing_a_dequantize():
    """x -> Q -> DQ -> {Relu -> Q1, Sigmoid -> Q2} -> DQ1, DQ2 -> Add -> y: one DQ feeds two groups."""
    nodes = [
        h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
        h.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_shared"),
        h.make_node("Relu", ["xd"], ["a"], name="relu"),
        h.make_node("Sigmoid", ["xd"], ["b"], name="sigmoid"),
        h.make_node("QuantizeLinear", ["a", "s", "z"], ["aq"], name="q_a"),
        h.make_node("QuantizeLinear", ["b", "s", "z"], ["bq"], name="q_b"),
        h.make_node("DequantizeLinear", ["aq", "s", "z"], ["ad"], name="dq_a"),
        h.make_node("DequantizeLinear", ["bq", "s", "z"], ["bd"], name="dq_b"),
        h.make_node("Add", ["ad", "bd"], ["y"], name="add"),
    ]
    inits = [const("s", 0.05), numpy_helper.from_array(np.array(0, np.int8), "z")]
    return make_model(nodes, [vi("x", [2, 8])], [vi("y", [2, 8])], inits, name="shared_dq")


def test_a_dequantize_feeding_two_ops_stays_with_the_first():
    model = hc.Core().read_model(two_groups_sharing_a_dequantize())
    groups = {g.op: g for g in qdq.find_groups(model)}
    assert groups["relu"] == qdq.QdqGroup("relu", ("dq_shared",), ("q_a",))
    assert groups["sigmoid"] == qdq.QdqGroup("sigmoid", ("dq_shared",), ("q_b",))
    assert groups["add"] == qdq.QdqGroup("add", ("dq_a", "dq_b"), ())
    affinities = {n.get_friendly_name(): "CPU" for n in model.get_ops()}
    affinities.update(relu="OPENVINO", q_a="CPU", dq_shared="CPU")
    moved = qdq.keep_groups_together(model, affinities, manual=False)
    assert moved["dq_shared"] == "OPENVINO" and moved["q_a"] == "OPENVINO"
    assert moved["sigmoid"] == "CPU" and moved["q_b"] == "CPU"


def test_models_without_qdq_and_plain_devices_are_left_alone():
    from support.helpers import hardmax_model

    model = hc.Core().read_model(hardmax_model())
    assert qdq.find_groups(model) == []
    proto = qdq_model("MatMul")
    plan = hc.Core().plan(proto, "CPU")
    assert len(plan.subgraphs) == 1


# --- never cut --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("op_device", ["OPENVINO", "CPU"])
@needs_openvino
def test_manual_affinities_that_cut_a_group_are_adjusted(op, act, op_device, caplog):
    proto = qdq_model(op, ACTIVATIONS[act])
    model = hc.Core().read_model(proto)
    other = "CPU" if op_device == "OPENVINO" else "OPENVINO"
    set_all(model, {"op": op_device}, other)  # every cut a plain partition would make: dq_in | op | q_out
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        plan = hc.Core().plan(model, SPLIT)
    where = subgraph_of(plan)
    assert where["dq_in"] == where["op"] == where["q_out"]
    assert plan.affinities["dq_in"] == plan.affinities["q_out"] == op_device
    lines = [r.getMessage() for r in caplog.records if "QDQ" in r.getMessage()]
    assert len(lines) == 1 and "'op'" in lines[0] and op_device in lines[0], lines
    # the int8 tensors cross devices, not the float ones
    crossing = set(plan.crossing_tensors())
    assert crossing <= {"x_q", "y_q", "x"}, crossing
    compiled = hc.Core().compile_model(model, SPLIT)
    x = input_for(proto)
    got, want = compiled({"x": x})["y"], ort_run(proto, {"x": x})["y"]
    np.testing.assert_allclose(got, want, atol=0.1 + 1e-6)  # one quantum of y (scale 0.1) at most


@needs_openvino
def test_automatic_mode_moves_the_group_to_the_op_without_warning(caplog):
    # DQ -> Hardmax -> Q: the OpenVINO EP refuses Hardmax (CPU) but takes DQ and Q (greedy: OPENVINO)
    nodes = [
        h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q_in"),
        h.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq_in"),
        h.make_node("Hardmax", ["xd"], ["hm"], name="hardmax"),
        h.make_node("QuantizeLinear", ["hm", "s", "z"], ["hq"], name="q_out"),
        h.make_node("DequantizeLinear", ["hq", "s", "z"], ["hd"], name="dq_out"),
        h.make_node("Mul", ["hd", "x"], ["y"], name="mul"),
    ]
    inits = [const("s", 0.05), numpy_helper.from_array(np.array(0, np.int8), "z")]
    proto = make_model(nodes, [vi("x", [2, 8])], [vi("y", [2, 8])], inits, name="qdq_hardmax")
    model = hc.Core().read_model(proto)
    greedy = hc.Core().query_model(model, SPLIT)
    assert greedy["hardmax"] == "CPU" and greedy["dq_in"] == "OPENVINO" == greedy["q_out"]
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        plan = hc.Core().plan(model, SPLIT)
        compiled = hc.Core().compile_model(model, SPLIT)
    where = subgraph_of(plan)
    assert where["dq_in"] == where["hardmax"] == where["q_out"]
    assert not [r for r in caplog.records if "QDQ" in r.getMessage()]
    x = input_for(proto)
    np.testing.assert_allclose(compiled({"x": x})["y"], ort_run(proto, {"x": x})["y"], atol=0.05 * 3)


def qdq_chain(groups: int):
    """x -> Q -> DQ -> Relu -> Q -> DQ -> ... -> y: ``groups`` groups relu_i = (dq_i, relu_i, q_{i+1})."""
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["t0"], name="q_0")]
    for i in range(groups):
        nodes += [
            h.make_node("DequantizeLinear", [f"t{i}", "s", "z"], [f"d{i}"], name=f"dq_{i}"),
            h.make_node("Relu", [f"d{i}"], [f"r{i}"], name=f"relu_{i}"),
            h.make_node("QuantizeLinear", [f"r{i}", "s", "z"], [f"t{i + 1}"], name=f"q_{i + 1}"),
        ]
    nodes.append(h.make_node("DequantizeLinear", [f"t{groups}", "s", "z"], ["y"], name="dq_out"))
    inits = [const("s", 0.05), numpy_helper.from_array(np.array(0, np.int8), "z")]
    return make_model(nodes, [vi("x", [2, 8])], [vi("y", [2, 8])], inits, name="qdq_chain")


def test_many_groups_moved_give_one_warning_and_a_debug_line_each(caplog):
    """A QDQ transformer moves hundreds of groups: one warning with the count and the first groups, what to
    do about it, and each group (with the nodes moved and where they were) at debug level only."""
    model = hc.Core().read_model(qdq_chain(5))
    affinities = {n.get_friendly_name(): "CPU" for n in model.get_ops()}
    affinities.update({f"relu_{i}": "OPENVINO" for i in range(5)})
    with caplog.at_level(logging.DEBUG, logger="hetero_cli"):
        out = qdq.keep_groups_together(model, affinities, manual=True)
    assert all(out[f"dq_{i}"] == out[f"q_{i + 1}"] == "OPENVINO" for i in range(5))
    assert out["q_0"] == out["dq_out"] == "CPU"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    line = warnings[0]
    assert line.startswith("5 QDQ groups kept whole: 10 DequantizeLinear/QuantizeLinear nodes moved"), line
    assert "'relu_0' (Relu) on OPENVINO, 'relu_1' (Relu) on OPENVINO, 'relu_2' (Relu) on OPENVINO" in line
    assert "and 2 more" in line and "relu_3" not in line and "relu_4" not in line
    assert "never cut across devices" in line and "give each group's DequantizeLinear" in line
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "QDQ" in r.getMessage()]
    assert len(debug) == 5, debug
    for i, message in enumerate(debug):
        assert f"'relu_{i}' (Relu) kept whole on OPENVINO" in message, message
        assert f"dq_{i} (was CPU), q_{i + 1} (was CPU)" in message, message


def test_one_group_moved_is_named_in_the_singular(caplog):
    model = hc.Core().read_model(qdq_chain(2))
    affinities = {n.get_friendly_name(): "CPU" for n in model.get_ops()}
    affinities.update(relu_1="OPENVINO", dq_1="OPENVINO")
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        qdq.keep_groups_together(model, affinities, manual=True)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("1 QDQ group kept whole: 1 DequantizeLinear/QuantizeLinear node moved"), line
    assert "'relu_1' (Relu) on OPENVINO" in line and "more" not in line


@needs_openvino
def test_the_cli_warns_once_and_lists_each_group_under_debug(tmp_path):
    from support.robust import invoke

    from hetero_cli import cli

    model = hc.Core().read_model(qdq_chain(4))
    set_all(model, {f"relu_{i}": "OPENVINO" for i in range(4)}, "CPU")
    path = tmp_path / "pinned.onnx"
    model.save(str(path))
    for debug in (False, True):
        result = invoke(cli.query, "-m", path, "-d", SPLIT, *(["--debug"] if debug else []))
        assert result.exit_code == 0, result.stderr
        lines = result.stderr.splitlines()
        warned = [line for line in lines if line.startswith("[ WARNING ]") and "QDQ" in line]
        assert len(warned) == 1 and "4 QDQ groups kept whole" in warned[0], result.stderr
        listed = [line for line in lines if line.startswith("[ DEBUG ] QDQ group around")]
        assert [f"'relu_{i}'" in line for i, line in enumerate(listed)] == [True] * (4 if debug else 0)


# --- float16 regions ----------------------------------------------------------------------------------------

FP16_NODES = ["to_half", "matmul", "add", "tanh", "to_float", "mul"]
PLACEMENTS = [
    "CCCCCC",
    "OOOOOO",
    "COCOCO",
    "OCOCOC",
    "COOOCC",
    "OCCCOO",
    *("".join(p) for p in itertools.islice(itertools.product("OC", repeat=6), 7, 64, 19)),
]


@pytest.mark.parametrize("placement", PLACEMENTS)
@needs_openvino
def test_float16_region_split_across_devices(placement):
    proto = fp16_model()
    model = hc.Core().read_model(proto)
    set_all(
        model,
        {n: "OPENVINO" if c == "O" else "CPU" for n, c in zip(FP16_NODES, placement, strict=True)},
        "CPU",
    )
    compiled = hc.Core().compile_model(model, SPLIT)
    if "O" in placement and "C" in placement:
        assert len(compiled.subgraphs) >= 2
    x = input_for(proto)
    want = ort_run(proto, {"x": x})["y"]
    got = compiled({"x": x})["y"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
