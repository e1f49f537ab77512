"""Issue 5, dynamic shapes: symbolic batch and sequence dimensions across subgraph boundaries.

One compiled model serves different input shapes one after another; each result is compared with one
plain ONNX Runtime session over the whole model.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import (
    HAS_OPENVINO,
    SPLIT,
    SPLIT_DEVICES,
    SPLIT_TOLERANCE,
    const,
    make_model,
    ort_run,
    vi,
)

import hetero_cli as hc

SHAPES = [(1, 1), (2, 5), (3, 7), (1, 16), (4, 2), (2, 5), (5, 1)]


def sequence_model():
    """x[N,S,8], m[N,S] -> MatMul -> Relu -> Hardmax -> Mul -> Concat(seq) -> ReduceMean(seq) ...

    Outputs: y[N,8] (ReduceMean over a 2S sequence), h[N,S,8], shape-driven r[N*S,8] (Reshape by a
    Shape computed on another device), masked[N,S,8] (m broadcast).
    """
    rng = np.random.default_rng(4)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        h.make_node("Relu", ["a"], ["r"], name="relu"),
        h.make_node("Hardmax", ["r"], ["onehot"], name="hardmax", axis=-1),
        h.make_node("Mul", ["r", "onehot"], ["hh"], name="pick"),
        h.make_node("Tanh", ["hh"], ["h"], name="tanh"),
        h.make_node("Concat", ["h", "r"], ["cat"], name="concat", axis=1),
        h.make_node("ReduceMean", ["cat"], ["y"], name="mean", keepdims=0, axes=[1]),
        h.make_node("Shape", ["a"], ["a_shape"], name="shape"),
        h.make_node("Gather", ["a_shape", "last"], ["width"], name="gather", axis=0),
        h.make_node("Concat", ["minus1", "width"], ["flat_shape"], name="flat_shape", axis=0),
        h.make_node("Reshape", ["hh", "flat_shape"], ["rr"], name="reshape"),
        h.make_node("Unsqueeze", ["m", "axis2"], ["m3"], name="unsqueeze"),
        h.make_node("Mul", ["h", "m3"], ["masked"], name="mask"),
    ]
    inits = [
        const("w", rng.standard_normal((8, 8)) * 0.5),
        const("axis2", [2], np.int64),
        const("last", [2], np.int64),
        const("minus1", [-1], np.int64),
    ]
    inputs = [vi("x", ["N", "S", 8]), vi("m", ["N", "S"])]
    outputs = [vi("y", ["N", 8]), vi("h", ["N", "S", 8]), vi("rr", [None, 8]), vi("masked", ["N", "S", 8])]
    return make_model(nodes, inputs, outputs, inits, name="sequence")


def feeds(n: int, s: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed + 10 * n + s)
    return {
        "x": rng.standard_normal((n, s, 8)).astype(np.float32),
        "m": (rng.random((n, s)) > 0.3).astype(np.float32),
    }


def check(got, want) -> None:
    assert list(got) == list(want)
    for name, w in want.items():
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, err_msg=name, **SPLIT_TOLERANCE)


@pytest.fixture(scope="module")
def proto():
    return sequence_model()


# LATENCY (the default) may run an automatic split in the query's one session; THROUGHPUT keeps a session per
# subgraph: both must hold
HINTS = pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])


def test_symbolic_dimensions_cross_the_cuts(proto):
    compiled = hc.Core().compile_model(proto, SPLIT)
    if HAS_OPENVINO:
        assert {s.device for s in compiled.subgraphs} == {"OPENVINO", "CPU"}
        assert len(compiled.subgraphs) >= 3
    crossing = compiled.plan.crossing_tensors()
    if HAS_OPENVINO:
        assert crossing  # the dynamic tensors really cross devices
    for name in crossing:  # every crossing tensor keeps its rank, with symbolic sizes where they vary
        info = compiled.model.tensor_info(name)
        assert info.shape is not None, name


@HINTS
def test_one_compiled_model_serves_shapes_one_after_another(proto, hint):
    compiled = hc.Core().compile_model(proto, SPLIT, {"PERFORMANCE_HINT": hint})
    request = compiled.create_infer_request()
    for n, s in SHAPES:
        f = feeds(n, s)
        check(request.infer(f), ort_run(proto, f))


def test_shapes_one_after_another_with_every_node_forced_across(proto):
    model = hc.Core().read_model(proto)
    devices = SPLIT_DEVICES
    for k, node in enumerate(model.get_ops()):
        node.get_rt_info()["affinity"] = devices[k % len(devices)]
    compiled = hc.Core().compile_model(model, SPLIT)
    requests = [compiled.create_infer_request() for _ in range(2)]
    for k, (n, s) in enumerate(SHAPES):
        f = feeds(n, s, seed=1)
        check(requests[k % 2].infer(f), ort_run(proto, f))


@HINTS
def test_a_wrong_fixed_dimension_among_symbolic_ones_is_refused(proto, hint):
    compiled = hc.Core().compile_model(proto, SPLIT, {"PERFORMANCE_HINT": hint})
    f = feeds(2, 3)
    f["x"] = np.zeros((2, 3, 5), np.float32)
    with pytest.raises(hc.InferenceError, match="'x'"):
        compiled.create_infer_request().infer(f)
    f = feeds(2, 3)
    f["m"] = np.zeros((2, 4), np.float32)  # N and S must agree between x and m: ORT says so, in one error
    with pytest.raises(hc.InferenceError):
        compiled.create_infer_request().infer(f)


def test_dynamic_rank_boundary_from_an_op_onnx_cannot_type():
    # NonZero's output size depends on the values: [2, ?] crossing devices
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
        h.make_node("Cast", ["nz"], ["nzf"], name="cast", to=TensorProto.FLOAT),
        h.make_node("ReduceSum", ["nzf"], ["y"], name="sum", keepdims=1),
    ]
    proto = make_model(nodes, [vi("x", ["N", 4])], [vi("y", [1, 1])])
    model = hc.Core().read_model(proto)
    devices = SPLIT_DEVICES
    for k, node in enumerate(model.get_ops()):
        node.get_rt_info()["affinity"] = devices[k % len(devices)]
    compiled = hc.Core().compile_model(model, SPLIT)
    request = compiled.create_infer_request()
    for n in (1, 3, 6):
        f = {"x": np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)}
        check(request.infer(f), ort_run(proto, f))
