"""What each subgraph session is given: a faithful, checker-clean ONNX model of its part of the source.

The models are captured as the engine hands them to onnxruntime.InferenceSession, so these tests see
exactly what is compiled, whatever the engine's internal export API looks like.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import (
    HAS_OPENVINO,
    OPENVINO_ONLY,
    assert_same,
    const,
    cpu_split,
    make_model,
    needs_openvino,
    ort_run,
    seeded,
    vi,
)

import hetero_cli as hc
from hetero_cli.ort.session import SessionRequest, observe_sessions

_CAPTURED: list[SessionRequest] = []  # the sessions the engine asked for while ``capture`` is on


@pytest.fixture
def capture():
    """Keep the model each session is created from."""
    _CAPTURED.clear()
    with observe_sessions(_CAPTURED.append):
        yield
    _CAPTURED.clear()


def source_model(session) -> onnx.ModelProto:
    """The model ``session`` was created from, as the engine handed it to ORT."""
    path_or_bytes = next(r.model for r in _CAPTURED if r.session is session)
    return (
        onnx.load_from_string(path_or_bytes) if isinstance(path_or_bytes, bytes) else onnx.load(path_or_bytes)
    )


def compile_with(proto: onnx.ModelProto, affinities: dict[str, str] | None) -> hc.CompiledModel:
    """Compile with manual affinities (OPENVINO replaced by CPU where the OpenVINO EP is missing)."""
    core = hc.Core()
    model = core.read_model(proto)
    if affinities is not None:
        for op in model.get_ops():
            dev = affinities[op.get_friendly_name()]
            op.get_rt_info()["affinity"] = dev if HAS_OPENVINO else "CPU"
    return core.compile_model(model, "HETERO:OPENVINO,CPU" if HAS_OPENVINO else "HETERO:CPU")


def subgraph_models(compiled: hc.CompiledModel) -> list[onnx.ModelProto]:
    return [source_model(s.session) for s in compiled.subgraphs]


def check(m: onnx.ModelProto) -> None:
    onnx.checker.check_model(m)
    onnx.checker.check_model(m, full_check=True)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


# --- a model with everything worth keeping -----------------------------------------------------------------


def rich_model() -> onnx.ModelProto:
    add_twice = h.make_function(
        "local.fns",
        "AddTwice",
        ["a", "b"],
        ["c"],
        [h.make_node("Add", ["a", "b"], ["ab"]), h.make_node("Add", ["ab", "b"], ["c"])],
        [h.make_opsetid("", 17)],
    )
    unused_fn = h.make_function(
        "local.fns", "Unused", ["a"], ["b"], [h.make_node("Neg", ["a"], ["b"])], [h.make_opsetid("", 17)]
    )
    hardmax = h.make_node("Hardmax", ["t"], ["hm"], name="hardmax", axis=0, doc_string="keeps its doc")
    hardmax.metadata_props.add(key="owner", value="team-a")
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("AddTwice", ["r", "b0"], ["t"], name="twice", domain="local.fns"),
        hardmax,
        h.make_node("Mul", ["hm", "t"], ["m"], name="mul"),
        h.make_node("Cast", ["m"], ["m16"], name="to_half", to=TensorProto.FLOAT16),
        h.make_node("Cast", ["m16"], ["y"], name="to_float", to=TensorProto.FLOAT),
    ]
    proto = make_model(
        nodes,
        [vi("x", [3, 2])],
        [vi("y", [3, 2])],
        [const("b0", [0.5, -0.25])],
        ir_version=8,
        opsets={"": 17, "local.fns": 1, "com.microsoft": 1, "ai.onnx.ml": 3},
        functions=[add_twice, unused_fn],
    )
    proto.metadata_props.add(key="author", value="hetero-cli tests")
    proto.producer_name = "test-producer"
    proto.model_version = 7
    onnx.checker.check_model(proto, full_check=True)
    return proto


RICH_AFFINITIES = {
    "relu": "OPENVINO",
    "twice": "CPU",
    "hardmax": "CPU",
    "mul": "OPENVINO",
    "to_half": "CPU",  # OpenVINO folds a float -> half -> float round trip: keep it on the CPU EP
    "to_float": "CPU",
}


def test_subgraph_models_keep_everything(capture):
    source = rich_model()
    compiled = compile_with(source, RICH_AFFINITIES)
    if HAS_OPENVINO:
        assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU", "OPENVINO", "CPU"]
    by_name = {n.name: n for n in source.graph.node}
    source_opsets = {(o.domain, o.version) for o in source.opset_import}
    for m in subgraph_models(compiled):
        check(m)
        assert m.ir_version == 8
        assert {(o.domain, o.version) for o in m.opset_import} == source_opsets
        assert [(f.domain, f.name) for f in m.functions] == [(f.domain, f.name) for f in source.functions]
        assert {p.key: p.value for p in m.metadata_props} == {"author": "hetero-cli tests"}
        for node in m.graph.node:
            original = by_name[node.name]
            assert list(node.attribute) == list(original.attribute)
            assert node.doc_string == original.doc_string
            assert node.domain == original.domain
            kept = {(p.key, p.value) for p in node.metadata_props}
            assert {(p.key, p.value) for p in original.metadata_props} <= kept
    x = seeded((3, 2))
    assert_same(compiled({"x": x}), ort_run(source, {"x": x}), exact=not HAS_OPENVINO)


def test_function_call_runs_in_its_subgraph(capture):
    compiled = compile_with(rich_model(), RICH_AFFINITIES)
    owner = [m for m in subgraph_models(compiled) if any(n.op_type == "AddTwice" for n in m.graph.node)]
    assert len(owner) == 1
    assert any(f.name == "AddTwice" for f in owner[0].functions)


def test_hardmax_attribute_survives_the_cut(capture):
    # axis=0 differs from Hardmax's default (-1): a lost attribute would change the result.
    source = rich_model()
    compiled = compile_with(source, RICH_AFFINITIES)
    x = np.array([[1.0, -1.0], [2.0, 3.0], [0.5, 0.25]], np.float32)
    assert_same(compiled({"x": x}), ort_run(source, {"x": x}), exact=not HAS_OPENVINO)


# --- If / Loop bodies reading the outer scope --------------------------------------------------------------


def if_model() -> onnx.ModelProto:
    then_g = h.make_graph(
        [h.make_node("Add", ["r", "w_then"], ["t_out"], name="then_add")], "then", [], [vi("t_out")]
    )
    else_g = h.make_graph(
        [h.make_node("Mul", ["r", "w_else"], ["e_out"], name="else_mul")], "else", [], [vi("e_out")]
    )
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("If", ["cond"], ["o"], name="branch", then_branch=then_g, else_branch=else_g),
        h.make_node("Neg", ["o"], ["y"], name="neg"),
    ]
    # w_then / w_else are used only inside the bodies; r is produced outside them, by another subgraph.
    return make_model(
        nodes,
        [vi("x"), vi("cond", [1], TensorProto.BOOL)],
        [vi("y")],
        [const("w_then", [10.0, 20.0]), const("w_else", [3.0, -3.0])],
    )


@pytest.mark.parametrize("place", ["if-on-cpu", pytest.param("if-on-openvino", marks=OPENVINO_ONLY)])
def test_if_body_gets_outer_scope_value_and_initializers(capture, place):
    source = if_model()
    if place == "if-on-cpu":
        affinities = {"relu": "OPENVINO", "branch": "CPU", "neg": "OPENVINO"}
    else:
        affinities = {"relu": "CPU", "branch": "OPENVINO", "neg": "CPU"}
    compiled = compile_with(source, affinities)
    branch = [s for s in compiled.subgraphs if "branch" in s.nodes]
    assert len(branch) == 1
    m = source_model(branch[0].session)
    check(m)
    if HAS_OPENVINO:
        assert "r" in [i.name for i in m.graph.input]
    assert {"w_then", "w_else"} <= {t.name for t in m.graph.initializer}
    for cond in (True, False):
        feeds = {"x": seeded((2,)), "cond": np.array([cond])}
        assert_same(compiled(feeds), ort_run(source, feeds), exact=not HAS_OPENVINO)


def loop_model(consumer: str | None) -> onnx.ModelProto:
    body = h.make_graph(
        [
            h.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
            h.make_node("Add", ["v_in", "r"], ["t"], name="body_add"),  # r: outer-scope value
            h.make_node("Mul", ["t", "step"], ["v_out"], name="body_mul"),  # step: outer initializer
        ],
        "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("v_in")],
        [vi("cond_out", [], TensorProto.BOOL), vi("v_out")],
    )
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Loop", ["trip", "", "x"], ["v" if consumer else "y"], name="loop", body=body),
    ]
    if consumer:
        nodes.append(h.make_node(consumer, ["v"], ["y"], name="after"))
    return make_model(
        nodes,
        [vi("x")],
        [vi("y")],
        [const("step", [0.5, 0.25]), const("trip", 3, np.int64)],
    )


def test_loop_body_gets_outer_scope_value_and_initializers(capture):
    source = loop_model(None)
    compiled = compile_with(source, {"relu": "OPENVINO", "loop": "CPU"})
    loop = [s for s in compiled.subgraphs if "loop" in s.nodes]
    assert len(loop) == 1
    m = source_model(loop[0].session)
    check(m)
    if HAS_OPENVINO:
        assert "r" in [i.name for i in m.graph.input]
    assert {"step", "trip"} <= {t.name for t in m.graph.initializer}
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(source, {"x": x}), exact=not HAS_OPENVINO)


@needs_openvino
def test_loop_output_crossing_devices_gives_checker_clean_models(capture):
    # onnx's shape inference leaves the Loop output's rank unknown; a graph input/output must still
    # carry a shape for onnx.checker (and a dynamic-rank input is what the OpenVINO EP cannot compile).
    source = loop_model("Sigmoid")
    compiled = compile_with(source, {"relu": "CPU", "loop": "CPU", "after": "OPENVINO"})
    assert [s.device for s in compiled.subgraphs] == ["CPU", "OPENVINO"]
    for m in subgraph_models(compiled):
        check(m)
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(source, {"x": x}), exact=False)
    assert compiled.subgraphs[1].fallback_nodes == []


# --- constants ----------------------------------------------------------------------------------------------


@needs_openvino
def test_shared_constant_is_copied_not_sent(capture):
    nodes = [
        h.make_node("Constant", [], ["k"], name="k_node", value=const("kv", [2.0, 3.0])),
        h.make_node("Mul", ["x", "k"], ["a0"], name="left"),
        h.make_node("Relu", ["a0"], ["a"], name="left_relu"),
        h.make_node("Hardmax", ["a"], ["b"], name="middle", axis=-1),
        h.make_node("Add", ["b", "k"], ["b1"], name="right"),
        h.make_node("Sigmoid", ["b1"], ["y"], name="right_sigmoid"),
    ]
    source = make_model(nodes, [vi("x")], [vi("y")])
    # THROUGHPUT: a session per subgraph, each from its exported model
    compiled = hc.Core().compile_model(source, "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU", "OPENVINO"]
    for s in compiled.subgraphs:
        assert "k" not in s.inputs
        assert "k" not in s.outputs
    readers = [m for m in subgraph_models(compiled) if any("k" in n.input for n in m.graph.node)]
    assert len(readers) == 2
    for m in readers:
        check(m)
        assert any(n.op_type == "Constant" for n in m.graph.node) or "k" in {
            t.name for t in m.graph.initializer
        }
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(source, {"x": x}), exact=False)


def test_a_training_mode_dropout_on_weights_is_one_tensor_drawn_each_run():
    """Dropout(W, ratio, training_mode=True) reads only initializers, yet draws a new mask each run: it
    was taken for a constant, so each subgraph reading it computed a mask of its own and its model output
    was computed once at compile time."""
    nodes = [
        h.make_node("Dropout", ["w", "ratio", "train"], ["d"], name="drop"),
        h.make_node("Add", ["x", "d"], ["a"], name="add"),
        h.make_node("Mul", ["x", "d"], ["b"], name="mul"),
    ]
    initializers = [
        const("w", np.ones((4, 64), np.float32)),
        const("ratio", np.float32(0.5)),
        const("train", True, np.bool_),
    ]
    proto = make_model(nodes, [vi("x", [4, 64])], [vi(n, [4, 64]) for n in "abd"], initializers)
    compiled = cpu_split(proto, ["A", "A", "B"])
    assert not any(n.is_constant for n in compiled.model.get_ops())
    request = compiled.create_infer_request()
    x = np.ones((4, 64), np.float32)
    first, second = dict(request.infer({"x": x})), request.infer({"x": x})
    for out in (first, second):
        assert np.array_equal(out["a"] - 1, out["d"]) and np.array_equal(out["b"], out["d"])
    assert not np.array_equal(first["d"], second["d"])  # 256 draws at 0.5: the same mask twice is 2**-256


def test_a_boundary_type_only_ort_knows_in_a_model_with_repeated_node_names():
    """com.microsoft Gelu's output type comes from an ORT session of the model, which refused the model's
    own repeated node names ('two nodes with same node name'): the session now names nodes uniquely."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="dup"),
        h.make_node("Gelu", ["r"], ["g"], name="dup", domain="com.microsoft"),
        h.make_node("Neg", ["g"], ["y"], name="neg"),
    ]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], opsets={"": 17, "com.microsoft": 1})
    model = hc.Core().read_model(proto)
    compiled = cpu_split(model, ["A", "A", "B"])
    unique = onnx.ModelProto()
    unique.CopyFrom(proto)
    unique.graph.node[1].name = "gelu"
    x = seeded((2, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(unique, {"x": x}))
