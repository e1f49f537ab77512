"""How many probe sessions a query creates where the EP cannot take the whole model: nodes a quirk record
refuses are left out before probing, and what is left is probed at once, not bisected node by node."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from support.helpers import assert_same, make_model, needs_openvino, optimized, ort_run, seeded, vi

import hetero_cli as hc
from hetero_cli.ort.session import PROBE, SessionRequest, observe_sessions
from hetero_cli.placement import query
from hetero_cli.placement.devices import lookup
from hetero_cli.placement.probes import cut_after

STEPS = 16


def constant(name: str, values, dtype=TensorProto.FLOAT, shape=(2,)) -> onnx.NodeProto:
    """A Constant node (as paddle2onnx writes every weight: Constant nodes, no initializers)."""
    return h.make_node(
        "Constant", [], [name], name=name, value=h.make_tensor(name, dtype, list(shape), values)
    )


def loop_model(second_loop: bool = False) -> onnx.ModelProto:
    """x -> STEPS x (Add a Constant, Relu) -> a Loop of 3 trips adding 1 (its body self-contained) -> Tanh;
    with ``second_loop``, then another such Loop and a Sigmoid.

    Every operand is a Constant node, all listed first: a probe of part of the model that hands a constant
    over as an output of its own is one the OpenVINO EP refuses (an initializer as a graph output)."""
    consts = [constant(f"k{i}", [0.1 * i, -0.2]) for i in range(STEPS)]
    consts += [
        constant("trips", [3], TensorProto.INT64, ()),
        constant("yes", [True], TensorProto.BOOL, ()),
    ]
    nodes, last = [], "x"
    for i in range(STEPS):
        nodes.append(h.make_node("Add", [last, f"k{i}"], [f"a{i}"], name=f"add{i}"))
        nodes.append(h.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"relu{i}"))
        last = f"r{i}"
    body = h.make_graph(
        [
            constant("one", [1.0, 1.0]),
            h.make_node("Add", ["v_in", "one"], ["v_out"], name="body_add"),
            h.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
        ],
        "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("v_in", [2])],
        [vi("cond_out", [], TensorProto.BOOL), vi("v_out", [2])],
    )
    nodes.append(h.make_node("Loop", ["trips", "yes", last], ["looped"], name="loop", body=body))
    nodes.append(h.make_node("Tanh", ["looped"], ["y"], name="tanh"))
    if second_loop:
        nodes[-1].output[0] = "t"
        nodes.append(h.make_node("Loop", ["trips", "yes", "t"], ["again"], name="loop2", body=body))
        nodes.append(h.make_node("Sigmoid", ["again"], ["y"], name="sigmoid"))
    return make_model([*consts, *nodes], [vi("x", [2])], [vi("y", [2])], name="loop_model")


def counting(created: list[SessionRequest]):
    return observe_sessions(lambda request: request.purpose == PROBE and created.append(request))


@needs_openvino
def test_a_refused_loop_leaves_the_rest_to_one_openvino_probe():
    model = hc.Core().read_model(loop_model())
    created: list[SessionRequest] = []
    with counting(created):
        claims = query.supported_nodes(model, lookup("OPENVINO"))
    ops = {n.friendly_name for n in model.get_ops() if not n.is_constant}
    assert claims == ops - {"loop"}
    assert len(created) == 1  # the rest of the model at once: nothing bisected


@needs_openvino
def test_a_model_with_a_loop_compiles_on_openvino_and_cpu_with_few_probes():
    proto = loop_model()
    created: list[SessionRequest] = []
    with counting(created):
        compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")
    # OpenVINO: one probe of what comes before the Loop, one of what comes after; the CPU: the Loop
    assert [d for d in (r.device for r in created)] == ["OPENVINO", "OPENVINO", "CPU"]
    placed = {s.nodes[-1]: s.device for s in compiled.subgraphs}
    assert placed == {"relu15": "OPENVINO", "loop": "CPU", "tanh": "OPENVINO"}
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


@needs_openvino
def test_the_probes_of_the_parts_a_loop_leaves_are_their_subgraphs_sessions():
    proto = loop_model()
    created: list[SessionRequest] = []
    with observe_sessions(created.append):
        compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")
    on_openvino = [s for s in compiled.subgraphs if s.device == "OPENVINO"]
    assert len(on_openvino) == 2 and all(s.from_probe for s in on_openvino)
    assert [r.purpose for r in created if r.device == "OPENVINO"] == [PROBE, PROBE]
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


@needs_openvino
def test_the_probe_of_the_loop_left_to_the_cpu_is_its_subgraphs_session():
    """What OpenVINO left is one connected piece (the Loop): the CPU's probe of it is created as its
    subgraph's session would be, and the compile uses it rather than creating that session again."""
    proto = loop_model()
    created: list[SessionRequest] = []
    with observe_sessions(created.append):
        compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")
    (on_cpu,) = [s for s in compiled.subgraphs if s.device == "CPU"]
    assert on_cpu.from_probe and on_cpu.subgraph.nodes[-1] == "loop"
    cpu = [r for r in created if r.device == "CPU"]
    assert [r.purpose for r in cpu] == [PROBE] and optimized(cpu[0])
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


