"""A model whose value_info contradicts its tensors: ONNX Runtime runs it whole (it warns and goes by what
it infers), so a split of it must run too and give the same results."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import assert_same, cpu_split, make_model, needs_openvino, ort_run, seeded, vi

import hetero_cli as hc

LIES = {
    "a wrong dimension": vi("t", [3, 3]),
    "a wrong rank": vi("t", [6]),
    "a wrong dimension and rank": vi("t", [5, 3, 1]),
}


def relu_neg(declared=None):
    nodes = [h.make_node("Relu", ["x"], ["t"], name="relu"), h.make_node("Neg", ["t"], ["y"], name="neg")]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])
    if declared is not None:
        proto.graph.value_info.append(declared)
    return proto


@pytest.mark.parametrize("declared", list(LIES.values()), ids=list(LIES))
def test_a_split_at_a_tensor_whose_value_info_lies_gives_the_whole_models_results(declared, caplog):
    proto = relu_neg(declared)
    x = seeded((2, 3)) - 0.5
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto)
    assert "value_info contradicts" in caplog.text and "t (" in caplog.text
    request = compiled.create_infer_request()
    for _ in range(2):  # the first inference and one with the request's buffers in place
        assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}))


CHAINED_LIES = {
    "two wrong shapes in a row": [vi("t", [3, 2]), vi("n", [3, 2])],
    "a wrong rank in symbols": [vi("t", ["a", "b", "c"])],
    "a partly fixed wrong shape": [vi("t", [3, "b"])],
}


@pytest.mark.parametrize("declared", list(CHAINED_LIES.values()), ids=list(CHAINED_LIES))
def test_value_info_lies_over_two_boundaries_are_all_corrected(declared, caplog):
    """relu -> t -> neg -> n -> abs on three subgraphs: correcting t re-infers nothing by itself, and n's
    type (declared wrong, or inferred from t's lie) is reported by ORT's session as declared: both are
    corrected, with symbolic or partly fixed lies too."""
    nodes = [
        h.make_node("Relu", ["x"], ["t"], name="relu"),
        h.make_node("Neg", ["t"], ["n"], name="neg"),
        h.make_node("Abs", ["n"], ["y"], name="abs"),
    ]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])
    proto.graph.value_info.extend(declared)
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto, ["A", "B", "A"])
    assert "value_info contradicts" in caplog.text
    x = seeded((2, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_lie_that_fixes_a_dynamic_batch_is_corrected_too():
    """x [N,3]: t declared [3,4] and n [3,3]; ORT's session reports n as [3,?], keeping the lie's 3 where
    the tensor's batch is N: the type inferred without the value_info wins."""
    nodes = [
        h.make_node("Relu", ["x"], ["t"], name="relu"),
        h.make_node("Neg", ["t"], ["n"], name="neg"),
        h.make_node("Abs", ["n"], ["y"], name="abs"),
    ]
    proto = make_model(nodes, [vi("x", ["N", 3])], [vi("y", ["N", 3])])
    proto.graph.value_info.extend([vi("t", [3, 4]), vi("n", [3, 3])])
    compiled = cpu_split(proto, ["A", "B", "A"])
    x = seeded((2, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_true_value_info_is_kept_as_declared(caplog):
    proto = relu_neg(vi("t", [2, 3]))
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto)
    assert "contradicts" not in caplog.text
    assert compiled.subgraphs[0].session.get_outputs()[0].shape == [2, 3]


def test_a_minus_one_dimension_is_dynamic_not_contradicted(caplog):
    """paddle2onnx declares a dynamic batch as dim_value -1: ORT's [?, 3] for such a tensor contradicts
    nothing (it was called a contradiction, and the sessions on both sides were made twice)."""
    proto = relu_neg(vi("t", [-1, 3]))
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    proto.graph.output[0].type.tensor_type.shape.dim[0].dim_value = -1
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto)
    assert "contradicts" not in caplog.text
    x = seeded((4, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_wrong_element_type_fails_as_it_does_in_onnx_runtime():
    proto = relu_neg(vi("t", [2, 3], TensorProto.DOUBLE))
    with pytest.raises(Exception, match="double"):
        ort_run(proto, {"x": seeded((2, 3))})  # ORT refuses the model whole too
    with pytest.raises(hc.HeteroError):
        cpu_split(proto)({"x": seeded((2, 3))})


@needs_openvino
def test_a_lying_value_info_between_openvino_and_cpu(caplog):
    proto = relu_neg(vi("t", [3, 3]))
    model = hc.Core().read_model(proto)
    model.set_affinities({"relu": "OPENVINO", "neg": "CPU"})
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU"]
    assert "contradicts" in caplog.text
    x = seeded((2, 3)) - 0.5
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


# --- a shape only the run shows wrong: the sessions that pass the tensor are compiled again ---------------


def reshape_neg(declared=None, shape_input: bool = False):
    """x [N,6] -> Reshape to [-1,3] -> b -> Neg -> y; ``declared``: b's value_info (a traced export's [2,3]
    is right for N=1 only). With ``shape_input``, the target shape is an input (b's rank unknown)."""
    shape = [h.make_tensor("s", TensorProto.INT64, [2], [-1, 3])] if not shape_input else []
    nodes = [
        h.make_node("Reshape", ["x", "s"], ["b"], name="reshape"),
        h.make_node("Neg", ["b"], ["y"], name="neg"),
    ]
    inputs = [vi("x", ["N", 6])] + ([vi("s", [None], TensorProto.INT64)] if shape_input else [])
    proto = make_model(nodes, inputs, [vi("y", None)], shape)
    if declared is not None:
        proto.graph.value_info.append(declared)
    return proto


def test_a_value_info_true_only_for_one_batch_is_relaxed_when_the_run_shows_it(caplog):
    """Nothing at compile time contradicts b [2,3] (ORT infers b [?,3]); the second subgraph refuses b of
    N=2. ORT runs the model whole (it warns), so the split compiles its sessions again with b's first
    dimension dynamic, and gives the same results for every batch after that."""
    proto = reshape_neg(vi("b", [2, 3]))
    compiled = cpu_split(proto)
    request = compiled.create_infer_request()
    other = compiled.create_infer_request()  # made before the sessions were compiled again
    x1 = seeded((1, 6))
    assert_same(request.infer({"x": x1}), ort_run(proto, {"x": x1}))
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        for n in (2, 3, 1):
            x = seeded((n, 6), seed=n)
            assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}))
            assert_same(other.infer({"x": x}), ort_run(proto, {"x": x}))
    # one relax for both requests (the second took the revision the first swapped in)
    assert caplog.text.count("compiled again") == 1 and "b: dimension(s) 0 dynamic" in caplog.text


