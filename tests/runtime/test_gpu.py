"""CUDA paths: GPU subgraphs, tensors kept on the device between GPU subgraphs, counters of async kernels.

Marked gpu: they run where onnxruntime-gpu and an NVIDIA GPU are present (``make FLAVOUR=gpu test``) and
skip elsewhere, saying so.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as h
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from onnx import TensorProto as T
from support.counters import parse_counters
from support.graphs import WITH_SESSIONS, Case, cases
from support.helpers import reference

import hetero_cli as hc
from hetero_cli.placement import devices as registry
from hetero_cli.runtime.profiling import format_counters
from hetero_cli.runtime.steps import plan_steps as _steps
from hetero_cli.runtime.walk import run_session as _run

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not registry.is_available(registry.lookup("GPU")),
        reason="needs an NVIDIA GPU and onnxruntime-gpu (make FLAVOUR=gpu test)",
    ),
]


def _diamond() -> onnx.ModelProto:
    """a, r (GPU) -> b (CPU) -> c, d (GPU), r -> c: the tensor r goes from one GPU subgraph to the other
    alone, a to the CPU subgraph, y (a model output) to the caller."""
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["a"], name="a"),
        h.make_node("Relu", ["a"], ["r"], name="r"),
        h.make_node("Hardmax", ["a"], ["b"], name="b"),
        h.make_node("Add", ["r", "b"], ["c0"], name="c"),
        h.make_node("Tanh", ["c0"], ["y"], name="d"),
    ]
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    graph = h.make_graph(
        nodes,
        "diamond",
        [h.make_tensor_value_info("x", T.FLOAT, [8, 64])],
        [h.make_tensor_value_info("y", T.FLOAT, [8, 64])],
        initializer=[onnx.numpy_helper.from_array(w, "w")],
    )
    return h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])


def _compiled(config: dict | None = None) -> hc.CompiledModel:
    model = hc.Core().read_model(_diamond())
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = "CPU" if node.get_friendly_name() == "b" else "GPU"
    return hc.Core().compile_model(model, "HETERO:GPU,CPU", config)


def test_split_across_gpu_and_cpu_gives_the_whole_models_result() -> None:
    compiled = _compiled()
    assert [s.device for s in compiled.subgraphs] == ["GPU", "CPU", "GPU"]
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    got = compiled({"x": x})["y"]
    # ORT's own [CUDA, CPU] session runs the same kernels (MatMul in TF32 on the GPU): the same numbers
    ref = ort.InferenceSession(
        _diamond().SerializeToString(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    np.testing.assert_allclose(got, ref.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    # the CPU alone computes the MatMul in full f32: TF32's 10-bit mantissa is the only difference
    cpu = ort.InferenceSession(_diamond().SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, cpu.run(None, {"x": x})[0], rtol=1e-2, atol=1e-2)


def test_tensor_between_gpu_subgraphs_stays_on_the_device_and_one_a_cpu_subgraph_reads_goes_to_host() -> None:
    compiled = _compiled()
    first, _, last = _steps(compiled.current())
    # the wrappers hold the numpy arrays their C values borrow
    x = ort.OrtValue.ortvalue_from_numpy(np.ones((8, 64), np.float32))
    produced = dict(
        zip(first.outputs, _run(first, first.compiled.session, {"x": x._get_c_value()}), strict=True)
    )
    assert set(produced) == {"a", "r"}
    assert produced["r"].device_name().lower() == "cuda"  # only the GPU subgraph c reads it
    assert produced["a"].device_name().lower() == "cpu"  # the CPU subgraph b reads it
    b = ort.OrtValue.ortvalue_from_numpy(np.zeros((8, 64), np.float32))
    [y] = _run(last, last.compiled.session, {"r": produced["r"], "b": b._get_c_value()})
    assert y.device_name().lower() == "cpu"  # a model output: the caller gets host memory
    np.testing.assert_allclose(y.numpy(), np.tanh(produced["r"].numpy()), rtol=1e-5, atol=1e-6)


def test_gpu_counters_never_print_launch_time_as_execute_time() -> None:
    compiled = _compiled({"PERF_COUNT": "YES"})
    request = compiled.create_infer_request()
    request.infer({"x": np.ones((8, 64), np.float32)})
    infos = request.get_profiling_info()
    back, total = parse_counters(format_counters(infos))
    assert back == infos and total == sum(i.real_time_us for i in infos)
    for sub in compiled.subgraphs:
        if sub.device != "GPU":
            continue
        mine = [i for i in infos if i.subgraph == sub.index + 1]
        assert any(i.node_name.endswith("(synchronised run)") and i.real_time_us > 0 for i in mine)
        assert all(i.real_time_us == 0 for i in mine if i.exec_type.endswith("(launch)"))


RANDOM = settings(WITH_SESSIONS, max_examples=40)
F32 = {"GPU": {"use_tf32": "0"}}  # the GPU computes MatMul in f32, as the CPU reference does


@RANDOM
@given(cases(("GPU", "CPU"), max_steps=12))
def test_random_graphs_cut_between_gpu_and_cpu_give_the_whole_models_results(case: Case) -> None:
    """Random DAGs with random GPU / CPU affinities (tests/support/graphs.py): tensors cross both ways, some stay
    on the GPU between GPU subgraphs, and every output is the one plain ORT session's."""
    want = reference(case.model, case.feeds)
    model = hc.Core().read_model(case.model)
    case.apply_affinities(model)
    got = hc.Core().compile_model(model, "HETERO:GPU,CPU", F32).create_infer_request().infer(case.feeds)
    assert list(got) == [o.name for o in case.model.graph.output]
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, err_msg=name, **case.tolerance(name))


@RANDOM
@given(cases(max_steps=10, refused=True))
def test_automatic_gpu_cpu_split_of_random_graphs_gives_the_whole_models_results(case: Case) -> None:
    """Automatic HETERO:GPU,CPU on random DAGs with ops some EPs refuse (Hardmax has no CUDA kernel)."""
    want = reference(case.model, case.feeds)
    got = hc.Core().compile_model(case.model, "HETERO:GPU,CPU", F32).create_infer_request().infer(case.feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, err_msg=name, **case.tolerance(name))
