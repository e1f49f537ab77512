"""The OpenVINO EP's quirks (hetero_cli/quirks/openvino.py, docs/limits.md), reproduced in plain ONNX Runtime
(no hetero-cli involved): each asserts the defect on a release its record affects and the fixed behaviour
on a fixed one (the record's ``fixed_in``). If one starts failing, the installed EP changed: give the record
its ``fixed_in`` (the workaround then acts only on older releases), and look at docs/limits.md again."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.helpers import PYTHON, guarded_chain_model, make_model, needs_openvino, seeded, vi
from support.quirk_sides import defect_raises, expect

from hetero_cli.ort.session import ORT_ERRORS
from hetero_cli.quirks import in_force
from hetero_cli.quirks import openvino as quirks

OPENVINO = ["OpenVINOExecutionProvider", "CPUExecutionProvider"]


def session_of(proto, providers):
    return ort.InferenceSession(proto.SerializeToString(), providers=providers)


def run(proto, feeds, providers):
    return session_of(proto, providers).run(None, feeds)[0]


@needs_openvino
def test_an_empty_tensor_comes_out_of_openvino_with_each_0_made_1():
    """x [B,4] -> Shape[:1] -> Concat [B,0,1] -> ConstantOfShape -> Mul: an empty [1,0,1] tensor."""
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape", start=0, end=1),
        h.make_node("Concat", ["s", "zero_one"], ["dims"], name="concat", axis=0),
        h.make_node(
            "ConstantOfShape",
            ["dims"],
            ["c"],
            name="fill",
            value=h.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
        ),
        h.make_node("Mul", ["c", "m"], ["y"], name="mul"),
    ]
    inits = [
        h.make_tensor("zero_one", TensorProto.INT64, [2], [0, 1]),
        h.make_tensor("m", TensorProto.FLOAT, [], [-1.0]),
    ]
    proto = make_model(nodes, [vi("x", ["B", 4])], [vi("y", None)], inits)
    x = np.ones((1, 4), np.float32)
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).shape == (1, 0, 1)
    shape = expect(quirks.EMPTY_TENSOR, (1, 1, 1), (1, 0, 1))
    assert run(proto, {"x": x}, ["OpenVINOExecutionProvider"]).shape == shape


@needs_openvino
def test_openvino_keeps_a_ceil_mode_pools_last_window_the_cpu_ep_drops():
    nodes = [h.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[1], strides=[3], ceil_mode=1)]
    proto = make_model(nodes, [vi("x", [1, 1, 3])], [vi("y", None)])
    x = seeded((1, 1, 3))
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).shape == (1, 1, 1)
    assert run(proto, {"x": x}, OPENVINO).shape == expect(quirks.CEIL_MODE_POOL, (1, 1, 2), (1, 1, 1))


@needs_openvino
def test_a_value_info_lie_cuts_a_batch_inside_orts_own_openvino_cpu_split():
    shape = [h.make_tensor("s", TensorProto.INT64, [2], [-1, 3])]
    nodes = [
        h.make_node("Reshape", ["x", "s"], ["b"], name="reshape"),
        h.make_node("Relu", ["b"], ["r"], name="relu"),
        h.make_node("Hardmax", ["r"], ["hm"], name="hardmax", axis=1),  # the OpenVINO EP leaves it to CPU
        h.make_node("Mul", ["hm", "r"], ["m"], name="mul"),
        h.make_node("Sigmoid", ["m"], ["y"], name="sig"),
    ]
    lies = [vi(t, [2, 3]) for t in ("b", "r", "hm", "m")]
    proto = make_model(nodes, [vi("x", ["N", 6])], [vi("y", None)], shape, value_info=lies)
    x = seeded((2, 6))  # a batch of 4 rows of 3
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).shape == (4, 3)
    assert run(proto, {"x": x}, OPENVINO).shape == expect(quirks.DECLARED_SHAPE_IN_SPLIT, (2, 3), (4, 3))


def adding_loop(addend: str, before: list[onnx.NodeProto], inside: list[onnx.NodeProto]) -> onnx.ModelProto:
    """``before`` nodes, then a Loop of 3 trips over x whose body adds ``addend`` (made by ``inside`` nodes
    or read from outside the body) to what it carries: [4, 4] for x = [1, 1] and an addend of 1."""
    body = h.make_graph(
        [
            *inside,
            h.make_node("Add", ["v_in", addend], ["v_out"], name="body_add"),
            h.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
        ],
        "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("v_in", [2])],
        [vi("cond_out", [], TensorProto.BOOL), vi("v_out", [2])],
    )
    nodes = [*before, h.make_node("Loop", ["trips", "yes", "x"], ["y"], name="loop", body=body)]
    inits = [
        h.make_tensor("trips", TensorProto.INT64, [], [3]),
        h.make_tensor("yes", TensorProto.BOOL, [], [True]),
    ]
    return make_model(nodes, [vi("x", [2])], [vi("y", [2])], inits)


@needs_openvino
def test_openvino_cannot_compile_a_loop_whose_body_reads_an_outer_value():
    """x -> Relu -> r; Loop (3 trips) adds r, read from outside its body, to what it carries."""
    proto = adding_loop("r", [h.make_node("Relu", ["x"], ["r"], name="relu")], [])
    x = np.ones(2, np.float32)
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).tolist() == [4.0, 4.0]
    with defect_raises(quirks.OUTER_SCOPE_LOOP, match="node not found in graph cache"):
        assert run(proto, {"x": x}, OPENVINO).tolist() == [4.0, 4.0]


@needs_openvino
def test_openvino_cannot_compile_a_loop_whose_body_it_partitioned():
    """Loop (3 trips) adds 1, a constant of its own body, to what it carries: the body reads nothing from
    outside it, yet the EP claims the body's Add as a subgraph of its own and then fails on the Loop."""
    one = h.make_tensor("o", TensorProto.FLOAT, [2], [1, 1])
    proto = adding_loop("one", [], [h.make_node("Constant", [], ["one"], name="one", value=one)])
    x = np.ones(2, np.float32)
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).tolist() == [4.0, 4.0]
    with defect_raises(quirks.LOOP_BODY_PARTITIONED, match="OpenVINO-EP-subgraph"):
        assert run(proto, {"x": x}, OPENVINO).tolist() == [4.0, 4.0]


