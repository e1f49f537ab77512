"""Issue 5, concurrency: several InferRequests of one compiled model, driven from several threads at once.

The model is split OPENVINO -> CPU -> OPENVINO (Hardmax, which the OpenVINO EP refuses, in the middle), so
every request crosses devices twice per inference; threads start together (a barrier) and each checks
every result against one plain ONNX Runtime session. The same with profiling on: each request's counters
are its own runs, complete, while other threads keep inferring.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as h
from onnx import numpy_helper
from support.helpers import OPENVINO_ONLY, make_model, ort_run, run_threads, vi

import hetero_cli as hc

pytestmark = OPENVINO_ONLY

THREADS = 6
ROUNDS = 12


def split_model():
    """x[16,64] -> MatMul -> Relu -> Hardmax -> Mul(relu) -> MatMul -> Sigmoid -> y; plus z = Tanh(x)."""
    rng = np.random.default_rng(3)
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
        h.make_node("Relu", ["a"], ["r"], name="relu"),
        h.make_node("Hardmax", ["r"], ["onehot"], name="hardmax", axis=-1),
        h.make_node("Mul", ["r", "onehot"], ["picked"], name="pick"),
        h.make_node("MatMul", ["picked", "w2"], ["b"], name="mm2"),
        h.make_node("Sigmoid", ["b"], ["y"], name="sigmoid"),
        h.make_node("Tanh", ["x"], ["z"], name="tanh"),
    ]
    inits = [
        numpy_helper.from_array((rng.standard_normal((64, 64)) * 0.2).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((64, 32)) * 0.2).astype(np.float32), "w2"),
    ]
    return make_model(nodes, [vi("x", [16, 64])], [vi("y", [16, 32]), vi("z", [16, 64])], inits, name="split")


@pytest.fixture(scope="module")
def proto():
    return split_model()


@pytest.fixture(scope="module")
def inputs(proto):
    xs = [np.random.default_rng(s).standard_normal((16, 64)).astype(np.float32) for s in range(THREADS * 2)]
    return xs, [ort_run(proto, {"x": x}) for x in xs]


def check(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert list(got) == list(want)
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_the_model_is_really_split_three_ways(proto):
    compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs][:3] == ["OPENVINO", "CPU", "OPENVINO"]


# LATENCY (the default) runs this split in the query's one session, THROUGHPUT in a session per subgraph
HINTS = pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])


def compiled_with(proto, hint: str) -> hc.CompiledModel:
    compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": hint})
    assert compiled.one_session == (hint == "LATENCY")
    return compiled


@HINTS
def test_requests_on_many_threads_at_once_give_correct_results(proto, inputs, hint):
    xs, want = inputs
    compiled = compiled_with(proto, hint)

    def work(i: int) -> None:
        request = compiled.create_infer_request()
        for k in range(ROUNDS):
            j = (i + k * THREADS) % len(xs)  # threads cycle through different inputs
            check(request.infer({"x": xs[j]}), want[j])
            check({n: request.get_tensor(n) for n in want[j]}, want[j])

    run_threads(work, THREADS)


@HINTS
def test_results_stay_the_callers_while_other_threads_infer(proto, inputs, hint):
    xs, want = inputs
    compiled = compiled_with(proto, hint)
    kept: dict[int, list[dict[str, np.ndarray]]] = {}

    def work(i: int) -> None:
        request = compiled.create_infer_request()
        kept[i] = [request.infer({"x": xs[i]}) for _ in range(ROUNDS)]

    run_threads(work, THREADS)
    for i, results in kept.items():  # no result was overwritten by a later inference of any thread
        for result in results:
            check(result, want[i])


def test_one_compiled_model_with_profiling_on_many_threads(proto, inputs):
    """Every inference of every thread's request has its counters, each subgraph's: the threads' runs
    interleave in one trace per session, read (ended: runtime.profiling) once they have all run."""
    xs, want = inputs
    compiled = hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU", {"PERF_COUNT": "YES"})
    subgraphs = {s.index + 1 for s in compiled.subgraphs}
    requests = [compiled.create_infer_request() for _ in range(THREADS)]

    def work(i: int) -> None:
        for _ in range(ROUNDS):
            check(requests[i].infer({"x": xs[i]}), want[i])

    run_threads(work, THREADS)
    for request in requests:
        history = request.get_profiling_history()
        assert len(history) == ROUNDS
        for infos in history:
            assert {info.subgraph for info in infos} == subgraphs, infos
            assert all(info.real_time_us >= 0 for info in infos)


@HINTS
def test_one_request_shared_by_threads_returns_each_caller_its_own_results(proto, inputs, hint):
    # OpenVINO's InferRequest is one-at-a-time; here each infer() call still returns its own outputs
    xs, want = inputs
    request = compiled_with(proto, hint).create_infer_request()

    def work(i: int) -> None:
        for _ in range(ROUNDS):
            check(request.infer({"x": xs[i]}), want[i])

    run_threads(work, THREADS)
