"""Premises of the tests that need OpenVINO's arithmetic to differ from the CPU EP's: checked on this
machine's CPU and this ONNX Runtime release first, the test skipped (saying why) where they do not hold.
Which float results two EPs round differently is a property of the CPU and the kernels, not of hetero-cli."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper as h

from support.helpers import make_model, vi

OPENVINO = ["OpenVINOExecutionProvider", "CPUExecutionProvider"]


def _run(
    proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray], providers: Sequence[str]
) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), so, providers=list(providers)).run(
        None, dict(feeds)
    )


def openvino_differs(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> bool:
    """Whether the OpenVINO EP's outputs of ``proto`` on ``feeds`` differ from the CPU EP's, bit for bit."""
    cpu = _run(proto, feeds, ["CPUExecutionProvider"])
    ov = _run(proto, feeds, OPENVINO)
    return any(not np.array_equal(a, b) for a, b in zip(cpu, ov, strict=True))


def require_openvino_difference(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> None:
    """Skip the test where OpenVINO computes ``proto`` bit for bit as the CPU EP does here."""
    if not openvino_differs(proto, feeds):
        pytest.skip("OpenVINO computes this model bit for bit as the CPU EP does on this CPU and release")


def differing_chain_nodes(ops: Sequence[str], x: np.ndarray) -> list[str]:
    """The nodes of chain_model(ops) (n0, n1, ...) whose own arithmetic differs between OpenVINO and the
    CPU EP: each run alone on the CPU EP's value of its input, as validate's bisect feeds it."""
    value, differing = x, []
    for k, op in enumerate(ops):
        single = make_model(
            [h.make_node(op, ["a"], ["b"], name=f"n{k}")], [vi("a", x.shape)], [vi("b", x.shape)]
        )
        if openvino_differs(single, {"a": value}):
            differing.append(f"n{k}")
        (value,) = _run(single, {"a": value}, ["CPUExecutionProvider"])
    return differing


def require_only_differing(ops: Sequence[str], x: np.ndarray, expected: Sequence[str]) -> None:
    """Skip the test unless exactly the nodes ``expected`` of chain_model(ops) differ on x (see above)."""
    found = differing_chain_nodes(ops, x)
    if found != list(expected):
        pytest.skip(
            f"on this CPU and release OpenVINO's arithmetic differs at {found or 'no node'}, not {expected}"
        )
