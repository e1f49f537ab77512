"""Where an initializer's bytes lie in an .onnx file (hetero_cli.graph.wire), and the splits that read them there."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.helpers import assert_same, const, cpu_split, make_model, ort_run, seeded, vi

import hetero_cli as hc
from hetero_cli.graph import weights as weights_module
from hetero_cli.graph import wire
from hetero_cli.graph.reading import SKELETON_MIN_BYTES
from hetero_cli.graph.wire import raw_data_spans, skeleton

DTYPES = [np.float32, np.float16, np.int64, np.int8, np.uint8, np.float64, np.bool_]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(1, 40), min_size=0, max_size=3)),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_every_raw_initializer_is_found_at_its_bytes(tmp_path_factory, tensors, doc):
    inits = []
    for i, (dtype, shape) in enumerate(tensors):
        value = (np.arange(int(np.prod(shape)), dtype=np.int64) % 7).astype(dtype).reshape(shape)
        inits.append(numpy_helper.from_array(value, f"w{i}"))
    nodes = [h.make_node("Identity", ["x"], ["y"], name="id")]
    proto = make_model(nodes, [vi("x", [2])], [vi("y", [2])], inits)
    if doc:  # fields around and inside the graph that the walk must skip
        proto.doc_string = "a model\n" * 50
        proto.graph.doc_string = "a graph"
        proto.metadata_props.add(key="k", value="v")
    path = tmp_path_factory.mktemp("wire") / "m.onnx"
    onnx.save(proto, path)
    data = path.read_bytes()
    spans = raw_data_spans(path)
    for tensor in onnx.load(path).graph.initializer:
        if tensor.raw_data:
            offset, length = spans[tensor.name]
            assert data[offset : offset + length] == tensor.raw_data
        else:
            assert tensor.name not in spans


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(DTYPES),
            st.lists(st.integers(1, 40), min_size=0, max_size=3),
            st.sampled_from(["raw", "typed", "external"]),
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_the_skeleton_read_from_the_wire_is_the_model_parsed_then_stripped(tmp_path_factory, tensors, doc):
    """Reading a file without its large weights gives what parsing it whole and dropping them gives."""
    folder = tmp_path_factory.mktemp("skeleton")
    inits = []
    for i, (dtype, shape, stored) in enumerate(tensors):
        value = (np.arange(int(np.prod(shape)), dtype=np.int64) % 7).astype(dtype).reshape(shape)
        tensor = numpy_helper.from_array(value, f"w{i}")
        if stored == "typed":  # data in int32_data / float_data ..., not raw_data
            tensor = h.make_tensor(f"w{i}", tensor.data_type, value.shape, value.flatten().tolist())
        elif stored == "external":
            tensor.data_location = TensorProto.EXTERNAL
            tensor.external_data.add(key="location", value="w.bin")
            tensor.ClearField("raw_data")
        inits.append(tensor)
    nodes = [h.make_node("Identity", ["x"], ["y"], name="id")]
    proto = make_model(nodes, [vi("x", [2])], [vi("y", [2])], inits)
    if doc:
        proto.doc_string = "a model\n" * 50
        proto.graph.doc_string = "a graph"
        proto.metadata_props.add(key="k", value="v")
    path = folder / "m.onnx"
    onnx.save(proto, path)
    whole = onnx.load(path, load_external_data=False)
    skeleton_model = skeleton(path, 1024)[0]
    left_out = sum(
        len(whole.graph.initializer[i].raw_data)
        for i in range(len(inits))
        if tensors[i][2] == "raw" and int(np.prod(tensors[i][1])) > 1024
    )
    assert len(skeleton_model) <= path.stat().st_size - left_out  # the large raw weights were never read
    expected, large = weights_module.weights_left_in_file(whole)
    got, got_large = weights_module.weights_left_in_file(onnx.load_from_string(skeleton_model))
    assert got_large == large
    assert got.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)


@pytest.mark.parametrize("side", [64, 600], ids=["small file, parsed whole", "over 1 MiB, weights skipped"])
def test_reading_a_model_leaves_its_weights_in_the_file_and_runs_the_same(tmp_path, monkeypatch, side):
    w = seeded((side, side))
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        h.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    path = tmp_path / "m.onnx"
    onnx.save(
        make_model(nodes, [vi("x", [1, side])], [vi("y", [1, side])], [numpy_helper.from_array(w, "w")]),
        path,
    )
    if side == 600:  # the weights' bytes are never read: onnx.load (which would read them) is not called
        monkeypatch.setattr(weights_module.onnx, "load", None)
    model = hc.Core().read_model(path)
    monkeypatch.undo()
    assert not model.weights.in_memory
    assert not model.skeleton.graph.initializer[0].HasField("raw_data")
    x = seeded((1, side), seed=1)
    expected = ort_run(onnx.load(path), {"x": x})
    assert_same(hc.Core().compile_model(model, "CPU").create_infer_request().infer({"x": x}), expected)
    assert numpy_helper.to_array(model.initializers["w"]).tobytes() == w.tobytes()  # read back when asked


@pytest.mark.filterwarnings("ignore:The onnxtxt format is experimental")
def test_a_text_format_model_is_read_by_onnx_itself(tmp_path):
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu")]
    path = tmp_path / "m.onnxtxt"
    onnx.save(make_model(nodes, [vi("x", [2])], [vi("y", [2])]), path, format="onnxtxt")
    assert [n.get_type_name() for n in hc.Core().read_model(path).get_ops()] == ["Relu"]


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff", b"\x3a\x80"], ids=["empty", "garbage", "cut"])
def test_a_file_that_cannot_be_walked_gives_no_spans(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    assert raw_data_spans(path) == {}
    assert raw_data_spans(tmp_path / "missing.onnx") == {}
    assert skeleton(path, 0) is None
    assert skeleton(tmp_path / "missing.onnx", 0) is None


@pytest.mark.parametrize(
    ("pattern", "message"),
    [(b"\0", "is not a readable ONNX model"), (b"\x08\x00", "holds no ONNX graph")],
    ids=["zeros", "ir_version-over-and-over"],
)
def test_the_walk_of_a_file_that_is_no_model_is_bounded(tmp_path, monkeypatch, pattern, message):
    """A file of zeros stops the walk at its first field (protobuf has no field 0); a valid message of
    512k tiny fields, at MAX_FIELDS: onnx's parser (C++) reads the rest. The walk's work is counted in
    varints read, each field reading one or two."""
    path = tmp_path / "big.onnx"
    path.write_bytes(pattern * (SKELETON_MIN_BYTES // len(pattern)))
    monkeypatch.setattr(wire, "MAX_FIELDS", 1000)
    read = []
    varint = wire._varint

    def counted(buf, pos):
        read.append(pos)
        return varint(buf, pos)

    monkeypatch.setattr(wire, "_varint", counted)
    with pytest.raises(hc.ModelError, match=message):
        hc.Core().read_model(path)
    assert len(read) <= (1 if pattern == b"\0" else 2 * 1000 + 2)


def test_weights_stored_as_float_data_are_loaded_and_copied_for_a_split(tmp_path):
    w = seeded((64, 64), seed=1)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        h.make_node("Relu", ["a"], ["y"], name="relu"),
    ]
    tensor = h.make_tensor("w", TensorProto.FLOAT, [64, 64], w.ravel().tolist())  # float_data, not raw
    proto = make_model(nodes, [vi("x", [2, 64])], [vi("y", [2, 64])], [tensor])
    path = tmp_path / "float_data.onnx"
    onnx.save(proto, path)
    assert raw_data_spans(path) == {}
    model = hc.Core().read_model(path)
    model.set_affinities({"mm": "CPU", "relu": "CPU"})
    assert model.reference("w") is None
    x = seeded((2, 64))
    compiled = hc.Core().compile_model(model, "HETERO:CPU")
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_split_that_reads_its_weights_from_the_file_gives_the_models_results(tmp_path):
    nodes = [
        h.make_node("MatMul", ["x", "w0"], ["a"], name="mm0"),
        h.make_node("Relu", ["a"], ["r"], name="relu"),
        h.make_node("MatMul", ["r", "w1"], ["y"], name="mm1"),
    ]
    inits = [const("w0", seeded((64, 64), seed=1)), const("w1", seeded((64, 64), seed=2))]
    proto = make_model(nodes, [vi("x", [2, 64])], [vi("y", [2, 64])], inits)
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    model = hc.Core().read_model(path)
    compiled = cpu_split(model)
    assert len(compiled.subgraphs) == 3
    x = seeded((2, 64))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))
    assert model.weights.in_memory is False  # every subgraph's session read its weights from the file


def test_an_embedded_export_stands_on_its_own(tmp_path):
    from hetero_cli.placement.export import subgraph_model
    from hetero_cli.placement.partition import partition

    nodes = [h.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    proto = make_model(nodes, [vi("x", [2, 64])], [vi("y", [2, 64])], [const("w", seeded((64, 64), seed=1))])
    path = tmp_path / "src" / "m.onnx"
    path.parent.mkdir()
    onnx.save(proto, path)
    model = hc.Core().read_model(path)
    (sub,) = partition(model, {"mm": "CPU"}).subgraphs
    referenced = subgraph_model(model, sub)
    assert referenced.graph.initializer[0].data_location == TensorProto.EXTERNAL
    standalone = subgraph_model(model, sub, embed=True)
    assert standalone.graph.initializer[0].raw_data
    elsewhere = tmp_path / "other" / "sub.onnx"
    elsewhere.parent.mkdir()
    onnx.save(standalone, elsewhere)
    x = seeded((2, 64))
    assert_same(ort_run(onnx.load(elsewhere), {"x": x}), ort_run(proto, {"x": x}))


def test_a_tapped_model_holding_weights_no_reference_reaches_compiles_and_runs(tmp_path):
    """hetero validate's and tune's tapped model (the whole graph, more outputs) of a model read from a
    file: a weight stored as float_data cannot be referenced in the file, so the extract holds it, in
    another place among the initializers than the file's; nothing may take it for a weight left in the
    file (which then 'changed on disk')."""
    from hetero_cli.app.validate.reference import tapped_model

    nodes = [
        h.make_node("MatMul", ["x", "w0"], ["a"], name="mm0"),
        h.make_node("Relu", ["a"], ["r"], name="relu"),
        h.make_node("MatMul", ["r", "w1"], ["y"], name="mm1"),
    ]
    typed = h.make_tensor("w1", TensorProto.FLOAT, [64, 64], seeded((64, 64), seed=2).ravel().tolist())
    inits = [typed, const("w0", seeded((64, 64), seed=1))]  # w1 in float_data, not raw, listed first
    proto = make_model(nodes, [vi("x", [2, 64])], [vi("y", [2, 64])], inits)
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    model = hc.Core().read_model(path)
    tapped = tapped_model(model, ["r"])
    x = seeded((2, 64))
    got = hc.Core().compile_model(tapped, "CPU")({"x": x})
    want = ort_run(proto, {"x": x})
    np.testing.assert_array_equal(got["y"], want["y"])
    assert got["r"].shape == (2, 64)
    split = cpu_split(tapped)  # a split of it exports every subgraph's weights from the same places
    np.testing.assert_array_equal(split({"x": x})["y"], want["y"])