def test_a_wrong_rank_shown_by_the_run_is_relaxed_too():
    proto = reshape_neg(vi("b", [2, 3]), shape_input=True)
    compiled = cpu_split(proto)
    x, s = seeded((2, 6)), np.array([2, 2, 3], np.int64)
    assert_same(compiled({"x": x, "s": s}), ort_run(proto, {"x": x, "s": s}))


def test_a_relaxed_split_runs_asynchronously():
    proto = reshape_neg(vi("b", [2, 3]))
    compiled = cpu_split(proto)
    xs = [seeded((n, 6), seed=n) for n in (1, 2, 4, 2)]
    got = {}
    queue = hc.AsyncInferQueue(compiled, 2)
    queue.set_callback(lambda request, i: got.__setitem__(i, dict(request.results)))
    for i, x in enumerate(xs):
        queue.start_async({"x": x}, i)
    queue.wait_all()
    for i, x in enumerate(xs):
        assert_same(got[i], ort_run(proto, {"x": x}))


def test_onnx_shape_inference_that_differs_from_ort_kernels_is_relaxed():
    """MaxPool with ceil_mode=1, kernel 1, stride 3 over 3 values: onnx infers 2 outputs, ORT's kernel (as
    PyTorch) makes 1; a cut right after it ran into the consumer's refusal."""
    nodes = [
        h.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[1], strides=[3], ceil_mode=1),
        h.make_node("Relu", ["p"], ["y"], name="relu"),
    ]
    proto = make_model(nodes, [vi("x", [1, 1, 3])], [vi("y", None)])
    x = seeded((1, 1, 3))
    assert_same(cpu_split(proto)({"x": x}), ort_run(proto, {"x": x}))


