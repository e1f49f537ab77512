"""Issue 5, control flow: If, Loop and Scan split across devices give the whole model's result.

The bodies read outer-scope values (computed by nodes of the main graph) and initializers of the outer
graph; one model nests an If inside a Loop body, its branch reading a value two scopes up. Every
placement of the top-level nodes on the split's devices (OPENVINO or GPU, and CPU) is tried (a fixed sample of 16 for five nodes), and each result is
compared with one plain ONNX Runtime session over the whole model.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import (
    HAS_OPENVINO,
    SPLIT,
    SPLIT_DEVICES,
    SPLIT_TOLERANCE,
    const,
    cpu_split,
    make_model,
    ort_run,
    vi,
)

import hetero_cli as hc

DEVICES = SPLIT_DEVICES
BOOL, INT64 = TensorProto.BOOL, TensorProto.INT64


def if_model() -> onnx.ModelProto:
    """If whose branches read r and x (outer values) and k (outer initializer)."""
    then_g = h.make_graph(
        [
            h.make_node("Add", ["r", "k"], ["t1"], name="then_add"),
            h.make_node("Mul", ["t1", "x"], ["t_out"], name="then_mul"),
        ],
        "then",
        [],
        [vi("t_out", [2, 4])],
    )
    else_g = h.make_graph(
        [h.make_node("Sub", ["r", "k"], ["e_out"], name="else_sub")], "else", [], [vi("e_out", [2, 4])]
    )
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        h.make_node("Greater", ["s", "zero"], ["c"], name="cond"),
        h.make_node("If", ["c"], ["z"], name="if", then_branch=then_g, else_branch=else_g),
        h.make_node("Sigmoid", ["z"], ["y"], name="sigmoid"),
    ]
    inits = [const("zero", 0.0), const("k", np.full((2, 4), 0.5))]
    return make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], inits, name="if_model")


def loop_model() -> onnx.ModelProto:
    """Loop (3 trips) carrying v; its body reads r (outer value) and w (outer initializer); scan output."""
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            h.make_node("MatMul", ["v_in", "w"], ["vw"], name="body_matmul"),
            h.make_node("Add", ["vw", "r"], ["vr"], name="body_add"),
            h.make_node("Tanh", ["vr"], ["v_out"], name="body_tanh"),
            h.make_node("Mul", ["v_out", "two"], ["scan_out"], name="body_scale"),
        ],
        "body",
        [vi("i", [], INT64), vi("cond_in", [], BOOL), vi("v_in", [2, 4])],
        [vi("cond_out", [], BOOL), vi("v_out", [2, 4]), vi("scan_out", [2, 4])],
    )
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Neg", ["x"], ["v0"], name="neg"),
        h.make_node("Loop", ["trips", "yes", "v0"], ["v_final", "scans"], name="loop", body=body),
        h.make_node("ReduceSum", ["scans", "axis0"], ["scan_sum"], name="scan_sum", keepdims=0),
        h.make_node("Add", ["v_final", "scan_sum"], ["y"], name="add"),
    ]
    rng = np.random.default_rng(6)
    inits = [
        const("trips", 3, np.int64),
        const("yes", True, np.bool_),
        const("w", rng.standard_normal((4, 4)) * 0.5),
        const("two", 2.0),
        const("axis0", [0], np.int64),
    ]
    return make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], inits, name="loop_model")


def scan_model() -> onnx.ModelProto:
    """Scan over x's rows: state += row * g, where g = Sigmoid(b) is an outer value; k an outer initializer."""
    body = h.make_graph(
        [
            h.make_node("Mul", ["row", "g"], ["rg"], name="body_mul"),
            h.make_node("Add", ["state_in", "rg"], ["state_out"], name="body_add"),
            h.make_node("Mul", ["state_out", "k"], ["out_row"], name="body_scale"),
        ],
        "scan_body",
        [vi("state_in", [4]), vi("row", [4])],
        [vi("state_out", [4]), vi("out_row", [4])],
    )
    nodes = [
        h.make_node("Sigmoid", ["b"], ["g"], name="gate"),
        h.make_node("Relu", ["x"], ["rx"], name="relu"),
        h.make_node("Scan", ["zeros", "rx"], ["state", "rows"], name="scan", body=body, num_scan_inputs=1),
        h.make_node("Abs", ["rows"], ["y"], name="abs"),
        h.make_node("Neg", ["state"], ["s"], name="neg"),
    ]
    inits = [const("zeros", np.zeros(4)), const("k", np.full((4,), 1.5))]
    return make_model(
        nodes, [vi("x", [5, 4]), vi("b", [4])], [vi("y", [5, 4]), vi("s", [4])], inits, name="scan_model"
    )


