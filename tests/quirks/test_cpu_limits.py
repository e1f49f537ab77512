"""The quirks of ONNX Runtime itself and its CPU EP (hetero_cli/quirks/cpu.py, docs/limits.md), reproduced in
plain ONNX Runtime: if one of these starts failing, ORT changed; the quirk's workaround may go."""

from __future__ import annotations

import onnxruntime as ort
from onnx import TensorProto
from onnx import helper as h
from support.helpers import make_model, vi


def test_a_float16_node_run_through_casts_is_missing_from_the_record():
    """Sin has no float16 kernel on the CPU EP: ORT runs it through Casts it inserts, and its record of
    placements leaves it out; Sign, which has one, is in it."""
    for op, recorded in (("Sign", True), ("Sin", False)):
        nodes = [h.make_node(op, ["x"], ["y"], name="node")]
        proto = make_model(nodes, [vi("x", [2], TensorProto.FLOAT16)], [vi("y", [2], TensorProto.FLOAT16)])
        so = ort.SessionOptions()
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        session = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        placed = [n.name for sg in session.get_provider_graph_assignment_info() for n in sg.get_nodes()]
        assert ("node" in placed) is recorded, op
