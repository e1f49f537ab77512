"""HETERO_FALLBACK on a model nobody here wrote: PaddleOCR's text-direction classifier (rapidocr-onnxruntime's
wheel) split by hand, its head (Concat -> Reshape -> MatMul -> Add -> Softmax) on OPENVINO and the rest on CPU.
The OpenVINO EP feeds that head's two inputs in the wrong order (quirk openvino-input-order): the first
inference fails without fallback, and gives the whole model's outputs with it."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from support.helpers import needs_openvino, reference
from support.pypi_models import fetch

import hetero_cli as hc

pytestmark = pytest.mark.slow
HEAD = {"Concat@0", "Reshape@18", "MatMul@0", "Add@43", "Softmax@0", "Identity@0"}


def _split(path) -> hc.Model:
    model = hc.Core().read_model(str(path))
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = "OPENVINO" if node.get_friendly_name() in HEAD else "CPU"
    return model


@needs_openvino
def test_the_classifier_head_moves_to_cpu_at_its_first_inference(caplog):
    path = fetch("ppocr_cls")
    x = np.random.default_rng(0).random((2, 3, 48, 192), dtype=np.float32)
    want = reference(onnx.load(path), {"x": x})
    core = hc.Core()
    off = core.compile_model(_split(path), "HETERO:OPENVINO,CPU")
    assert off.subgraphs[1].inputs == ("Cast@1", "pool2d_10.tmp_0")  # the int64 piece first
    with pytest.raises(
        hc.InferenceError, match=r"subgraph2 on OPENVINO failed.*HETERO_FALLBACK=YES would try it on CPU next"
    ):
        off({"x": x})
    on = core.compile_model(_split(path), "HETERO:OPENVINO,CPU", {"HETERO_FALLBACK": "YES"})
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        got = on({"x": x})
    (name,) = want
    np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    (move,) = on.moves
    assert (move.subgraph, move.left, move.to, move.quirk) == (
        "subgraph2",
        "OPENVINO",
        "CPU",
        "openvino-input-order",
    )
    assert on.get_property("EXECUTION_DEVICES") == ["CPU"]
