"""Shared test helpers: the OpenVINO skip marker and a plain-ONNX-Runtime reference run.

Graph builders and plan checks live in tests/graphs.py; keep this file small.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import onnx
import onnxruntime as ort
import pytest

HAS_OPENVINO = "OpenVINOExecutionProvider" in ort.get_available_providers()

requires_openvino = pytest.mark.skipif(
    not HAS_OPENVINO,
    reason="needs the OpenVINO execution provider: install hetero-cli[openvino] (onnxruntime-openvino)",
)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``@pytest.mark.openvino`` skip cleanly where the OpenVINO EP is missing."""
    if HAS_OPENVINO:
        return
    for item in items:
        if item.get_closest_marker("openvino") is not None:
            item.add_marker(requires_openvino)


def reference(model_proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the whole model in ONE plain ONNX Runtime session on the CPU EP: {output name: array}.

    ORT refuses two nodes with one name, which ONNX allows (and hetero-cli copes with): such names are
    cleared in a copy first, which changes no value.
    """
    names = Counter(n.name for n in model_proto.graph.node if n.name)
    if any(c > 1 for c in names.values()):
        copy = onnx.ModelProto()
        copy.CopyFrom(model_proto)
        for n in copy.graph.node:
            if names[n.name] > 1:
                n.name = ""
        model_proto = copy
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds)), strict=True))