def test_a_refused_model_input_is_not_relaxed_but_named():
    proto = reshape_neg()
    compiled = cpu_split(proto)
    with pytest.raises(hc.InferenceError, match="'x'"):
        compiled({"x": seeded((2, 5))})
    assert compiled.revision == 0


@needs_openvino
def test_a_relaxed_openvino_subgraph_profiled():
    proto = reshape_neg(vi("b", [2, 3]))
    model = hc.Core().read_model(proto)
    model.set_affinities({"reshape": "CPU", "neg": "OPENVINO"})
    compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU", {"PERF_COUNT": "YES"})
    request = compiled.create_infer_request()
    for n in (1, 4):
        x = seeded((n, 6), seed=n)
        assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}), exact=False)
    assert compiled.revision == 1 and all(s.profiler is not None for s in compiled.subgraphs)
    assert {i.exec_type for i in request.get_profiling_info()} >= {"OpenVINOExecutionProvider"}


def test_two_compiles_of_one_model_relax_their_own_sessions_and_leave_the_model_as_read():
    """A relax corrects the type of b in the compiled model's own copy of the model: each compiled model of
    one Model relaxes its own sessions, and the Model the caller holds declares b [2,3] as it did."""
    model = hc.Core().read_model(reshape_neg(vi("b", [2, 3])))
    first, second = cpu_split(model), cpu_split(model)
    x = seeded((2, 6))
    want = ort_run(reshape_neg(vi("b", [2, 3])), {"x": x})
    assert_same(first({"x": x}), want)
    assert_same(second({"x": x}), want)
    assert first.model.correction("b") is not None and second.model.correction("b") is not None
    assert model.correction("b") is None and model.tensor_info("b").shape == (2, 3)


def test_a_type_only_onnx_runtime_infers_is_relaxed_too():
    """g comes out of com.microsoft Gelu (onnx infers nothing for it): its boundary type is ORT's, which
    the lie on b reached; relax reads the type the session declares, whatever gave it."""
    shape = [h.make_tensor("s", TensorProto.INT64, [2], [-1, 3])]
    nodes = [
        h.make_node("Reshape", ["x", "s"], ["b"], name="reshape"),
        h.make_node("Gelu", ["b"], ["g"], name="gelu", domain="com.microsoft"),
        h.make_node("Neg", ["g"], ["y"], name="neg"),
    ]
    proto = make_model(
        nodes, [vi("x", ["N", 6])], [vi("y", None)], shape, opsets={"": 17, "com.microsoft": 1}
    )
    proto.graph.value_info.append(vi("b", [2, 3]))
    compiled = cpu_split(proto, ["A", "A", "B"])
    for n in (1, 3):
        x = seeded((n, 6), seed=n)
        assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_a_boundary_after_a_string_step_is_relaxed():
    shape = [h.make_tensor("s", TensorProto.INT64, [2], [-1, 3])]
    nodes = [
        h.make_node("Reshape", ["x", "s"], ["b"], name="reshape"),
        h.make_node("Cast", ["x"], ["text"], name="cast", to=TensorProto.STRING),
        h.make_node("Neg", ["b"], ["y"], name="neg"),
    ]
    outputs = [vi("y", None), vi("text", None, TensorProto.STRING)]
    proto = make_model(nodes, [vi("x", ["N", 6])], outputs, shape, value_info=[vi("b", [2, 3])])
    compiled = cpu_split(proto, ["A", "A", "B"])
    x = seeded((2, 6))
    got, want = compiled({"x": x}), ort_run(proto, {"x": x})
    assert_same({"y": got["y"]}, {"y": want["y"]}) and list(got["text"].flat) == list(want["text"].flat)


