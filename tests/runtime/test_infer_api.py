"""Inference requests: input forms, input errors, outputs served without a session, reuse."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import (
    assert_same,
    chain_model,
    const,
    hardmax_model,
    isinf_model,
    make_model,
    needs_openvino,
    ort_run,
    run_threads,
    seeded,
    vi,
)

import hetero_cli as hc


def two_input_model():
    nodes = [
        h.make_node("Add", ["a", "b"], ["s"], name="add"),
        h.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    return make_model(nodes, [vi("a", [2, 3]), vi("b", [2, 3])], [vi("y", [2, 3])])


@pytest.fixture(scope="module")
def compiled_chain():
    return hc.Core().compile_model(chain_model(), "HETERO:CPU")


# --- input forms ------------------------------------------------------------------------------------------


def test_inputs_as_dict_list_or_single_array(compiled_chain):
    x = seeded((2, 3))
    want = ort_run(chain_model(), {"x": x})
    request = compiled_chain.create_infer_request()
    assert_same(request.infer({"x": x}), want)
    assert_same(request.infer([x]), want)
    assert_same(request.infer((x,)), want)
    assert_same(request.infer(x), want)
    assert_same(compiled_chain({"x": x}), want)


def test_list_follows_model_input_order():
    compiled = hc.Core().compile_model(two_input_model(), "HETERO:CPU")
    a, b = seeded((2, 3), seed=1), seeded((2, 3), seed=2)
    assert_same(compiled.create_infer_request().infer([a, b]), ort_run(two_input_model(), {"a": a, "b": b}))


def test_non_contiguous_input_accepted(compiled_chain):
    x = seeded((3, 2)).T
    assert not x.flags.c_contiguous
    assert_same(compiled_chain({"x": x}), ort_run(chain_model(), {"x": np.ascontiguousarray(x)}))


def test_dynamic_dimension_accepts_any_size():
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu")]
    proto = make_model(nodes, [vi("x", ["batch", 3])], [vi("y", ["batch", 3])])
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    for batch in (1, 5):
        x = seeded((batch, 3))
        assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_scalar_rank0_input():
    nodes = [h.make_node("Mul", ["x", "k"], ["y"], name="scale")]
    proto = make_model(nodes, [vi("x", [3]), vi("k", [])], [vi("y", [3])])
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    x, k = seeded((3,)), np.array(2.0, np.float32)
    assert k.ndim == 0
    assert_same(compiled({"x": x, "k": k}), ort_run(proto, {"x": x, "k": k}))


def test_bool_and_int_inputs():
    nodes = [
        h.make_node("Cast", ["flag"], ["flag_i"], name="cast", to=TensorProto.INT64),
        h.make_node("Add", ["flag_i", "n"], ["y"], name="add"),
    ]
    proto = make_model(
        nodes,
        [vi("flag", [2], TensorProto.BOOL), vi("n", [2], TensorProto.INT64)],
        [vi("y", [2], TensorProto.INT64)],
    )
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    feeds = {"flag": np.array([True, False]), "n": np.array([3, 4], np.int64)}
    assert_same(compiled(feeds), ort_run(proto, feeds))


def test_overridable_initializer_listed_as_input():
    # Old models list initializers among graph inputs: optional, and overridable.
    nodes = [h.make_node("Add", ["x", "bias"], ["y"], name="add")]
    proto = make_model(nodes, [vi("x", [2]), vi("bias", [2])], [vi("y", [2])], [const("bias", [1.0, 2.0])])
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    x = seeded((2,))
    assert [i.name for i in compiled.inputs] == ["x"]
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))
    other = np.array([10.0, 20.0], np.float32)
    assert_same(compiled({"x": x, "bias": other}), ort_run(proto, {"x": x, "bias": other}))


# --- input errors -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("feeds", "expected"),
    [
        ({"z": np.zeros((2, 3), np.float32)}, ["'z'", "x"]),
        ({}, ["missing", "'x'"]),
        ({"x": np.zeros((2, 3), np.float64)}, ["'x'", "float64", "float32"]),
        ({"x": np.zeros((2, 3), np.int32)}, ["'x'", "int32", "float32"]),
        ({"x": np.zeros((3, 3), np.float32)}, ["'x'", "[3,3]", "[2,3]"]),
        ({"x": np.zeros((6,), np.float32)}, ["'x'", "[6]", "rank 2"]),
        ([np.zeros((2, 3), np.float32)] * 2, ["2 inputs", "1", "x"]),
    ],
)
def test_input_errors_are_actionable(compiled_chain, feeds, expected):
    with pytest.raises(hc.InferenceError) as err:
        compiled_chain.create_infer_request().infer(feeds)
    for text in expected:
        assert text in str(err.value)


def test_single_array_for_a_two_input_model():
    compiled = hc.Core().compile_model(two_input_model(), "HETERO:CPU")
    with pytest.raises(hc.InferenceError) as err:
        compiled.create_infer_request().infer(seeded((2, 3)))
    assert "a" in str(err.value)
    assert "b" in str(err.value)


def test_unknown_input_among_good_ones():
    compiled = hc.Core().compile_model(two_input_model(), "HETERO:CPU")
    a = seeded((2, 3))
    with pytest.raises(hc.InferenceError) as err:
        compiled.create_infer_request().infer({"a": a, "b": a, "c": a})
    assert "'c'" in str(err.value)


def test_failure_inside_a_subgraph_names_it():
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Reshape", ["r", "shape"], ["y"], name="reshape"),
    ]
    proto = make_model(nodes, [vi("x", ["n"])], [vi("y", [2, 2])], [const("shape", [2, 2], np.int64)])
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    assert_same(compiled({"x": seeded((4,))}), ort_run(proto, {"x": seeded((4,))}))
    with pytest.raises(hc.InferenceError) as err:
        compiled({"x": seeded((3,))})
    assert "subgraph1" in str(err.value)
    assert "CPU" in str(err.value)


def test_inference_error_is_a_value_error(compiled_chain):
    with pytest.raises(ValueError):
        compiled_chain.create_infer_request().infer({"x": np.zeros((2, 3), np.float64)})


# --- outputs served without a session ---------------------------------------------------------------------


def passthrough_model():
    nodes = [
        h.make_node("Constant", [], ["c0"], name="cst", value=const("v", [3.0, 4.0])),
        h.make_node("Add", ["c0", "k"], ["c1"], name="folded"),  # computable from constants alone
        h.make_node("Relu", ["x"], ["y"], name="relu"),
    ]
    outputs = [vi("y"), vi("x"), vi("k"), vi("c0"), vi("c1")]
    return make_model(nodes, [vi("x")], outputs, [const("k", [1.0, 2.0])])


def test_outputs_that_are_inputs_or_constants_need_no_session():
    proto = passthrough_model()
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    produced = {t for s in compiled.subgraphs for t in s.outputs}
    assert produced == {"y"}
    assert len(compiled.subgraphs) == 1
    x = seeded((2,))
    results = compiled({"x": x})
    assert list(results) == ["y", "x", "k", "c0", "c1"]
    assert_same(results, ort_run(proto, {"x": x}))


def test_model_of_only_passthrough_outputs():
    nodes = [h.make_node("Constant", [], ["c0"], name="cst", value=const("v", [3.0, 4.0]))]
    proto = make_model(nodes, [vi("x")], [vi("x"), vi("c0")])
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    assert compiled.subgraphs == ()
    x = seeded((2,))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_returned_arrays_are_the_callers(compiled_chain):
    proto = passthrough_model()
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    request = compiled.create_infer_request()
    x = seeded((2,))
    first = request.infer({"x": x})
    first["x"][:] = 99
    first["k"][:] = 99
    assert not np.any(x == 99)
    second = request.infer({"x": x})
    np.testing.assert_array_equal(second["x"], x)
    np.testing.assert_array_equal(second["k"], [1.0, 2.0])


# --- a model input used by several subgraphs ---------------------------------------------------------------


@needs_openvino
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])  # one session, or a session per subgraph
def test_model_input_feeds_several_subgraphs(hint):
    proto = isinf_model()
    compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": hint})
    readers = [s for s in compiled.subgraphs if "x" in s.inputs]
    assert len(readers) >= 2
    assert len({s.device for s in readers}) == 2
    x = np.array([[1.0, np.inf, -2.0], [0.5, -np.inf, 3.0]], np.float32)
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}), exact=False)


def test_model_input_feeds_several_cpu_only_subgraphs_when_forced():
    # The same with every subgraph on CPU: results are bit-exact.
    proto = isinf_model()
    model = hc.Core().read_model(proto)
    for op in model.get_ops():
        op.get_rt_info()["affinity"] = "CPU"
    compiled = hc.Core().compile_model(model, "HETERO:CPU")
    x = np.array([[1.0, np.inf, -2.0], [0.5, -np.inf, 3.0]], np.float32)
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


# --- reuse ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["LATENCY", "THROUGHPUT"])
def compiled_split(request):
    device = "HETERO:OPENVINO,CPU" if "OPENVINO" in hc.Core().available_devices else "HETERO:CPU"
    return hc.Core().compile_model(hardmax_model(), device, {"PERFORMANCE_HINT": request.param})


def test_repeated_infer_on_one_request(compiled_split):
    request = compiled_split.create_infer_request()
    xs = [seeded((2, 4), seed=s) for s in range(4)]
    first = [request.infer({"x": x})["y"].copy() for x in xs]
    again = [request.infer({"x": x})["y"] for x in xs]
    for a, b, x in zip(first, again, xs, strict=True):
        np.testing.assert_array_equal(a, b)
        assert_same({"y": a}, ort_run(hardmax_model(), {"x": x}), exact=False)
    assert not np.array_equal(first[0], first[1])
    np.testing.assert_array_equal(request.get_tensor("y"), again[-1])


def test_several_requests_are_independent(compiled_split):
    r1, r2 = compiled_split.create_infer_request(), compiled_split.create_infer_request()
    x1, x2 = seeded((2, 4), seed=1), seeded((2, 4), seed=2)
    y1 = r1.infer({"x": x1})["y"]
    y2 = r2.infer({"x": x2})["y"]
    assert_same({"y": y1}, ort_run(hardmax_model(), {"x": x1}), exact=False)
    assert_same({"y": y2}, ort_run(hardmax_model(), {"x": x2}), exact=False)
    np.testing.assert_array_equal(r1.get_tensor("y"), y1)
    np.testing.assert_array_equal(r2.get_tensor("y"), y2)


def test_requests_in_threads(compiled_split):
    xs = [seeded((2, 4), seed=s) for s in range(8)]
    want = [ort_run(hardmax_model(), {"x": x})["y"] for x in xs]
    got: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        request = compiled_split.create_infer_request()
        for _ in range(3):
            got[i] = request.infer({"x": xs[i]})["y"]

    run_threads(work, len(xs))
    for i, w in enumerate(want):
        np.testing.assert_allclose(got[i], w, rtol=1e-4, atol=1e-5)


def test_get_tensor_before_any_inference(compiled_chain):
    with pytest.raises(hc.InferenceError):
        compiled_chain.create_infer_request().get_tensor("y")


# --- ports and indexes, as OpenVINO's API takes them --------------------------------------------------------


def test_inputs_and_results_by_port_or_index(compiled_chain):
    import pickle

    x = seeded((2, 3))
    want = ort_run(chain_model(), {"x": x})["y"]
    request = compiled_chain.create_infer_request()
    for feeds in ({compiled_chain.inputs[0]: x}, {0: x}, {-1: x}):
        results = request.infer(feeds)
        for key in ("y", compiled_chain.outputs[0], 0, -1):
            np.testing.assert_array_equal(results[key], want)
            np.testing.assert_array_equal(request.get_tensor(key), want)
        assert list(results) == ["y"] and results.get(1) is None and results.get(["y"]) is None
        with pytest.raises(KeyError):
            results[1]
        again = pickle.loads(pickle.dumps(results))
        np.testing.assert_array_equal(again[0], want)


def test_in_takes_the_keys_results_take(compiled_chain):
    results = compiled_chain({"x": seeded((2, 3))})
    for key in ("y", compiled_chain.outputs[0], compiled_chain.output(0), 0, -1):
        assert key in results
    for key in ("x", compiled_chain.inputs[0], 1, -2, True, None):
        assert key not in results


def test_ports_as_openvino_gives_them():
    compiled = hc.Core().compile_model(two_input_model(), "HETERO:CPU")
    a, b = seeded((2, 3), seed=1), seeded((2, 3), seed=2)
    assert compiled.input(1) == compiled.inputs[1] and compiled.input("a") == compiled.inputs[0]
    y = compiled.output()
    assert y == compiled.output(0) == compiled.output("y") == compiled.outputs[0]
    assert (y.any_name, y.get_names(), y.get_element_type()) == ("y", {"y"}, np.dtype(np.float32))
    assert y.get_shape() == y.get_partial_shape() == (2, 3)
    want = ort_run(two_input_model(), {"a": a, "b": b})["y"]
    np.testing.assert_array_equal(
        compiled({compiled.input(0): a, compiled.input(1): b})[compiled.output()], want
    )
    np.testing.assert_array_equal(compiled.infer_new_request([a, b])[y], want)
    with pytest.raises(hc.ModelError, match=r"2 inputs \(a, b\): give input\(index\) or input\(name\)"):
        compiled.input()
    for key in (2, "c", -3):
        with pytest.raises(hc.ModelError, match="the model's inputs are a, b"):
            compiled.input(key)


def test_get_shape_of_a_dynamic_port_says_what_gives_it():
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu")]
    compiled = hc.Core().compile_model(make_model(nodes, [vi("x", ["n", 3])], [vi("y", ["n", 3])]), "CPU")
    assert compiled.input().get_partial_shape() == ("n", 3)
    with pytest.raises(hc.ModelError, match=r"'x' has a dynamic shape \[n,3\]: get_partial_shape\(\)"):
        compiled.input().get_shape()


def test_openvinos_share_keywords_are_taken_and_change_nothing(compiled_chain):
    x = seeded((2, 3))
    want = ort_run(chain_model(), {"x": x})["y"]
    request = compiled_chain.create_infer_request()
    first = request.infer({"x": x}, share_inputs=True, share_outputs=True)["y"]
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(compiled_chain({"x": x}, share_outputs=True)["y"], want)
    request.infer({"x": x + 1}, True, True)
    np.testing.assert_array_equal(first, want)  # the first inference's array stays the caller's
    np.testing.assert_array_equal(request.get_output_tensor(), request.get_tensor("y"))
    np.testing.assert_array_equal(request.get_output_tensor(0), request.get_tensor("y"))


def test_get_output_tensor_without_an_index_needs_one_output():
    compiled = hc.Core().compile_model(passthrough_model(), "HETERO:CPU")
    request = compiled.create_infer_request()
    request.infer({i.name: seeded(i.shape) for i in compiled.inputs})
    with pytest.raises(hc.InferenceError, match=r"give get_output_tensor\(index\)"):
        request.get_output_tensor()
    np.testing.assert_array_equal(request.get_output_tensor(1), request.get_tensor(compiled.outputs[1].name))


def test_a_compiled_models_properties_are_not_set_after_its_compile(compiled_chain):
    with pytest.raises(
        hc.ConfigError, match=r"fixed by its compile: give them in Core\.compile_model's config"
    ):
        compiled_chain.set_property({"PERF_COUNT": True})


def test_get_tensor_refuses_inputs_and_unknown_keys_with_a_message(compiled_chain):
    request = compiled_chain.create_infer_request()
    with pytest.raises(hc.InferenceError, match="no outputs yet"):
        request.get_tensor("y")
    request.infer({"x": seeded((2, 3))})
    with pytest.raises(hc.InferenceError, match="'x' is an input"):
        request.get_tensor("x")
    for key in (["y"], 3, "z"):
        with pytest.raises(hc.InferenceError, match="give an output's name, port or index"):
            request.get_tensor(key)


def test_an_input_index_out_of_range_is_named():
    compiled = hc.Core().compile_model(two_input_model(), "HETERO:CPU")
    with pytest.raises(hc.InferenceError, match="unknown input"):
        compiled.create_infer_request().infer({0: seeded((2, 3)), 2: seeded((2, 3))})


def test_an_input_given_twice_is_refused_and_copies_keep_ports(compiled_chain):
    x = seeded((2, 3))
    with pytest.raises(hc.InferenceError, match="'x' given twice"):
        compiled_chain.create_infer_request().infer({"x": x, 0: x})
    results = compiled_chain({"x": x})
    np.testing.assert_array_equal(results.copy()[0], results["y"])


def test_get_tensor_of_an_input_that_is_also_an_output():
    compiled = hc.Core().compile_model(passthrough_model(), "HETERO:CPU")
    request = compiled.create_infer_request()
    with pytest.raises(hc.InferenceError, match="no outputs yet"):
        request.get_tensor(1)
    names = [o.name for o in compiled.outputs]
    request.infer({i.name: seeded(i.shape) for i in compiled.inputs})
    for key in names:
        request.get_tensor(key)
