"""The quirks of ONNX Runtime itself and its CPU EP (hetero_cli/quirks/cpu.py, docs/limits.md), reproduced in
plain ONNX Runtime: each asserts the defect on a release the record affects and the fixed behaviour on a
fixed one (its ``fixed_in``); if one starts failing, ORT changed and the record needs another look."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import make_model, needs_openvino, vi
from support.quirk_sides import defect_raises, expect

import hetero_cli as hc
from hetero_cli.ort.session import PROBE, observe_sessions
from hetero_cli.quirks.cpu import FOLDED_IF_RANGE_SCALARS, HALF_FLOAT_CASTS_UNRECORDED


def test_a_float16_node_run_through_casts_is_recorded_only_where_fixed():
    """Sin has no float16 kernel on the CPU EP: ORT runs it through Casts it inserts, and before 1.27.0 its
    record of placements leaves it out; Sign, which has one, is in it on every release."""
    for op, recorded in (("Sign", True), ("Sin", expect(HALF_FLOAT_CASTS_UNRECORDED, False, True))):
        nodes = [h.make_node(op, ["x"], ["y"], name="node")]
        proto = make_model(nodes, [vi("x", [2], TensorProto.FLOAT16)], [vi("y", [2], TensorProto.FLOAT16)])
        so = ort.SessionOptions()
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        session = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        placed = [n.name for sg in session.get_provider_graph_assignment_info() for n in sg.get_nodes()]
        assert ("node" in placed) is recorded, op


def half_float_hardmax_model():
    """Relu -> EyeLike(float16) -> Hardmax -> Cast -> Add: the Hardmax runs on CPU through inserted Casts."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("EyeLike", ["r"], ["e"], name="eye", dtype=TensorProto.FLOAT16),
        h.make_node("Hardmax", ["e"], ["hm"], name="hardmax"),
        h.make_node("Cast", ["hm"], ["hf"], name="cast", to=TensorProto.FLOAT),
        h.make_node("Add", ["hf", "r"], ["y"], name="add"),
    ]
    return make_model(nodes, [vi("x", [4, 4])], [vi("y", [4, 4])])


@pytest.mark.parametrize(("version", "affected"), [("1.24.1", True), ("1.26.0", True), ("1.27.0", False)])
def test_the_half_float_record_affects_the_releases_before_its_fix(version, affected):
    assert HALF_FLOAT_CASTS_UNRECORDED.affects(version) is affected


@needs_openvino
def test_the_half_float_workaround_acts_only_on_an_affected_release(monkeypatch):
    """A half-float model whose Hardmax (no float16 kernel on the CPU EP) ORT runs through Casts: on an
    affected release the query asks the exact probe (optimizations off) where the record misses nodes; on
    a fixed release it reads the optimized probe's record as it is. (The record misses the node only where
    the installed release really has the defect: only there does the affected case need the exact probe.)"""
    import hetero_cli.quirks as quirks

    misses = expect(HALF_FLOAT_CASTS_UNRECORDED, True, False)  # the installed release, before patching
    for version, exact in (("1.24.1", misses), ("1.32.0", False)):
        monkeypatch.setattr(quirks, "installed_release", lambda v=version: v)
        levels = []

        def seen(request, levels=levels):
            if request.purpose == PROBE and request.subject == "OPENVINO":
                levels.append(request.options.graph_optimization_level)

        with observe_sessions(seen):
            hc.Core().query_model(half_float_hardmax_model(), "HETERO:OPENVINO,CPU")
        assert (ort.GraphOptimizationLevel.ORT_DISABLE_ALL in levels) is exact, version


def if_range_model(condition: onnx.TensorProto | None):
    """If (both branches a one-element vector: 5 or 2) -> Range(0, it, 1), as ONNX's AffineGrid function
    body hands Range its sizes; the condition a constant (``condition``) or the model's input."""

    def branch(name: str, value: int) -> onnx.GraphProto:
        made = h.make_node("Constant", [], [name], value=h.make_tensor(name, TensorProto.INT64, [1], [value]))
        return h.make_graph([made], name, [], [vi(name, [1], TensorProto.INT64)])

    nodes = [
        h.make_node("If", ["cond"], ["w"], then_branch=branch("then", 5), else_branch=branch("else", 2)),
        h.make_node("Range", ["zero", "w", "one"], ["r"], name="range"),
    ]
    inits = [
        h.make_tensor("zero", TensorProto.INT64, [], [0]),
        h.make_tensor("one", TensorProto.INT64, [], [1]),
    ]
    inputs = [] if condition is not None else [vi("cond", [], TensorProto.BOOL)]
    return make_model(
        nodes, inputs, [vi("r", None, TensorProto.INT64)], inits + ([condition] if condition else [])
    )


def test_a_constant_if_condition_breaks_a_range_of_one_element_vectors():
    """Range's kernel takes a one-element vector: with the If's condition an input, ORT runs the model; with
    it a constant, ORT's optimizer inlines the branch and Range's shape inference refuses the session
    (with graph optimizations off, it loads and runs)."""
    given = ort.InferenceSession(if_range_model(None).SerializeToString(), providers=["CPUExecutionProvider"])
    assert given.run(None, {"cond": np.array(True)})[0].tolist() == [0, 1, 2, 3, 4]
    constant = if_range_model(h.make_tensor("cond", TensorProto.BOOL, [], [True])).SerializeToString()
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(constant, plain, providers=["CPUExecutionProvider"])
    assert session.run(None, {})[0].tolist() == [0, 1, 2, 3, 4]
    with defect_raises(FOLDED_IF_RANGE_SCALARS, "should be scalars"):
        session = ort.InferenceSession(constant, providers=["CPUExecutionProvider"])
        assert session.run(None, {})[0].tolist() == [0, 1, 2, 3, 4]