def nested_model() -> onnx.ModelProto:
    """A Loop whose body holds an If: the then-branch reads r (main graph, two scopes up) and k (main
    graph initializer); the else-branch reads the body's own value."""
    then_g = h.make_graph(
        [h.make_node("Add", ["v_in", "r"], ["t_out"], name="then_add")], "then", [], [vi("t_out", [2, 4])]
    )
    else_g = h.make_graph(
        [h.make_node("Mul", ["v_in", "k"], ["e_out"], name="else_mul")], "else", [], [vi("e_out", [2, 4])]
    )
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            h.make_node("Greater", ["i", "one"], ["late"], name="late"),
            h.make_node("If", ["late"], ["v_if"], name="inner_if", then_branch=then_g, else_branch=else_g),
            h.make_node("Tanh", ["v_if"], ["v_out"], name="body_tanh"),
        ],
        "body",
        [vi("i", [], INT64), vi("cond_in", [], BOOL), vi("v_in", [2, 4])],
        [vi("cond_out", [], BOOL), vi("v_out", [2, 4])],
    )
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Sigmoid", ["x"], ["v0"], name="sigmoid"),
        h.make_node("Loop", ["trips", "yes", "v0"], ["v_final"], name="loop", body=body),
        h.make_node("Mul", ["v_final", "r"], ["y"], name="mul"),
    ]
    inits = [
        const("trips", 4, np.int64),
        const("yes", True, np.bool_),
        const("one", 1, np.int64),
        const("k", np.full((2, 4), 0.75)),
    ]
    return make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], inits, name="nested_model")


MODELS = {"if": if_model, "loop": loop_model, "scan": scan_model, "nested": nested_model}


def feeds_of(proto: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
        for i in proto.graph.input
    }


PLACEMENTS = 16  # per model; a session costs ~60 ms to create, so 5 nodes' 32 placements are sampled


def placements(model: hc.Model) -> list[dict[str, str]]:
    """Every placement of the model's nodes on the devices, or a fixed sample of PLACEMENTS of them
    (all on one device and alternating included)."""
    names = [n.get_friendly_name() for n in model.get_ops() if not n.is_constant]
    every = [dict(zip(names, combo, strict=True)) for combo in itertools.product(DEVICES, repeat=len(names))]
    if len(every) <= PLACEMENTS:
        return every
    alternating = [{n: DEVICES[(k + j) % 2] for k, n in enumerate(names)} for j in range(2)]
    rest = [p for p in every[1:-1] if p not in alternating]
    return [every[0], every[-1], *alternating, *random.Random(len(names)).sample(rest, PLACEMENTS - 4)]


# ORT's OpenVINO EP (1.24) cannot compile a Loop or Scan whose body reads outer-scope names, not even in
# one plain ORT session over the whole model ("<name> node not found in graph cache"; a Loop body holding
# an If aborts the process): placed there by hand, such a node gives one CompileError before ORT tries.
OV_CANNOT_COMPILE = {"Loop", "Scan"}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_placement_gives_the_whole_models_result(kind):
    proto = MODELS[kind]()
    feeds = [feeds_of(proto, seed) for seed in range(2)]
    want = [ort_run(proto, f) for f in feeds]
    ran = refused = 0
    tried = placements(hc.Core().read_model(proto))
    for placement in tried:
        model = hc.Core().read_model(proto)
        for node in model.get_ops():
            node.get_rt_info()["affinity"] = placement.get(node.get_friendly_name(), DEVICES[0])
        on_openvino = {
            n.get_type_name() for n in model.get_ops() if placement.get(n.get_friendly_name()) == "OPENVINO"
        }
        try:
            compiled = hc.Core().compile_model(model, SPLIT)
        except hc.CompileError as err:
            assert on_openvino & OV_CANNOT_COMPILE, f"{placement}: {err}"
            assert "on OPENVINO" in str(err) and ("(Loop)" in str(err) or "(Scan)" in str(err))
            assert "Move these nodes to another device" in str(err)
            refused += 1
            continue
        request = compiled.create_infer_request()
        for f, w in zip(feeds, want, strict=True):
            got = request.infer(f)
            for name in w:
                np.testing.assert_allclose(
                    got[name], w[name], err_msg=f"{placement} {name}", **SPLIT_TOLERANCE
                )
        ran += 1
    assert ran + refused == len(tried)
    runnable = [p for p in tried if not any(p[n] == "OPENVINO" for n in ("loop", "scan") if n in p)]
    assert ran >= len(runnable)  # every placement with the Loop or Scan on CPU ran


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_automatic_mode(kind):
    proto = MODELS[kind]()
    compiled = hc.Core().compile_model(proto, SPLIT)
    f = feeds_of(proto, 3)
    want = ort_run(proto, f)
    got = compiled(f)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], **SPLIT_TOLERANCE)


