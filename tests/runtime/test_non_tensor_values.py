"""Values an OrtValue cannot wrap: string tensors, sequences and maps (skl2onnx's classifiers end in ZipMap,
a sequence of maps; text models take strings). The subgraphs that read or make them run the way ORT's
InferenceSession.run does; the results equal one plain ORT session's, whatever the split."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import ACCELERATOR, SPLIT

import hetero_cli as hc

FLOAT, STRING = TensorProto.FLOAT, TensorProto.STRING


def _model() -> onnx.ModelProto:
    """x -> Relu -> SequenceConstruct(r, x) -> seq (an output) -> SequenceAt(0) -> Neg -> y; s (strings) ->
    Identity -> t (an output) -> Cast to float -> Add(., y) -> z; x -> ZipMap -> labels (seq of maps)."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("SequenceConstruct", ["r", "x"], ["seq"], name="construct"),
        h.make_node("SequenceAt", ["seq", "zero"], ["back"], name="at"),
        h.make_node("Neg", ["back"], ["y"], name="neg"),
        h.make_node("Identity", ["s"], ["t"], name="identity"),
        h.make_node("Cast", ["t"], ["u"], name="cast", to=FLOAT),
        h.make_node("Add", ["u", "y"], ["z"], name="add"),
        h.make_node("Unsqueeze", ["x", "zero"], ["row"], name="unsqueeze"),
        h.make_node(
            "ZipMap", ["row"], ["labels"], name="zipmap", domain="ai.onnx.ml", classlabels_int64s=[7, 9]
        ),
    ]
    graph = h.make_graph(
        nodes,
        "non_tensor",
        [h.make_tensor_value_info("x", FLOAT, [2]), h.make_tensor_value_info("s", STRING, [2])],
        [
            h.make_tensor_sequence_value_info("seq", FLOAT, None),
            h.make_tensor_value_info("t", STRING, [2]),
            h.make_tensor_value_info("z", FLOAT, [2]),
            h.make_tensor_value_info("y", FLOAT, [2]),
            h.make_value_info(
                "labels",
                h.make_sequence_type_proto(
                    h.make_map_type_proto(TensorProto.INT64, h.make_tensor_type_proto(FLOAT, None))
                ),
            ),
        ],
        [onnx.numpy_helper.from_array(np.array(0, np.int64), "zero")],
    )
    opsets = [h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", 3)]
    return h.make_model(graph, ir_version=9, opset_imports=opsets)


def _reference(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, object]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    given = {k: v.astype(object) if v.dtype.kind == "U" else v for k, v in feeds.items()}
    return dict(zip(names, session.run(names, given), strict=True))


def _same(got: dict[str, object], want: dict[str, object]) -> None:
    assert list(got) == list(want)
    for name, value in want.items():
        if isinstance(value, list):
            assert len(got[name]) == len(value), name
            for a, b in zip(got[name], value, strict=True):
                if isinstance(b, dict):
                    assert a == pytest.approx(b), name
                else:
                    np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)


SPLITS = {
    "HETERO:CPU": None,
    # every kind of value crosses a boundary: the sequence, the strings, a float made from strings
    "alternating": {
        "relu": ACCELERATOR,
        "construct": "CPU",
        "at": "CPU",
        "neg": ACCELERATOR,
        "identity": "CPU",
        "cast": "CPU",
        "add": ACCELERATOR,
        "unsqueeze": ACCELERATOR,
        "zipmap": "CPU",
    },
    "automatic": None,
}


@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
@pytest.mark.parametrize("split", list(SPLITS))
def test_strings_sequences_and_maps_give_plain_orts_results(split, hint):
    if split != "HETERO:CPU" and ACCELERATOR is None:
        pytest.skip("needs a second device for a split: onnxruntime-openvino, or onnxruntime-gpu on a GPU")
    proto = _model()
    model = hc.Core().read_model(proto)
    for node in model.get_ops() if SPLITS[split] else ():
        node.get_rt_info()["affinity"] = SPLITS[split][node.get_friendly_name()]
    device = "HETERO:CPU" if split == "HETERO:CPU" else SPLIT
    compiled = hc.Core().compile_model(model, device, {"PERFORMANCE_HINT": hint})
    if split == "alternating":
        assert len(compiled.subgraphs) >= 4
    request = compiled.create_infer_request()
    for x, s in [([-1.0, 2.0], ["1.5", "-2"]), ([3.0, -4.0], ["0", "10"])]:
        feeds = {"x": np.array(x, np.float32), "s": np.array(s)}  # numpy's str arrays are taken as they are
        _same(request.infer(feeds), _reference(proto, feeds))

    queue = hc.AsyncInferQueue(compiled, 2)
    got = {}
    queue.set_callback(lambda request, k: got.__setitem__(k, request.results))
    inputs = [
        {"x": np.array([k, -k], np.float32), "s": np.array([str(k), "1"], dtype=object)} for k in range(4)
    ]
    for k, feeds in enumerate(inputs):
        queue.start_async(feeds, userdata=k)
    queue.wait_all()
    for k, feeds in enumerate(inputs):
        _same(got[k], _reference(proto, feeds))