@needs_openvino
def test_openvino_on_its_cpu_device_drops_the_ep_for_fp16():
    proto = make_model([h.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2])], [vi("y", [2])])
    for precision, kept in (("FP32", True), ("FP16", expect(quirks.CPU_PRECISION, False, True))):
        options = {"device_type": "CPU", "precision": precision}
        session = session_of(proto, [("OpenVINOExecutionProvider", options), "CPUExecutionProvider"])
        assert ("OpenVINOExecutionProvider" in session.get_providers()) is kept, precision


@needs_openvino
def test_openvino_ignores_a_value_fed_for_an_overridable_initializer():
    """y = x + b, b an initializer also listed among the graph inputs (IR 4 and later: overridable)."""
    graph = h.make_graph(
        [h.make_node("Add", ["x", "b"], ["y"], name="add")],
        "overridable",
        [vi("x", [2]), vi("b", [2])],
        [vi("y", [2])],
        [h.make_tensor("b", TensorProto.FLOAT, [2], [1.0, 2.0])],
    )
    proto = h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])
    feeds = {"x": np.zeros(2, np.float32), "b": np.full(2, 5.0, np.float32)}
    assert run(proto, feeds, ["CPUExecutionProvider"]).tolist() == [5.0, 5.0]
    expected = expect(quirks.FOLDS_OVERRIDABLE_INITIALIZERS, [1.0, 2.0], [5.0, 5.0])
    assert run(proto, feeds, OPENVINO).tolist() == expected


@needs_openvino
def test_openvino_refuses_an_initializer_as_a_graph_output():
    w = h.make_tensor("W", TensorProto.FLOAT, [2], [1.0, 2.0])
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu")]
    proto = make_model(nodes, [vi("x", [2])], [vi("y", [2]), vi("W", [2])], [w])
    x = np.ones(2, np.float32)
    assert run(proto, {"x": x}, ["CPUExecutionProvider"]).tolist() == [1.0, 1.0]
    with defect_raises(quirks.INITIALIZER_OUTPUT, match="W node not found in graph cache"):
        assert run(proto, {"x": x}, OPENVINO).tolist() == [1.0, 1.0]


