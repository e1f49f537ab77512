"""A subgraph left with nothing to hand on (issue 29): where every tensor a group of nodes makes is a
static shape value its readers hold, or is read only by such nodes, the group is folded (Plan.folded): no
session runs it. Before, it stayed in the plan with no outputs and ONNX Runtime refused to run it ("At
least one output should be requested"), which HETERO_FALLBACK blamed on every device.
"""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import helper as h
from placement.test_visualize import needs_dot
from support.graphs import PLAN_ONLY, WITH_SESSIONS, check_plan
from support.helpers import assert_same, const, cpu_split, make_model, needs_openvino, ort_run, seeded, vi
from support.onnx_cases import node_case
from support.shape_chains import cuts, shape_chains, zero_out_model

import hetero_cli as hc
from hetero_cli.graph import Model
from hetero_cli.placement.partition import Subgraph, partition
from hetero_cli.placement.visualize import dump, subgraphs_dot

ZERO_OUT = ["A", "A", "B", "B", "A", "A", "A"]  # concat and shape apart, as the issue's --affinity put them
X = seeded((2, 3))


def test_a_group_that_feeds_only_a_shape_value_runs_no_session():
    proto = zero_out_model()
    compiled = cpu_split(proto, ZERO_OUT)
    plan = compiled.plan
    # concat and shape make c (shape's alone) and a static shape value; sum and unsq then feed only them
    assert plan.folded == ("sum", "unsq", "concat", "shape")
    assert [(s.device, s.nodes, s.fixed) for s in plan.subgraphs] == [
        ("A", ("gather", "cast", "mul"), ("shp",))
    ]
    assert plan.to_dict()["folded"] == ["sum", "unsq", "concat", "shape"]
    assert "folded (only feed static shape values, no session): ['sum', 'unsq', 'concat', 'shape']" in str(
        plan
    )
    check_plan(Model(proto), plan, dict(zip(plan.affinities, ZERO_OUT, strict=True)))
    assert_same(compiled({"x": X}), ort_run(proto, {"x": X}))


def test_the_neighbours_a_folded_group_kept_apart_join_again():
    # relu, then concat and shape on B, then gather, cast, mul: relu's group and mul's were cut in two
    # around B's (a cycle A -> B -> A); with B's folded they are one subgraph again
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Concat", ["r", "r"], ["c"], name="concat", axis=0),
        h.make_node("Shape", ["c"], ["shp"], name="shape"),
        h.make_node("Gather", ["shp", "zero"], ["g"], name="gather", axis=0),
        h.make_node("Cast", ["g"], ["gf"], name="cast", to=1),
        h.make_node("Mul", ["r", "gf"], ["y"], name="mul"),
    ]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], [const("zero", 0, np.int64)])
    devices = ["A", "B", "B", "A", "A", "A"]
    compiled = cpu_split(proto, devices)
    assert compiled.plan.folded == ("concat", "shape")
    assert [s.nodes for s in compiled.plan.subgraphs] == [("relu", "gather", "cast", "mul")]
    check_plan(Model(proto), compiled.plan, dict(zip(compiled.plan.affinities, devices, strict=True)))
    assert_same(compiled({"x": X}), ort_run(proto, {"x": X}))


def test_a_tensor_only_folded_nodes_read_is_handed_on_to_no_one_after_the_groups_join():
    # relu's group and gather's join once concat and shape are folded; a, which only concat read, is no
    # dead end of the model to keep observable: the joined subgraph hands on only the dead end m
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Abs", ["r"], ["a"], name="abs"),
        h.make_node("Concat", ["a", "a"], ["c"], name="concat", axis=0),
        h.make_node("Shape", ["c"], ["shp"], name="shape"),
        h.make_node("Gather", ["shp", "zero"], ["g"], name="gather", axis=0),
        h.make_node("Cast", ["g"], ["gf"], name="cast", to=1),
        h.make_node("Mul", ["r", "gf"], ["m"], name="mul"),
        h.make_node("Neg", ["x"], ["y"], name="neg"),
    ]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], [const("zero", 0, np.int64)])
    devices = ["A", "A", "B", "B", "A", "A", "A", "B"]
    compiled = cpu_split(proto, devices)
    assert compiled.plan.folded == ("concat", "shape")
    assert [(s.nodes, s.outputs) for s in compiled.plan.subgraphs] == [
        (("relu", "abs", "gather", "cast", "mul"), ("m",)),
        (("neg",), ("y",)),
    ]
    check_plan(Model(proto), compiled.plan, dict(zip(compiled.plan.affinities, devices, strict=True)))
    assert_same(compiled({"x": X}), ort_run(proto, {"x": X}))


def test_a_group_making_a_model_output_is_never_folded():
    # a copy of c is an output of the model too: concat's group hands it on, and sum's group c's input
    proto = zero_out_model()
    proto.graph.node.insert(4, h.make_node("Identity", ["c"], ["c_out"], name="copy"))
    proto.graph.output.append(vi("c_out", [4]))
    compiled = cpu_split(proto, [*ZERO_OUT[:4], "B", *ZERO_OUT[4:]])
    assert compiled.plan.folded == ()
    assert [s.outputs for s in compiled.plan.subgraphs] == [("u",), ("c_out",), ("y",)]
    assert compiled.plan.subgraphs[2].fixed == ("shp",)  # the shape value is still held, not handed on
    assert_same(compiled({"x": X}), ort_run(proto, {"x": X}))


