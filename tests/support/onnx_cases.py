"""onnx's own node test cases (onnx.backend.test.case.node), models nobody here wrote, made in memory: the
wheel ships no node/ test data folders. onnx fills one global list of cases when it first imports their
modules, filtered by the first call's op type only, so every test takes them from here: all of them, made
once per process."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import onnx
from onnx.backend.test.case.node import collect_testcases
from onnx.backend.test.case.test_case import TestCase

#: the newest IR version the ONNX Runtime releases tested here read
IR_VERSION = 10


@functools.cache
def _cases() -> dict[str, TestCase]:
    with warnings.catch_warnings():  # numpy's, from making some ops' cases (casts that overflow...)
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases()}


def node_case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """onnx's test case ``name`` (test_affine_grid_2d_expanded, ...): a copy of its model, at an IR version
    ONNX Runtime reads, its first data set's inputs by name and expected outputs in order."""
    case = _cases()[name]
    proto = onnx.ModelProto()
    proto.CopyFrom(case.model)
    proto.ir_version = min(proto.ir_version, IR_VERSION)
    inputs, outputs = case.data_sets[0]
    return proto, {i.name: a for i, a in zip(proto.graph.input, inputs, strict=True)}, list(outputs)
