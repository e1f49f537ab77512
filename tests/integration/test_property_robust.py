"""Issue 5, property tests: random graphs with control flow (If, Loop, Scan, an If nested in a Loop) and
dynamic dimensions, split at random, checked against one whole-model ONNX Runtime session.

The generator here is small and separate from tests/support/graphs.py (whose random DAGs tests/placement/test_partition_property.py
uses; only its IR and opset versions are shared). Every tensor of the main graph is [batch, 4] with a
symbolic ``batch``; bodies read main-graph values (one or two scopes up) and main-graph initializers.
Each compiled model runs at two batch sizes, one after the other.

ORT's OpenVINO EP cannot compile a Loop or Scan whose body reads outer-scope names (tests/runtime/test_control_flow.py),
so random placements keep those two on CPU; every other node goes anywhere. It also fails to compile some
If nodes it claims: a clear CompileError for that subgraph, which the test accepts there and only there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.graphs import IR_VERSION, OPSET
from support.helpers import SPLIT, SPLIT_DEVICES, SPLIT_TOLERANCE, ort_run

import hetero_cli as hc
from hetero_cli.graph.model import Model
from hetero_cli.placement.partition import partition

FLOAT, BOOL, INT64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64
WIDTH = 4
DEVICES = SPLIT_DEVICES
CPU_ONLY = frozenset({"Loop", "Scan"})
UNARY = ("Relu", "Neg", "Tanh", "Sigmoid", "Abs")
BINARY = ("Add", "Mul", "Sub")


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@dataclass
class _Graph:
    """One scope being built: its nodes, initializers and the [batch, WIDTH] values it can read."""

    prefix: str
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    counter: int = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{self.prefix}{stem}{self.counter}"


class _Builder:
    def __init__(self, draw):
        self.draw = draw
        self.initializers: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(draw(st.integers(0, 2**16)))
        self.kinds: set[str] = set()

    def init(self, name: str, value) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, g: _Graph) -> str:
        """A fresh [WIDTH] float initializer of the main graph (bodies read it from two scopes up too)."""
        return self.init(g.fresh("k"), (self.rng.uniform(-1, 1, WIDTH)).astype(np.float32))

    def pick(self, pools: list[list[str]]) -> str:
        return self.draw(st.sampled_from([v for pool in pools for v in pool]))

    # --- ops on [batch, WIDTH] values; ``outer`` are the values of enclosing scopes ----------------------

    def simple(self, g: _Graph, outer: list[list[str]], main: _Graph) -> str:
        if self.draw(st.booleans()):
            op, ins = self.draw(st.sampled_from(UNARY)), [self.pick([g.values, *outer])]
        else:
            op = self.draw(st.sampled_from(BINARY))
            other = self.draw(st.sampled_from(["value", "weight"]))
            rhs = self.pick([g.values, *outer]) if other == "value" else self.weight(main)
            ins = [self.pick([g.values, *outer]), rhs]
        out = g.fresh("t")
        g.nodes.append(h.make_node(op, ins, [out], name=g.fresh(op.lower())))
        if op == "Mul":  # keep magnitudes bounded through chains of products
            tamed = g.fresh("t")
            g.nodes.append(h.make_node("Tanh", [out], [tamed], name=g.fresh("tame")))
            out = tamed
        g.values.append(out)
        return out

    def branch(self, name: str, outer: list[list[str]], main: _Graph, depth: int) -> onnx.GraphProto:
        body = _Graph(f"{name}_")
        for _ in range(self.draw(st.integers(1, 3))):
            self.step(body, outer, main, depth)
        result = body.values[-1] if body.values else self.simple(body, outer, main)
        out = body.fresh("out")
        body.nodes.append(h.make_node("Identity", [result], [out], name=body.fresh("ret")))
        return h.make_graph(body.nodes, name, [], [h.make_tensor_value_info(out, FLOAT, ["batch", WIDTH])])

    def if_node(self, g: _Graph, outer: list[list[str]], main: _Graph, depth: int) -> str:
        self.kinds.add("If")
        source = self.pick([g.values, *outer])
        total, cond = g.fresh("sum"), g.fresh("cond")
        g.nodes += [
            h.make_node("ReduceSum", [source], [total], name=g.fresh("reduce"), keepdims=0),
            h.make_node("Greater", [total, self.zero], [cond], name=g.fresh("greater")),
        ]
        scopes = [g.values, *outer]
        then_g = self.branch(g.fresh("then"), scopes, main, depth + 1)
        else_g = self.branch(g.fresh("else"), scopes, main, depth + 1)
        out = g.fresh("if_out")
        g.nodes.append(
            h.make_node("If", [cond], [out], name=g.fresh("if"), then_branch=then_g, else_branch=else_g)
        )
        g.values.append(out)
        return out

    def loop_node(self, g: _Graph, outer: list[list[str]], main: _Graph, depth: int) -> str:
        self.kinds.add("Loop")
        name = g.fresh("loop_body")
        body = _Graph(f"{name}_", values=[f"{name}_v_in"])
        scopes = [g.values, *outer]
        for _ in range(self.draw(st.integers(1, 3))):
            self.step(body, scopes, main, depth + 1)
        last = body.values[-1]
        v_out, cond_out = body.fresh("v_out"), body.fresh("cond_out")
        body.nodes += [
            h.make_node("Tanh", [last], [v_out], name=body.fresh("squash")),
            h.make_node("Identity", [f"{name}_cond_in"], [cond_out], name=body.fresh("keep")),
        ]
        graph = h.make_graph(
            body.nodes,
            name,
            [
                h.make_tensor_value_info(f"{name}_i", INT64, []),
                h.make_tensor_value_info(f"{name}_cond_in", BOOL, []),
                h.make_tensor_value_info(f"{name}_v_in", FLOAT, ["batch", WIDTH]),
            ],
            [
                h.make_tensor_value_info(cond_out, BOOL, []),
                h.make_tensor_value_info(v_out, FLOAT, ["batch", WIDTH]),
            ],
        )
        trips = self.init(g.fresh("trips"), np.array(self.draw(st.integers(1, 3)), np.int64))
        out = g.fresh("loop_out")
        start = self.pick([g.values, *outer])
        g.nodes.append(h.make_node("Loop", [trips, self.yes, start], [out], name=g.fresh("loop"), body=graph))
        g.values.append(out)
        return out

    def scan_node(self, g: _Graph, outer: list[list[str]], main: _Graph) -> str:
        """Scan over the batch rows: state += row * k (k an outer initializer), rows out scaled by an
        outer [WIDTH] value computed in this scope."""
        self.kinds.add("Scan")
        name = g.fresh("scan_body")
        k = self.weight(main)
        scale = g.fresh("colmean")
        g.nodes.append(
            h.make_node(
                "ReduceMean",
                [self.pick([g.values, *outer])],
                [scale],
                name=g.fresh("mean"),
                keepdims=0,
                axes=[0],
            )
            if OPSET < 18
            else h.make_node(
                "ReduceMean",
                [self.pick([g.values, *outer]), self.axis0],
                [scale],
                name=g.fresh("mean"),
                keepdims=0,
            )
        )
        body = h.make_graph(
            [
                h.make_node("Mul", [f"{name}_row", k], [f"{name}_rk"], name=f"{name}_mul"),
                h.make_node("Add", [f"{name}_s_in", f"{name}_rk"], [f"{name}_s_sum"], name=f"{name}_add"),
                h.make_node("Tanh", [f"{name}_s_sum"], [f"{name}_s_out"], name=f"{name}_tanh"),
                h.make_node("Mul", [f"{name}_s_out", scale], [f"{name}_row_out"], name=f"{name}_scale"),
            ],
            name,
            [
                h.make_tensor_value_info(f"{name}_s_in", FLOAT, [WIDTH]),
                h.make_tensor_value_info(f"{name}_row", FLOAT, [WIDTH]),
            ],
            [
                h.make_tensor_value_info(f"{name}_s_out", FLOAT, [WIDTH]),
                h.make_tensor_value_info(f"{name}_row_out", FLOAT, [WIDTH]),
            ],
        )
        state, rows = g.fresh("state"), g.fresh("rows")
        g.nodes.append(
            h.make_node(
                "Scan",
                [self.zeros, self.pick([g.values, *outer])],
                [state, rows],
                name=g.fresh("scan"),
                body=body,
                num_scan_inputs=1,
            )
        )
        g.values.append(rows)
        return rows

    def step(self, g: _Graph, outer: list[list[str]], main: _Graph, depth: int) -> None:
        menu = ["simple", "simple", "simple"]
        if depth < 2:
            menu += ["if", "loop"]
        if depth == 0:
            menu += ["scan"]
        kind = self.draw(st.sampled_from(menu))
        if kind == "if":
            self.if_node(g, outer, main, depth)
        elif kind == "loop":
            self.loop_node(g, outer, main, depth)
        elif kind == "scan":
            self.scan_node(g, outer, main)
        else:
            self.simple(g, outer, main)


@dataclass
class Case:
    model: onnx.ModelProto
    placement: dict[str, str]  # by node name
    kinds: frozenset[str]
    control_flow_on_cpu: bool  # every If, Loop and Scan placed on CPU (the rest anywhere)


@st.composite
def control_flow_cases(draw, max_steps: int = 6) -> Case:
    b = _Builder(draw)
    main = _Graph("", values=["x"])
    b.zero = b.init("zero", np.array(0.0, np.float32))
    b.yes = b.init("yes", np.array(True))
    b.zeros = b.init("zeros", np.zeros(WIDTH, np.float32))
    b.axis0 = b.init("axis0", np.array([0], np.int64))
    if draw(st.booleans()):
        main.values.append("x2")
    for _ in range(draw(st.integers(1, max_steps))):
        b.step(main, [], main, 0)
    if not b.kinds:
        b.if_node(main, [], main, 0) if draw(st.booleans()) else b.loop_node(main, [], main, 0)
    read = {i for n in main.nodes for i in n.input}
    outputs = [v for v in main.values if v not in read and v not in ("x", "x2")] or [main.values[-1]]
    inputs = [h.make_tensor_value_info(v, FLOAT, ["batch", WIDTH]) for v in ("x", "x2") if v in main.values]
    unused = [i for i in inputs if i.name not in read and i.name not in outputs]
    for i in unused:  # every input is read: ORT would drop it from the session otherwise
        out = main.fresh("t")
        main.nodes.append(h.make_node("Relu", [i.name], [out], name=main.fresh("use")))
        outputs.append(out)
    graph = h.make_graph(
        main.nodes,
        "control_flow",
        inputs,
        [h.make_tensor_value_info(o, FLOAT, ["batch", WIDTH]) for o in dict.fromkeys(outputs)],
        b.initializers,
    )
    model = h.make_model(graph, ir_version=IR_VERSION, opset_imports=[h.make_opsetid("", OPSET)])
    on_cpu = CPU_ONLY | ({"If"} if (cf_on_cpu := draw(st.booleans())) else set())
    placement = {
        n.name: "CPU" if n.op_type in on_cpu else draw(st.sampled_from(DEVICES)) for n in model.graph.node
    }
    return Case(model, placement, frozenset(b.kinds), cf_on_cpu)


def feeds(model: onnx.ModelProto, batch: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.uniform(-1, 1, (batch, WIDTH)).astype(np.float32) for i in model.graph.input}


def check(got, want) -> None:
    assert list(got) == list(want)
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, err_msg=name, **SPLIT_TOLERANCE)


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.ERROR, logger="hetero_cli")


# --- plan only: many examples, no session ------------------------------------------------------------------


@fuzz(150)
@given(control_flow_cases(max_steps=8))
def test_plans_of_control_flow_graphs_are_sound(case: Case):
    onnx.checker.check_model(case.model)
    model = Model(case.model)
    affinities = {n.get_friendly_name(): case.placement[n.proto.name] for n in model.get_ops()}
    plan = partition(model, affinities)
    owned = [n for s in plan.subgraphs for n in s.nodes]
    active = [n.get_friendly_name() for n in model.get_ops() if not n.is_constant]
    assert sorted(owned) == sorted(active)  # every node in exactly one subgraph
    available = set(model.input_names)
    for s in plan.subgraphs:
        assert all(affinities[n] == s.device for n in s.nodes)
        produced = {t for n in (*s.constant_nodes, *s.nodes) for t in model.node(n).outputs}
        for name in s.nodes:
            # what a node reads, its bodies' outer-scope reads included, is made here, constant, or an input
            for t in model.node(name).inputs:
                assert t in produced or model.is_constant(t) or t in s.inputs, (s.name, name, t)
        assert all(t in available for t in s.inputs), (s.name, s.inputs)  # made by an earlier subgraph
        available.update(s.outputs)
    assert set(plan.output_sources) == set(model.output_names)


# --- full runs ---------------------------------------------------------------------------------------------


@fuzz(30)
@given(control_flow_cases(max_steps=5), st.integers(1, 4), st.integers(5, 7))
def test_random_splits_of_control_flow_graphs_give_the_whole_models_result(case: Case, small, large):
    model = hc.Core().read_model(case.model)
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = case.placement[node.proto.name]
    try:
        compiled = hc.Core().compile_model(model, SPLIT)
    except hc.CompileError as err:
        # ORT's OpenVINO EP claims some If nodes it then fails to compile ("OpenVINO does not support the
        # following ONNX operations: com.intel.ai.OpenVINO-EP-subgraph_N"): a clear error, only ever there
        plan = hc.Core().plan(model, SPLIT)
        failed = next(s for s in plan.subgraphs if str(err).startswith(f"{s.name} "))
        assert not case.control_flow_on_cpu, err
        assert failed.device == "OPENVINO", err
        assert any(model.node(n).get_type_name() == "If" for n in failed.nodes), err
        event("refused: an If the OpenVINO EP claims but cannot compile")
        return
    event(f"ran: {len(compiled.subgraphs)} subgraph(s), {'+'.join(sorted(case.kinds))}")
    request = compiled.create_infer_request()
    for seed, batch in enumerate((small, large, small)):
        f = feeds(case.model, batch, seed)
        check(request.infer(f), ort_run(case.model, f))


@fuzz(10)
@given(control_flow_cases(max_steps=5), st.integers(1, 6))
def test_automatic_mode_on_control_flow_graphs(case: Case, batch):
    # ORT 1.24's OpenVINO EP aborts the process on a Loop whose body holds an If: the query must not probe it
    compiled = hc.Core().compile_model(case.model, SPLIT)
    f = feeds(case.model, batch, 7)
    check(compiled(f), ort_run(case.model, f))