@needs_openvino
def test_openvino_taking_nodes_around_one_it_refuses_makes_a_cycle():
    """Relu -> IsInf -> Where -> Sigmoid -> Hardmax: the EP takes Relu and Where around the IsInf it
    leaves to the CPU EP; ORT calls the valid model invalid."""
    proto = guarded_chain_model()
    session_of(proto, ["CPUExecutionProvider"])
    with defect_raises(quirks.CYCLIC_SPLIT, match="not acyclic"):
        session_of(proto, OPENVINO)


@needs_openvino
def test_openvino_cannot_read_external_data_at_a_location_with_a_colon(tmp_path):
    x = np.ones((1, 4), np.float32)
    for name, works in (("m", True), ("m:x", False)):
        w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")
        nodes = [h.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
        proto = make_model(nodes, [vi("x", [1, 4])], [vi("y", [1, 4])], [w])
        path = tmp_path / f"{name}.onnx"
        onnx.save(proto, str(path), save_as_external_data=True, location=f"{name}.bin", size_threshold=0)
        assert ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        if works:
            ort.InferenceSession(str(path), providers=OPENVINO).run(None, {"x": x})
        else:
            with defect_raises(quirks.COLON_EXTERNAL_DATA, match="invalid external data"):
                ort.InferenceSession(str(path), providers=OPENVINO).run(None, {"x": x})


def _shape_piece_model():
    """x [N,200,1,1] reshaped to [n, 200] by Concat(n, 200), then MatMul -> Add -> Softmax: the head of a
    classifier whose batch size comes in as an int64 tensor (a CPU subgraph computes it in a split), the
    graph's inputs listed n first (listed x first, the EP feeds them right)."""
    nodes = [
        h.make_node("Concat", ["n", "c"], ["shape"], name="concat", axis=0),
        h.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        h.make_node("MatMul", ["r", "w"], ["mm"], name="matmul"),
        h.make_node("Add", ["mm", "b"], ["a"], name="add"),
        h.make_node("Softmax", ["a"], ["y"], name="softmax", axis=-1),
    ]
    inits = [
        numpy_helper.from_array(np.array([200], np.int64), "c"),
        numpy_helper.from_array(seeded((200, 10)), "w"),
        numpy_helper.from_array(seeded((10,), seed=1), "b"),
    ]
    inputs = [vi("n", [1], TensorProto.INT64), vi("x", ["N", 200, 1, 1])]  # in this order only
    return make_model(nodes, inputs, [vi("y", ["N", 10])], inits)


@needs_openvino
def test_openvino_feeds_a_shape_piece_and_a_tensor_in_the_wrong_order():
    proto = _shape_piece_model()
    feeds = {"x": seeded((2, 200, 1, 1)), "n": np.array([2], np.int64)}
    assert run(proto, feeds, ["CPUExecutionProvider"]).shape == (2, 10)
    with defect_raises(quirks.INPUT_ORDER, match="Can't set the input tensor with index"):
        assert run(proto, feeds, OPENVINO).shape == (2, 10)


def _shape_of_output_model():
    """Reshape(x, [6, 40]) -> Shape -> ConstantOfShape, the reshaped tensor and the filled one both outputs
    (240 elements: more than a static shape value holds, so a split hands the filled one on too)."""
    nodes = [
        h.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
        h.make_node("Shape", ["r"], ["sh"], name="shape"),
        h.make_node(
            "ConstantOfShape",
            ["sh"],
            ["z"],
            name="fill",
            value=numpy_helper.from_array(np.array([1.0], np.float32)),
        ),
    ]
    inits = [numpy_helper.from_array(np.array([6, 40], np.int64), "s")]
    return make_model(nodes, [vi("x", [2, 3, 40])], [vi("r", [6, 40]), vi("z", [6, 40])], inits)


@needs_openvino
def test_openvino_loses_a_folded_constant_of_shape_beside_its_source():
    proto = _shape_of_output_model()
    assert run(proto, {"x": seeded((2, 3, 40))}, ["CPUExecutionProvider"]).shape == (6, 40)
    with defect_raises(quirks.SHAPE_OF_OUTPUT, match="z node not found in graph cache"):
        session_of(proto, OPENVINO)


@needs_openvino
def test_openvino_answers_a_failed_input_again_with_the_last_outputs():
    """Relu(x [2,4]) -> Reshape(s) -> Neg: s = [5,5] fails in the EP; the same inputs a second time pass,
    reshaped to the last shape that succeeded, [4,2]."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Reshape", ["r", "s"], ["m"], name="reshape"),
        h.make_node("Neg", ["m"], ["z"], name="neg"),
    ]
    proto = make_model(nodes, [vi("x", [2, 4]), vi("s", [2], TensorProto.INT64)], [vi("z", None)])
    session = session_of(proto, OPENVINO)
    x = seeded((2, 4))
    assert session.run(None, {"x": x, "s": np.array([4, 2], np.int64)})[0].shape == (4, 2)
    bad = {"x": seeded((2, 4), seed=1), "s": np.array([5, 5], np.int64)}
    with pytest.raises(Exception, match=r"cannot be reshaped|conflicts with the reshape pattern"):
        session.run(None, bad)
    if in_force(quirks.STALE_AFTER_FAILURE):
        again = session.run(None, bad)[0]
        np.testing.assert_array_equal(again, -np.maximum(bad["x"], 0).reshape(4, 2))
    else:
        with pytest.raises(Exception, match=r"cannot be reshaped|conflicts with the reshape pattern"):
            session.run(None, bad)


def pooled_model():
    """Relu(x [N,1,4,4]) -> MaxPool 2x2: a zero batch fails OpenVINO's MaxPool ("Batch size is zero")."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    ]
    return make_model(nodes, [vi("x", ["N", 1, 4, 4])], [vi("y", None)])


@needs_openvino
def test_openvino_fails_the_last_good_shape_again_after_a_failed_run():
    proto = pooled_model()
    one, empty, two = (seeded((n, 1, 4, 4)) for n in (1, 0, 2))
    session = session_of(proto, ["OpenVINOExecutionProvider"])
    assert session.run(None, {"x": one})[0].shape == (1, 1, 2, 2)
    with pytest.raises(Exception, match="Batch size is zero"):
        session.run(None, {"x": empty})
    with defect_raises(quirks.FAILED_SHAPE_KEPT, match="Batch size is zero"):
        assert session.run(None, {"x": one})[0].shape == (1, 1, 2, 2)
    assert session.run(None, {"x": two})[0].shape == (2, 1, 2, 2)  # another shape clears it
    assert session.run(None, {"x": one})[0].shape == (1, 1, 2, 2)
    cpu = session_of(proto, ["CPUExecutionProvider"])  # the CPU EP: an empty answer, and right after it
    assert [cpu.run(None, {"x": x})[0].shape[0] for x in (one, empty, one)] == [1, 0, 1]


def attention_model(shape=(1, 8, 4), scale: str | None = None, outputs=("y",)):
    """A self-attention over x: MatMul(x, Transpose(x)) [-> Mul or Div by a scalar] -> Softmax ->
    MatMul(., x), with ``outputs`` among its tensors (kt, s, a, y) as graph outputs."""
    perm = [*range(len(shape) - 2), len(shape) - 1, len(shape) - 2]
    nodes = [
        h.make_node("Transpose", ["x"], ["kt"], name="t", perm=perm),
        h.make_node("MatMul", ["x", "kt"], ["s"], name="mm1"),
        h.make_node("Softmax", ["s" if scale is None else "scaled"], ["a"], name="sm", axis=-1),
        h.make_node("MatMul", ["a", "x"], ["y"], name="mm2"),
    ]
    inits = []
    if scale is not None:
        nodes.insert(2, h.make_node(scale, ["s", "c"], ["scaled"], name="scale"))
        inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "c"))
    return make_model(nodes, [vi("x", list(shape))], [vi(name, None) for name in outputs], inits)