def test_a_value_info_lie_that_keeps_a_session_from_loading_is_corrected(caplog):
    """a declared [2,5] where Relu gives [2,2]: MatMul's shape inference refuses the consumer's input as
    declared (ORT's one session of the model only warns)."""
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu"),
        h.make_node("MatMul", ["a", "w"], ["y"], name="mm"),
    ]
    w = [h.make_tensor("w", TensorProto.FLOAT, [2, 3], [0.5] * 6)]
    proto = make_model(nodes, [vi("x", [2, 2])], [vi("y", None)], w, value_info=[vi("a", [2, 5])])
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = cpu_split(proto)
    assert "a ([2,5] declared, [2,2] inferred)" in caplog.text
    x = seeded((2, 2))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_profiling_counts_the_run_that_completed_and_keeps_earlier_ones():
    from hetero_cli.placement.config import SplitConfig

    proto = reshape_neg(vi("b", [2, 3]))
    compiled = cpu_split(proto, config=SplitConfig(hetero={"PERF_COUNT": True}))
    request = compiled.create_infer_request()
    request.infer({"x": seeded((1, 6))})
    request.infer({"x": seeded((3, 6))})  # relaxed on the way
    names = [i.node_name for i in request.get_profiling_info() if not i.node_name.startswith("out_")]
    assert sorted(names) == ["neg", "reshape"]
    assert [len(h) for h in request.get_profiling_history()] == [3, 3]


@needs_openvino
def test_a_value_info_lie_between_openvino_and_cpu_keeps_latency_from_one_session():
    """In ORT's one session of [OpenVINO, CPU], the OpenVINO EP hands r over in its declared shape [2,3]:
    a batch of 2 comes back cut to 2 rows, silently (plain ORT does the same). LATENCY's one session is
    that session, so such a value_info gives a session per subgraph, which relax corrects."""
    shape = [h.make_tensor("s", TensorProto.INT64, [2], [-1, 3])]
    nodes = [
        h.make_node("Reshape", ["x", "s"], ["b"], name="reshape"),
        h.make_node("Relu", ["b"], ["r"], name="relu"),
        h.make_node("Hardmax", ["r"], ["hm"], name="hardmax", axis=1),
        h.make_node("Mul", ["hm", "r"], ["m"], name="mul"),
        h.make_node("Sigmoid", ["m"], ["y"], name="sig"),
    ]
    lies = [vi(t, [2, 3]) for t in ("b", "r", "hm", "m")]
    proto = make_model(nodes, [vi("x", ["N", 6])], [vi("y", None)], shape, value_info=lies)
    compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU", "OPENVINO"]
    assert not compiled.one_session
    for n in (1, 2):
        x = seeded((n, 6), seed=n)
        assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


def flatten_model(batch, elem=TensorProto.FLOAT, tail=("Hardmax", "Mul", "Sigmoid")):
    """x [batch,2,4] -> Relu -> x.view(x.size(0), -1) (Shape, Gather, Unsqueeze, Concat, Reshape) -> r
    [batch,8] -> tail, with the correct value_info a PyTorch export writes: onnx's inference without it
    leaves r's dimensions unknown (the Reshape's shape is computed)."""
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu"),
        h.make_node("Shape", ["a"], ["shp"], name="shape"),
        h.make_node("Gather", ["shp", "zero"], ["n"], name="gather", axis=0),
        h.make_node("Unsqueeze", ["n", "ax"], ["u"], name="unsq"),
        h.make_node("Concat", ["u", "minus1"], ["cat"], name="concat", axis=0),
        h.make_node("Reshape", ["a", "cat"], ["r"], name="reshape"),
    ]
    if tail == ("Hardmax", "Mul", "Sigmoid"):
        nodes += [
            h.make_node("Hardmax", ["r"], ["hm"], name="hardmax", axis=1),
            h.make_node("Mul", ["hm", "r"], ["m"], name="mul"),
            h.make_node("Sigmoid", ["m"], ["y"], name="sig"),
        ]
    else:
        nodes.append(h.make_node(tail[0], ["r"], ["y"], name="last"))
    shapes = [
        h.make_tensor("zero", TensorProto.INT64, [], [0]),
        h.make_tensor("ax", TensorProto.INT64, [1], [0]),
        h.make_tensor("minus1", TensorProto.INT64, [1], [-1]),
    ]
    declared = [vi("a", [batch, 2, 4], elem)] + [vi(t, [batch, 8], elem) for t in ("r", "hm", "m")]
    return make_model(
        nodes, [vi("x", [batch, 2, 4], elem)], [vi("y", [batch, 8], elem)], shapes, value_info=declared
    )


