"""Static shape values (hetero_cli.graph.shape_values): tensors whose values follow from fixed shapes and
constants are never carried across a cut; each subgraph that reads one holds its value.

The OpenVINO EP folds such a tensor into a constant: a subgraph handing one on failed to compile ("sizes
node not found in graph cache", quirk openvino-shape-of-output) and one taking one as an input compiled
the shapes it sets as dynamic. The values must be exactly what ONNX Runtime computes for those tensors,
on generated graphs and on real models.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from support.helpers import assert_same, const, cpu_split, make_model, needs_openvino, ort_run, seeded, vi
from support.onnx_cases import node_case
from support.pypi_models import OCR_MODELS, RVM_DOWNSAMPLE_RATIO, RVM_FRAME, VIDEO_MODELS, fetch

import hetero_cli as hc
from hetero_cli.app.validate.reference import tapped_model
from hetero_cli.placement.visualize import subgraphs_dot


def upsampled(source: str, channels: int, mode: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Shape(source)[2:4] * 2 -> sizes (nodes shape, gather, mul, concat), then Relu(source) (relu) and
    Resize(that, sizes) -> z (resize): an upsampling sized from a shape. The nodes and their constants."""
    nodes = [
        h.make_node("Shape", [source], ["s"], name="shape"),
        h.make_node("Gather", ["s", "hw"], ["g"], name="gather"),
        h.make_node("Mul", ["g", "two"], ["m"], name="mul"),
        h.make_node("Concat", ["nc", "m"], ["sizes"], name="concat", axis=0),
        h.make_node("Relu", [source], ["r"], name="relu"),
        h.make_node("Resize", ["r", "", "", "sizes"], ["z"], name="resize", mode=mode),
    ]
    inits = [const("hw", [2, 3], np.int64), const("two", 2, np.int64), const("nc", [1, channels], np.int64)]
    return nodes, inits


def resize_model(declared_y: list[int] | None = None) -> onnx.ModelProto:
    """Conv -> y, then ``upsampled`` from y, linear: sizes [1, 4, 16, 16]."""
    nodes, inits = upsampled("y", 4, "linear")
    nodes.insert(0, h.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[1, 1, 1, 1]))
    inits.append(const("w", seeded((4, 3, 3, 3)) * 0.1))
    value_info = [vi("y", declared_y)] if declared_y else []
    return make_model(nodes, [vi("x", [1, 3, 8, 8])], [vi("z", None)], inits, value_info=value_info)


def test_the_values_are_worked_out_from_the_fixed_shapes():
    model = hc.Core().read_model(resize_model().SerializeToString())
    values = model.shape_values()
    assert list(values) == ["s", "g", "m", "sizes"]
    np.testing.assert_array_equal(values["sizes"], [1, 4, 16, 16])
    assert values["sizes"].dtype == np.int64


def test_a_dynamic_dimension_or_a_wrong_value_info_is_never_folded():
    dynamic = resize_model()
    dynamic.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "H"
    assert hc.Core().read_model(dynamic.SerializeToString()).shape_values() == {}
    # the model says y is 9x9; inference from the input says 8x8, which is what runs
    lying = hc.Core().read_model(resize_model(declared_y=[1, 4, 9, 9]).SerializeToString())
    np.testing.assert_array_equal(lying.shape_values()["sizes"], [1, 4, 16, 16])


def test_a_shape_value_read_across_a_cut_is_held_by_its_reader_and_gives_the_models_results():
    proto = resize_model()
    # conv and the shape arithmetic on A, the rest on B: sizes would cross the cut
    compiled = cpu_split(proto, ["A", "A", "A", "A", "A", "B", "B"])
    first, second = compiled.plan.subgraphs
    assert first.outputs == ("y",) and "sizes" not in second.inputs
    assert second.fixed == ("sizes",)
    assert "holds ['sizes']" in str(compiled.plan)
    assert compiled.plan.to_dict()["subgraphs"][1]["fixed"] == ["sizes"]
    dot = subgraphs_dot(compiled.model, compiled.plan)  # drawn in its reader, as a value of its own
    assert dot.count("static shape value") == 1 and "value:sizes@subgraph2" in dot
    x = seeded((1, 3, 8, 8))
    # Conv and Relu apart, not fused as in one session: float rounding apart
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


def test_a_group_making_nothing_but_shape_values_is_folded_into_its_readers():
    # the shape arithmetic alone on A (it reads the model input, nothing else of A's): no session for it
    nodes, inits = upsampled("x", 3, "nearest")
    proto = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("z", None)], inits)
    compiled = cpu_split(proto, ["A", "A", "A", "A", "B", "B"])
    assert [s.device for s in compiled.plan.subgraphs] == ["B"]
    assert compiled.plan.folded == ("shape", "gather", "mul", "concat")
    assert compiled.plan.to_dict()["folded"] == ["shape", "gather", "mul", "concat"]
    assert "static shape value" in subgraphs_dot(compiled.model, compiled.plan)
    x = seeded((1, 3, 4, 4))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