def usable_cores() -> int:
    """The cores this process may run on (OpenVINO's CPU plugin sizes its threads by them)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def attention_splits() -> bool:
    """Whether the OpenVINO EP hands a self-attention's output back split here: on an affected release,
    where OpenVINO has two threads or more to split it for (one core: it does not split)."""
    return in_force(quirks.ATTENTION_OUTPUT_SHAPE) and usable_cores() >= 2


@needs_openvino
@pytest.mark.parametrize("scale", [None, "Mul", "Div"])
def test_openvino_hands_back_a_self_attention_with_its_rows_split_in_two(scale):
    """[1,8,4] comes back as [1,2,4,4] on two threads: the values right, in order, the shape the one OpenVINO
    split the rows into for its threads. With one thread, the intermediate tensors graph outputs too
    (nothing fused), or a batch of 2 for the two threads, the shape is right."""
    if usable_cores() < 2:
        pytest.skip("OpenVINO splits the rows for two threads or more: this process may use one core")
    x = seeded((1, 8, 4))
    proto = attention_model(scale=scale)
    two_threads = [("OpenVINOExecutionProvider", {"num_of_threads": "2"}), "CPUExecutionProvider"]
    want = run(proto, {"x": x}, ["CPUExecutionProvider"])
    got = run(proto, {"x": x}, two_threads)
    assert want.shape == (1, 8, 4)
    assert got.shape == expect(quirks.ATTENTION_OUTPUT_SHAPE, (1, 2, 4, 4), (1, 8, 4))
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-6)
    one_thread = [("OpenVINOExecutionProvider", {"num_of_threads": "1"}), "CPUExecutionProvider"]
    assert run(proto, {"x": x}, one_thread).shape == (1, 8, 4)
    unfused = attention_model(scale=scale, outputs=("y", "s", "a"))
    assert run(unfused, {"x": x}, two_threads).shape == (1, 8, 4)
    x2 = seeded((2, 8, 4))
    assert run(attention_model((2, 8, 4), scale), {"x": x2}, two_threads).shape == (2, 8, 4)


@needs_openvino
@pytest.mark.parametrize("embed", ["0", "1"])
def test_openvino_cannot_load_the_ep_context_model_it_wrote(tmp_path, embed):
    """The EP writes an EPContext model of a MatMul -> Relu (ep.context_enable), its blob beside it or
    embedded; a session of that model fails to load (EP_FAIL) where the source model loads and runs."""
    source = _matmul_relu(tmp_path)
    context = tmp_path / "m_ctx.onnx"
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", embed)
    so.add_session_config_entry("ep.context_file_path", str(context))
    x = np.ones((1, 4), np.float32)
    want = ort.InferenceSession(str(source), so, providers=OPENVINO).run(None, {"x": x})[0]
    assert context.is_file()
    with defect_raises(quirks.EP_CONTEXT_LOAD, match="EP_FAIL"):
        got = ort.InferenceSession(str(context), providers=OPENVINO).run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, want)


def _matmul_relu(folder):
    """A MatMul -> Relu model of static shape [1, 4], written to ``folder``/m.onnx; its path."""
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        h.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    source = folder / "m.onnx"
    source.write_bytes(make_model(nodes, [vi("x", [1, 4])], [vi("y", None)], [w]).SerializeToString())
    return source


# one session of the model with the EP's model cache on OpenVINO's CPU device, in a process of its own
_CACHED_SESSION = """
import sys
import onnxruntime as ort
options = {"device_type": "CPU", "cache_dir": sys.argv[2]}
ort.InferenceSession(sys.argv[1], providers=[("OpenVINOExecutionProvider", options), "CPUExecutionProvider"])
"""


@needs_openvino
def test_openvino_on_the_cpu_writes_its_cache_blob_again_instead_of_loading_it(tmp_path):
    """A session with the EP's cache_dir on the CPU leaves one blob. A session in a new process (the blob's
    name counts the EP's subgraphs per process, so only another process looks for this one) finds it: on
    an affected release it cannot read it, so it deletes it and writes it again (its mtime, set back to 1 s
    past the epoch, moves); on a fixed one it loads it and leaves it as it was."""
    source, cache = _matmul_relu(tmp_path), tmp_path / "cache"
    session = [PYTHON, "-c", _CACHED_SESSION, str(source), str(cache)]
    subprocess.run(session, check=True, capture_output=True)
    (blob,) = cache.glob("*.blob")
    os.utime(blob, ns=(10**9, 10**9))
    subprocess.run(session, check=True, capture_output=True)
    assert [b.name for b in cache.glob("*.blob")] == [blob.name]
    rewritten = blob.stat().st_mtime_ns != 10**9
    assert rewritten is expect(quirks.CPU_BLOB_UNREADABLE, True, False)


@needs_openvino
def test_openvino_on_one_thread_answers_inputs_it_cannot_broadcast_with_empty_outputs():
    """x [2,3,8] masked by m [2,4] (Unsqueeze -> Mul): the CPU EP, and OpenVINO on more threads, fail."""
    nodes = [
        h.make_node("Unsqueeze", ["m", "axis2"], ["m3"], name="unsqueeze"),
        h.make_node("Mul", ["x", "m3"], ["masked"], name="mask"),
    ]
    axis = [h.make_tensor("axis2", TensorProto.INT64, [1], [2])]
    proto = make_model(nodes, [vi("x", ["N", "S", 8]), vi("m", ["N", "S"])], [vi("masked", None)], axis)
    feeds = {"x": seeded((2, 3, 8)), "m": np.zeros((2, 4), np.float32)}
    with pytest.raises(ORT_ERRORS):
        run(proto, feeds, ["CPUExecutionProvider"])
    one = session_of(proto, [("OpenVINOExecutionProvider", {"device_type": "CPU", "num_of_threads": "1"})])
    if in_force(quirks.ONE_THREAD_EMPTY_OUTPUTS):
        assert one.run(None, feeds)[0].size == 0
    else:
        with pytest.raises(ORT_ERRORS):
            one.run(None, feeds)
    right = {"x": seeded((2, 3, 8)), "m": np.ones((2, 3), np.float32)}
    np.testing.assert_allclose(one.run(None, right)[0], right["x"], rtol=1e-6)


def peephole_lstm(peepholes: np.ndarray) -> onnx.ModelProto:
    """x [6,1,3] -> LSTM (hidden 4, initial states h0 and c0 fed through Unsqueeze, peepholes P) -> Squeeze
    -> Relu: the shape madmom's beat tracker exports (with no initial states the EP leaves the LSTM to the
    CPU EP)."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
        for name, shape in (("W", (1, 16, 3)), ("R", (1, 16, 4)), ("B", (1, 32)))
    ]
    weights += [
        numpy_helper.from_array(peepholes, "P"),
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
        numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    ]
    nodes = [
        h.make_node("Unsqueeze", ["h0", "axis0"], ["h"], name="h"),
        h.make_node("Unsqueeze", ["c0", "axis0"], ["c"], name="c"),
        h.make_node("LSTM", ["x", "W", "R", "B", "", "h", "c", "P"], ["y"], name="lstm", hidden_size=4),
        h.make_node("Squeeze", ["y", "axis1"], ["s"], name="squeeze"),
        h.make_node("Relu", ["s"], ["out"], name="relu"),
    ]
    inputs = [vi("x", [6, 1, 3]), vi("h0", [1, 4]), vi("c0", [1, 4])]
    return make_model(nodes, inputs, [vi("out", [6, 1, 4])], weights, name="peepholes")