@needs_openvino
@pytest.mark.parametrize("batch", [2, "batch"])
def test_a_correct_value_info_keeps_latencys_one_session(batch):
    proto = flatten_model(batch)
    compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU", "OPENVINO"]
    assert compiled.one_session
    x = seeded((2, 2, 4))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


def test_a_failure_not_about_shapes_is_raised_as_it_is_and_leaves_the_types(caplog):
    """Relu on uint16 has no CPU kernel: nothing to do with the (correct) value_info, which is neither
    'corrected' nor warned about."""
    proto = flatten_model(2, TensorProto.UINT16, tail=("Neg",))
    model = hc.Core().read_model(proto)
    with caplog.at_level(logging.WARNING, logger="hetero_cli"), pytest.raises(hc.HeteroError):
        cpu_split(model, ["A"] * 6 + ["B"])
    assert "contradicts" not in caplog.text and not model.correction("r") is not None


def test_a_lie_inside_a_subgraph_that_keeps_it_from_loading_is_corrected():
    """t1's value_info [2,4,2] (rank 3) reaches t2, the boundary, through inference; ORT's transpose
    optimizer refuses subgraph B as exported."""
    nodes = [
        h.make_node("Add", ["x", "x"], ["t0"], name="add"),
        h.make_node("Transpose", ["t0"], ["t1"], name="tr", perm=[1, 0]),
        h.make_node("Concat", ["t1", "t1"], ["t2"], name="cat", axis=1),
        h.make_node("Abs", ["t2"], ["y"], name="abs"),
    ]
    proto = make_model(nodes, [vi("x", ["N", 2])], [vi("y", None)], value_info=[vi("t1", [2, 4, 2])])
    x = seeded((3, 2))
    assert_same(cpu_split(proto, ["A", "B", "B", "A"])({"x": x}), ort_run(proto, {"x": x}))


def test_minus_one_input_dimensions_do_not_make_boundary_sizes_zero():
    """paddle2onnx's -1 for a dynamic dimension: onnx's inference computed with it (a strided Conv gave
    sizes of 0), the boundary after the Conv was declared [-1,2,0,0], and the next subgraph (PaddleOCR's
    direction classifier's flatten: pool, Shape, Slice, Concat, Reshape) refused to load."""
    nodes = [
        h.make_node("Conv", ["x", "w"], ["c"], name="conv", strides=[2, 2], pads=[1, 1, 1, 1]),
        h.make_node("MaxPool", ["c"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        h.make_node("Shape", ["g"], ["shp"], name="shape"),
        h.make_node("Slice", ["shp", "zero", "one"], ["n"], name="slice"),
        h.make_node("Concat", ["n", "minus1"], ["target"], name="concat", axis=0),
        h.make_node("Reshape", ["g", "target"], ["y"], name="flatten"),
    ]
    inits = [
        h.make_tensor("w", TensorProto.FLOAT, [2, 3, 3, 3], [0.1] * 54),
        h.make_tensor("zero", TensorProto.INT64, [1], [0]),
        h.make_tensor("one", TensorProto.INT64, [1], [1]),
        h.make_tensor("minus1", TensorProto.INT64, [1], [-1]),
    ]
    proto = make_model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", None)], inits)
    for i in (0, 2, 3):
        proto.graph.input[0].type.tensor_type.shape.dim[i].dim_value = -1
    model = hc.Core().read_model(proto)
    assert 0 not in model.tensor_info("c").shape  # [?,2,?,?]: unknown, not [?,2,0,0]
    x = seeded((2, 3, 8, 10))
    assert_same(cpu_split(model, ["A"] + ["B"] * 6)({"x": x}), ort_run(proto, {"x": x}))