@needs_openvino
def test_openvino_making_a_shape_value_the_cpu_reads_compiles_and_runs():
    """Before: 'sizes node not found in graph cache' (the EP folds it and cannot hand it on)."""
    proto = resize_model()
    model = hc.Core().read_model(proto.SerializeToString())
    on = dict.fromkeys(["conv", "shape", "gather", "mul", "concat"], "OPENVINO")
    model.set_affinities({**on, "relu": "CPU", "resize": "CPU"})
    compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU", {"HETERO_FALLBACK": "NO"})
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU"]
    x = seeded((1, 3, 8, 8))
    np.testing.assert_allclose(compiled({"x": x})["z"], ort_run(proto, {"x": x})["z"], rtol=1e-4, atol=1e-5)


STATIC = {"ppocr_rec": {"x": (1, 3, 48, 320)}, "rvm_mobilenetv3": RVM_FRAME}


@pytest.mark.parametrize("name", list(STATIC))
def test_every_shape_value_of_a_real_model_is_what_onnx_runtime_computes(name, tmp_path):
    assert name in OCR_MODELS or name in VIDEO_MODELS
    proto = onnx.load(str(fetch(name)))
    for graph_input in proto.graph.input:
        for dim, size in zip(
            graph_input.type.tensor_type.shape.dim, STATIC[name].get(graph_input.name, ()), strict=False
        ):
            dim.Clear()
            dim.dim_value = size
    path = tmp_path / f"{name}_static.onnx"
    onnx.save(proto, str(path))
    model = hc.Core().read_model(path)
    values = model.shape_values()
    assert values  # RVM: the frame's size, for its last upsampling; PP-OCRv4's recogniser: its reshapes
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.random(i.shape, dtype=np.float32) for i in model.inputs}
    if name == "rvm_mobilenetv3":
        feeds["downsample_ratio"] = np.array([RVM_DOWNSAMPLE_RATIO], np.float32)
    got = hc.Core().compile_model(tapped_model(model, list(values)), "CPU")(feeds)
    for tensor, value in values.items():
        np.testing.assert_array_equal(got[tensor], value, err_msg=tensor)
        assert got[tensor].dtype == value.dtype, tensor


def layer_norm_expanded() -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """onnx's own LayerNormalization body over x [2,3,4,5] from axis 1 (its test case): the shape of its
    Mean and InvStdDev outputs is Concat(Shape(x)[:1], ConstantOfShape(Size(Shape(x)) - 1)) = [2,1,1,1].
    (model, feeds, expected outputs)."""
    return node_case("test_layer_normalization_4d_axis1_expanded")


def test_a_shape_made_by_constant_of_shape_is_a_shape_value_no_cut_carries():
    """ConstantOfShape of a shape value (a suffix of ones) is one too, and so is the shape made with it: split
    node by node, no cut carries either, and the split gives onnx's expected outputs."""
    proto, feeds, expected = layer_norm_expanded()
    values = hc.Core().read_model(proto).shape_values()
    reduced = next(t for t in values if t.endswith("_ReducedShape"))
    assert values[reduced].tolist() == [2, 1, 1, 1]
    compiled = cpu_split(proto)
    crossing = {t for s in compiled.plan.subgraphs for t in (*s.inputs, *s.outputs)}
    assert not crossing & set(values)
    got = dict(compiled.create_infer_request().infer(feeds))
    assert_same(got, ort_run(proto, feeds))
    for output, want in zip(proto.graph.output, expected, strict=True):
        np.testing.assert_allclose(got[output.name], want, rtol=1e-5, atol=1e-6)


@needs_openvino
def test_openvino_reshapes_to_a_shape_made_by_constant_of_shape_across_a_split():
    """The LayerNormalization body split node by node over OPENVINO and CPU: a Reshape on OPENVINO to that
    shape held as a constant, where a shape handed over as an input of unknown length was refused ("CPU
    plug-in doesn't support Reshape operation with dynamic rank")."""
    proto, feeds, expected = layer_norm_expanded()
    model = hc.Core().read_model(proto)
    for i, node in enumerate(model.get_ops()):
        node.get_rt_info()["affinity"] = ("OPENVINO", "CPU")[i % 2]
    got = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU").create_infer_request().infer(feeds)
    for output, want in zip(proto.graph.output, expected, strict=True):
        np.testing.assert_allclose(got[output.name], want, rtol=1e-4, atol=1e-5)