def peephole_case() -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The peephole LSTM's inputs (zero initial states) and peepholes large enough to matter."""
    feeds = {"x": seeded((6, 1, 3)), "h0": np.zeros((1, 4), np.float32), "c0": np.zeros((1, 4), np.float32)}
    return feeds, 3 * np.random.default_rng(1).standard_normal((1, 12)).astype(np.float32)


@needs_openvino
def test_openvino_runs_an_lstm_as_if_its_peepholes_were_zero():
    feeds, peepholes = peephole_case()
    proto = peephole_lstm(peepholes)
    want = run(proto, feeds, ["CPUExecutionProvider"])
    without = run(peephole_lstm(np.zeros_like(peepholes)), feeds, ["CPUExecutionProvider"])
    assert np.abs(want - without).max() > 0.02  # the peepholes matter here
    got = run(proto, feeds, OPENVINO)
    np.testing.assert_allclose(got, expect(quirks.LSTM_PEEPHOLES, without, want), rtol=1e-4, atol=1e-5)


#: the native OpenVINO release openvino-lstm-peepholes' record names as seen with the defect
NATIVE_SEEN = "2026.4.1"


def test_native_openvino_of_the_release_seen_runs_an_lstm_as_if_its_peepholes_were_zero(tmp_path):
    """The record's claim about native OpenVINO (the openvino wheel, no ONNX Runtime): its CPU plugin
    gives the peephole LSTM the outputs of the same LSTM without peepholes."""
    ov = pytest.importorskip("openvino")
    assert NATIVE_SEEN in quirks.LSTM_PEEPHOLES.versions_seen
    if not ov.__version__.startswith(NATIVE_SEEN + "-"):
        pytest.skip(f"native OpenVINO {ov.__version__}: the record speaks of {NATIVE_SEEN} only")
    feeds, peepholes = peephole_case()
    path = tmp_path / "peepholes.onnx"
    onnx.save(peephole_lstm(peepholes), path)
    compiled = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    got = compiled(feeds)[compiled.output(0)]
    without = run(peephole_lstm(np.zeros_like(peepholes)), feeds, ["CPUExecutionProvider"])
    want = run(peephole_lstm(peepholes), feeds, ["CPUExecutionProvider"])
    assert np.abs(want - without).max() > 0.02  # the peepholes matter here
    np.testing.assert_allclose(got, without, rtol=1e-4, atol=1e-5)