@needs_openvino
def test_the_cpu_probe_of_pieces_apart_is_a_plain_one_and_the_compile_makes_their_sessions():
    """Two Loops with OpenVINO's nodes between them: what the CPU gets is two subgraphs, which one probe
    of both cannot serve; it is probed without ORT's optimizations (the cheaper session) and dropped."""
    proto = loop_model(second_loop=True)
    created: list[SessionRequest] = []
    with observe_sessions(created.append):
        compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")
    on_cpu = [s for s in compiled.subgraphs if s.device == "CPU"]
    assert [s.subgraph.nodes[-1] for s in on_cpu] == ["loop", "loop2"]
    assert not any(s.from_probe for s in on_cpu)
    probes = [r for r in created if r.device == "CPU" and r.purpose == PROBE]
    assert len(probes) == 1 and not optimized(probes[0])
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


def test_a_cut_after_left_out_nodes_gives_the_parts_before_and_after_them_in_connected_pieces():
    model = hc.Core().read_model(loop_model())
    ops = [n for n in model.get_ops() if not n.is_constant and n.friendly_name != "loop"]
    parts = cut_after(model, ops, {"loop"})
    assert [[n.friendly_name for n in p] for p in parts] == [
        [n.friendly_name for n in ops if n.friendly_name != "tanh"],
        ["tanh"],
    ]
    # two chains that share no tensor are two pieces, each in model order
    apart = [n for n in ops if n.friendly_name in ("add0", "relu0", "add2")]
    assert [[n.friendly_name for n in p] for p in cut_after(model, apart, {"loop"})] == [
        ["add0", "relu0"],
        ["add2"],
    ]


@needs_openvino
def test_a_failing_probe_is_bisected_over_the_models_operations_not_its_constants():
    """Where the whole-model probe fails for a reason no record knows (here: every probe holding tanh is
    refused), the halves are cut among the operations; constants come along with their readers."""
    model = hc.Core().read_model(loop_model())
    created: list[SessionRequest] = []

    def refuse_tanh(request: SessionRequest) -> None:
        created.append(request)
        graph = onnx.load_from_string(request.model).graph if isinstance(request.model, bytes) else None
        if graph is None or any(n.op_type == "Tanh" for n in graph.node):
            raise RuntimeError("refused for the test")

    with observe_sessions(refuse_tanh):
        claims = query.supported_nodes(model, lookup("OPENVINO"))
    ops = [n for n in model.get_ops() if not n.is_constant]
    assert claims == {n.friendly_name for n in ops} - {"loop", "tanh"}
    # one probe of the rest, then halves down to tanh alone: twice the depth of a bisection of the operations
    assert len(created) <= 2 + 2 * int(np.ceil(np.log2(len(ops))))


@needs_openvino
def test_the_cpu_is_asked_only_about_the_nodes_openvino_left():
    """The CPU EP picks kernels by op and type alone: after OpenVINO claimed all but the Loop, the CPU's
    probe is of the Loop (a model of one node), not of the whole model again."""
    model = hc.Core().read_model(loop_model())
    created: list[SessionRequest] = []
    with counting(created):
        affinities = query.greedy(model, [lookup("OPENVINO"), lookup("CPU")])
    assert affinities["loop"] == "CPU" and affinities["tanh"] == "OPENVINO"
    cpu = [r for r in created if r.device == "CPU"]
    assert len(cpu) == 1
    probed = onnx.load_from_string(cpu[0].model).graph.node
    assert [n.op_type for n in probed if n.op_type != "Constant"] == ["Loop"]