def loop_holding_an_if() -> onnx.ModelProto:
    """x -> Sub(x, x) -> Loop whose body holds an If; both read names from outside their own graph.

    Found by tests/integration/test_property_robust.py: ORT 1.24 with its OpenVINO EP aborts the whole process on
    this model (std::terminate: "graph have a cycle"), even in one plain session.
    """
    then_g = h.make_graph(
        [h.make_node("Abs", ["t1"], ["t_out"], name="then_abs")], "then", [], [vi("t_out", ["batch", 4])]
    )
    else_g = h.make_graph(
        [h.make_node("Sub", ["b1", "b2"], ["e_out"], name="else_sub")],
        "else",
        [],
        [vi("e_out", ["batch", 4])],
    )
    body = h.make_graph(
        [
            h.make_node("Relu", ["x"], ["b1"], name="body_relu"),
            h.make_node("Mul", ["b1", "k"], ["b1k"], name="body_mul"),
            h.make_node("Tanh", ["b1k"], ["b2"], name="body_tanh"),
            h.make_node("ReduceSum", ["b1"], ["bs"], name="body_sum", keepdims=0),
            h.make_node("Greater", ["bs", "zero"], ["bc"], name="body_cond"),
            h.make_node("If", ["bc"], ["b_if"], name="body_if", then_branch=then_g, else_branch=else_g),
            h.make_node("Tanh", ["b_if"], ["v_out"], name="body_out"),
            h.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
        ],
        "body",
        [vi("i", [], INT64), vi("cond_in", [], BOOL), vi("v_in", ["batch", 4])],
        [vi("cond_out", [], BOOL), vi("v_out", ["batch", 4])],
    )
    nodes = [
        h.make_node("Sub", ["x", "x"], ["t1"], name="sub"),
        h.make_node("Loop", ["trips", "yes", "t1"], ["y"], name="loop", body=body),
    ]
    inits = [
        const("zero", 0.0),
        const("yes", True, np.bool_),
        const("k", np.array([-0.46, -0.53, 0.2, -0.005])),
        const("trips", 3, np.int64),
    ]
    return make_model(nodes, [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], inits, name="loop_if")


@pytest.mark.skipif(not HAS_OPENVINO, reason="needs the OpenVINO execution provider")
def test_a_loop_the_openvino_ep_would_abort_on_is_refused_by_hand_and_run_on_cpu():
    proto = loop_holding_an_if()
    model = hc.Core().read_model(proto)
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = "OPENVINO"
    with pytest.raises(hc.CompileError, match=r"loop \(Loop\).*another device"):
        hc.Core().compile_model(model, SPLIT)  # without the guard: the process aborts
    model.get_ops()[-1].get_rt_info()["affinity"] = "CPU"
    compiled = hc.Core().compile_model(model, SPLIT)
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU"]
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(compiled({"x": x})["y"], ort_run(proto, {"x": x})["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAS_OPENVINO, reason="a split needs the OpenVINO execution provider")
def test_outer_values_of_a_nested_body_reach_its_subgraph():
    model = hc.Core().read_model(nested_model())
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = "CPU" if node.get_friendly_name() == "loop" else DEVICES[0]
    plan = hc.Core().plan(model, SPLIT)
    loop_part = next(s for s in plan.subgraphs if "loop" in s.nodes)
    assert "r" in loop_part.inputs  # read two scopes down, inside the If inside the Loop
    assert "k" not in loop_part.inputs  # an initializer: copied, never sent


def test_an_if_whose_branches_give_different_ranks_crosses_a_boundary():
    """then gives [2,3], else [6]: the If's output at a boundary took the then branch's rank, so the next
    subgraph refused the else branch's tensor. Its rank is left open where the branches disagree."""
    then = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", [2, 3])])
    other = h.make_graph([h.make_node("Reshape", ["x", "flat"], ["e"])], "else", [], [vi("e", [6])])
    nodes = [
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        h.make_node("Greater", ["s", "zero"], ["cond"], name="positive"),
        h.make_node("If", ["cond"], ["picked"], name="if", then_branch=then, else_branch=other),
        h.make_node("Abs", ["picked"], ["y"], name="abs"),
    ]
    initializers = [const("zero", 0.0), const("flat", [6], np.int64)]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", None)], initializers)
    compiled = cpu_split(proto, ["A", "A", "A", "B"])
    for sign in (1, -1):
        x = sign * (np.arange(6, dtype=np.float32).reshape(2, 3) + 1)
        got, want = compiled({"x": x}), ort_run(proto, {"x": x})
        assert got["y"].shape == want["y"].shape == ((2, 3) if sign > 0 else (6,))
        assert np.array_equal(got["y"], want["y"])