def test_a_subgraph_with_nothing_to_hand_on_is_refused_as_the_plans_own_defect():
    with pytest.raises(AssertionError, match="internal error: subgraph2 of the plan hands no tensor on"):
        Subgraph(index=1, device="CPU", nodes=("n",), constant_nodes=(), inputs=("x",), outputs=())


def test_the_subgraphs_dot_draws_the_folded_nodes_apart_with_no_session():
    proto = zero_out_model()
    model = Model(proto)
    plan = partition(
        model, dict(zip([n.get_friendly_name() for n in model.get_ops()], ZERO_OUT, strict=True))
    )
    dot = subgraphs_dot(model, plan)
    assert 'label="folded: no session (they only feed static shape values)"' in dot
    for name in ("sum", "unsq", "concat", "shape"):
        assert f'"op:{name}" [label="{name}\\n' in dot and f"{name}@" not in dot
    assert dot.count('\\nfolded"') == 4
    # the value subgraph1 holds is drawn from where it comes from, dashed
    assert '"op:shape" -> "value:shp@subgraph1" [label="shp", style=dashed];' in dot


@needs_dot
def test_the_folded_nodes_render(tmp_path):
    model = Model(zero_out_model())
    plan = partition(
        model, dict(zip([n.get_friendly_name() for n in model.get_ops()], ZERO_OUT, strict=True))
    )
    for path in dump(model, plan, tmp_path):
        result = subprocess.run(["dot", "-Tsvg", str(path), "-o", os.devnull], capture_output=True, text=True)
        assert result.returncode == 0 and "Warning" not in result.stderr, result.stderr


@needs_openvino
@pytest.mark.parametrize("fallback", ["YES", "NO"])
def test_the_issues_split_on_openvino_compiles_and_runs_without_blaming_a_device(fallback, caplog):
    proto = zero_out_model()
    model = hc.Core().read_model(proto.SerializeToString())
    devices = {"concat": "OPENVINO", "shape": "OPENVINO"}
    model.set_affinities(
        {n.get_friendly_name(): devices.get(n.get_friendly_name(), "CPU") for n in model.get_ops()}
    )
    compiled = hc.Core().compile_model(model, "HETERO:CPU,OPENVINO", {"HETERO_FALLBACK": fallback})
    assert compiled.plan.folded == ("sum", "unsq", "concat", "shape")
    assert [s.device for s in compiled.subgraphs] == ["CPU"]
    assert_same(compiled({"x": X}), ort_run(proto, {"x": X}))
    assert not compiled.moves
    assert "HETERO_FALLBACK" not in caplog.text


@PLAN_ONLY
@given(shape_chains())
def test_every_cut_of_a_shape_chain_plans_subgraphs_that_each_hand_something_on(chain):
    model = Model(chain.model)
    names = [n.get_friendly_name() for n in model.get_ops()]
    for devices in cuts(len(names)):
        affinities = dict(zip(names, devices, strict=True))
        check_plan(model, partition(model, affinities), affinities)  # each subgraph has outputs, ...


@WITH_SESSIONS
@given(chain=shape_chains(), data=st.data())
def test_a_shape_chain_split_anywhere_gives_the_models_results(chain, data):
    devices = data.draw(st.lists(st.sampled_from("AB"), min_size=len(chain.names), max_size=len(chain.names)))
    compiled = cpu_split(chain.model, devices)
    assert all(s.outputs for s in compiled.plan.subgraphs)
    assert_same(compiled(chain.feeds), ort_run(chain.model, chain.feeds), exact=False)


def test_async_requests_run_the_plan_without_the_folded_nodes():
    proto = zero_out_model()
    compiled = cpu_split(proto, ZERO_OUT)
    queue = hc.AsyncInferQueue(compiled, jobs=2)
    got: dict[int, dict] = {}
    queue.set_callback(lambda request, k: got.__setitem__(k, dict(request.results)))
    inputs = [seeded((k + 1, 3), seed=k) for k in range(4)]
    for k, x in enumerate(inputs):
        queue.start_async({"x": x}, userdata=k)
    queue.wait_all()
    for k, x in enumerate(inputs):
        assert_same(got[k], ort_run(proto, {"x": x}))


@pytest.mark.parametrize(
    "name",
    [
        "test_affine_grid_2d_expanded",
        "test_affine_grid_2d_align_corners_expanded",
        "test_affine_grid_3d_expanded",
    ],
)
def test_an_if_whose_condition_a_subgraph_holds_still_runs_as_in_one_session(name):
    """onnx's AffineGrid body: an If on Size(size) == 4, whose branches hand Range one-element vectors. Split
    node by node, the subgraphs hold the folded condition; ORT would inline the If on a constant one and then
    refuse the Range (quirk cpu-folded-if-range-scalars): the split compiles and gives onnx's expected grid,
    as one ORT session does."""
    proto, feeds, (expected,) = node_case(name)
    compiled = cpu_split(proto)
    assert any(s.fixed for s in compiled.plan.subgraphs)  # the split holds a folded value
    got = dict(compiled.create_infer_request().infer(feeds))
    assert_same(got, ort_run(proto, feeds))
    np.testing.assert_allclose(got[proto.graph.output[0].name], expected, rtol=1e-5, atol=1e-6)