@needs_openvino
def test_hetero_runs_an_lstm_with_peepholes_on_cpu_and_refuses_it_on_openvino_by_hand():
    """The hook of openvino-lstm-peepholes: automatic mode leaves such an LSTM on CPU, affinities that put it
    on OPENVINO are a CompileError; the results are the CPU EP's on any release."""
    import hetero_cli as hc

    feeds, peepholes = peephole_case()
    proto = peephole_lstm(peepholes)
    core = hc.Core()
    compiled = core.compile_model(proto, "HETERO:OPENVINO,CPU")
    np.testing.assert_allclose(compiled(feeds)["out"], run(proto, feeds, ["CPUExecutionProvider"]), rtol=1e-5)
    # on a fixed release, where the LSTM goes is the EP's query's business
    if in_force(quirks.LSTM_PEEPHOLES):
        assert next(s.device for s in compiled.subgraphs if "lstm" in s.nodes) == "CPU"
        model = core.read_model(proto)
        for node in model.get_ops():
            node.get_rt_info()["affinity"] = "OPENVINO" if node.get_friendly_name() == "lstm" else "CPU"
        with pytest.raises(hc.CompileError, match=r"holds lstm \(LSTM\): An LSTM given peephole weights"):
            core.compile_model(model, "HETERO:OPENVINO,CPU")