def _ml_model(nodes, inputs, outputs) -> onnx.ModelProto:
    graph = h.make_graph(
        nodes, "g", inputs, outputs, [onnx.numpy_helper.from_array(np.array(0, np.int64), "zero")]
    )
    opsets = [h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", 3)]
    return h.make_model(graph, ir_version=9, opset_imports=opsets)


@pytest.mark.parametrize("device", sorted({"HETERO:CPU", SPLIT}))
def test_sequence_and_map_inputs_are_handed_over_as_given(device):
    map_type = h.make_map_type_proto(TensorProto.STRING, h.make_tensor_type_proto(FLOAT, None))
    proto = _ml_model(
        [
            h.make_node("SequenceAt", ["seq", "zero"], ["first"], name="at"),
            h.make_node(
                "DictVectorizer", ["d"], ["v"], name="dv", domain="ai.onnx.ml", string_vocabulary=["a", "b"]
            ),
            h.make_node("Add", ["first", "v"], ["y"], name="add"),
        ],
        [h.make_tensor_sequence_value_info("seq", FLOAT, [2]), h.make_value_info("d", map_type)],
        [h.make_tensor_value_info("y", FLOAT, None)],
    )
    feeds = {"seq": [np.array([1, -1], np.float32), np.array([5, 5], np.float32)], "d": {"a": 1.0, "b": -2.0}}
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    got = hc.Core().compile_model(proto, device).create_infer_request().infer(feeds)
    np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
def test_a_string_input_only_passed_through_and_bytes_strings(hint):
    """A string input that is also an output and nothing else reads (every other subgraph pre-bound: the
    fast paths bind inputs themselves), and bytes strings (numpy's, or bytes objects, as KServe's BYTES come:
    ORT would read those as "b'1.5'"), read as UTF-8 text; text UTF-8 cannot hold is an InferenceError."""
    proto = _ml_model(
        [
            h.make_node("Relu", ["x"], ["y"], name="relu"),
            h.make_node("Cast", ["n"], ["m"], name="cast", to=FLOAT),
        ],
        [
            h.make_tensor_value_info("x", FLOAT, [2]),
            h.make_tensor_value_info("s", STRING, [2]),
            h.make_tensor_value_info("n", STRING, [2]),
        ],
        [
            h.make_tensor_value_info("y", FLOAT, [2]),
            h.make_tensor_value_info("s", STRING, [2]),
            h.make_tensor_value_info("m", FLOAT, [2]),
        ],
    )
    request = hc.Core().compile_model(proto, "HETERO:CPU", {"PERFORMANCE_HINT": hint}).create_infer_request()
    for dtype in (None, object):
        feeds = {
            "x": np.array([1, -1], np.float32),
            "s": np.array(["a", "b"], dtype=object),
            "n": np.array([b"1.5", b"-2"], dtype=dtype),
        }
        got = request.infer(feeds)
        assert list(got["s"]) == ["a", "b"]
        np.testing.assert_array_equal(got["m"], np.array([1.5, -2], np.float32))
        np.testing.assert_array_equal(got["y"], np.array([1, 0], np.float32))
    for bad in (np.array(["\ud800", "b"], dtype=object), np.array([b"\xff", b"b"], dtype=object)):
        with pytest.raises(hc.InferenceError, match="'s' holds a string that is no UTF-8 text"):
            request.infer({**feeds, "s": bad})


def test_a_sequence_input_only_passed_through_beside_a_bound_subgraph():
    """Every subgraph pre-bound (the direct path binds the inputs itself) and a sequence input that only
    comes back out as an output: nothing tries to wrap the list as an OrtValue."""
    graph = h.make_graph(
        [h.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [h.make_tensor_value_info("x", FLOAT, [2]), h.make_tensor_sequence_value_info("seq", FLOAT, None)],
        [h.make_tensor_value_info("y", FLOAT, [2]), h.make_tensor_sequence_value_info("seq", FLOAT, None)],
    )
    proto = h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])
    request = hc.Core().compile_model(proto, "HETERO:CPU").create_infer_request()
    for _ in range(2):
        got = request.infer({"x": np.array([1, -1], np.float32), "seq": [np.array([3.0], np.float32)]})
        np.testing.assert_array_equal(got["y"], np.array([1, 0], np.float32))
        assert len(got["seq"]) == 1 and got["seq"][0].tolist() == [3.0]


@pytest.mark.parametrize("device", sorted({"HETERO:CPU", SPLIT}))
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
def test_a_string_overridable_initializer_fed_or_not(device, hint):
    """An initializer of strings also listed among the inputs: the caller may feed other strings."""
    strings = h.make_tensor("S", STRING, [2], [b"a", b"b"])
    graph = h.make_graph(
        [h.make_node("Identity", ["S"], ["out"], name="id"), h.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [h.make_tensor_value_info("x", FLOAT, [2]), h.make_tensor_value_info("S", STRING, [2])],
        [h.make_tensor_value_info("out", STRING, [2]), h.make_tensor_value_info("y", FLOAT, [2])],
        [strings],
    )
    proto = h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])
    request = hc.Core().compile_model(proto, device, {"PERFORMANCE_HINT": hint}).create_infer_request()
    x = np.array([-1, 2], np.float32)
    for given, want in ((None, ["a", "b"]), (["p", "q"], ["p", "q"]), (None, ["a", "b"])):
        feeds = {"x": x} if given is None else {"x": x, "S": np.array(given, dtype=object)}
        got = request.infer(feeds)
        assert list(got["out"]) == want
        np.testing.assert_array_equal(got["y"], np.array([0, 2], np.float32))
