"""Export asks ONNX Runtime for the types onnx's inference cannot give (an ORT contrib op's outputs) once per
model, not once per subgraph: each such typing session is one more session over the whole model."""

from __future__ import annotations

import itertools

from onnx import helper as h
from support.helpers import assert_same, cpu_split, make_model, ort_run, seeded, vi

from hetero_cli.graph.model import Model
from hetero_cli.ort.session import TYPING, SessionRequest, observe_sessions


def gelu_chain(length: int = 6):
    """x -> Gelu (com.microsoft, unknown to onnx's inference: its outputs untyped) x length -> y."""
    names = ["x", *(f"g{i}" for i in range(length - 1)), "y"]
    nodes = [
        h.make_node("Gelu", [a], [b], name=f"gelu{i}", domain="com.microsoft")
        for i, (a, b) in enumerate(itertools.pairwise(names))
    ]
    return make_model(
        nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], opsets={"": 17, "com.microsoft": 1}, name="gelus"
    )


def test_a_split_asks_onnx_runtime_for_its_boundary_types_in_one_session():
    proto = gelu_chain()
    model = Model(proto)
    assert model.value_type("g0") is None  # onnx's inference knows no contrib op
    typing: list[SessionRequest] = []
    with observe_sessions(lambda request: request.purpose == TYPING and typing.append(request)):
        compiled = cpu_split(model)
    assert len(compiled.subgraphs) == 6
    assert len(typing) == 1
    x = seeded((2, 3))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))