def lone_input_model(op: str) -> onnx.ModelProto:
    """x [4] -> ``op`` of that one input -> y [4]: the whole graph the EP gets, as a one-node subgraph."""
    return make_model([h.make_node(op, ["x"], ["y"], name="lone")], [vi("x", [4])], [vi("y", [4])])


@needs_openvino
@pytest.mark.parametrize("op", ["Max", "Min", "Sum"])
def test_openvino_answers_garbage_for_a_max_of_one_input(op):
    """What the EP answers is whatever its buffer held, not the input (a fixed release answers it): each of
    three runs of one session gets inputs of its own, which no other test feeds (so no buffer left over
    holds them); Mean of one input is right on every release."""
    session = session_of(lone_input_model(op), OPENVINO)
    rng = np.random.default_rng(sum(map(ord, op)))  # values no other test feeds
    given = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
    right = all(np.array_equal(session.run(None, {"x": x})[0], x) for x in given)
    assert right is expect(quirks.LONE_INPUT_VARIADIC, False, True)
    x = {"x": given[0]}
    np.testing.assert_array_equal(run(lone_input_model("Mean"), x, OPENVINO), x["x"])


@needs_openvino
def test_hetero_runs_a_max_of_one_input_on_cpu_and_refuses_it_on_openvino_by_hand():
    """The hook of openvino-lone-input-variadic: between two OPENVINO nodes, automatic mode puts a Max of one
    input on CPU, where it gives its input; affinities that put it on OPENVINO are a CompileError."""
    import hetero_cli as hc

    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Max", ["r"], ["m"], name="lone"),
        h.make_node("Neg", ["m"], ["y"], name="neg"),
    ]
    proto = make_model(nodes, [vi("x", [4])], [vi("y", [4])])
    x = {"x": np.array([3.5, -2.25, 1e3, 7.0], np.float32)}
    core = hc.Core()
    np.testing.assert_array_equal(
        core.compile_model(proto, "HETERO:OPENVINO,CPU")(x)["y"], -np.maximum(x["x"], 0)
    )
    if in_force(quirks.LONE_INPUT_VARIADIC):  # on a fixed release, the EP's query decides
        placed = {
            n: s.device for s in core.compile_model(proto, "HETERO:OPENVINO,CPU").subgraphs for n in s.nodes
        }
        assert placed == {"relu": "OPENVINO", "lone": "CPU", "neg": "OPENVINO"}
        model = core.read_model(proto)
        for node in model.get_ops():
            node.get_rt_info()["affinity"] = "OPENVINO"
        with pytest.raises(hc.CompileError, match=r"holds lone \(Max\): A Max, Min or Sum given one input"):
            core.compile_model(model, "HETERO:OPENVINO,CPU")
