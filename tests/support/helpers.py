"""Small shared helpers for the unit tests: model building, reference runs, OpenVINO skip marks."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as h

from hetero_cli.ort.session import observe_sessions

ROOT = Path(__file__).resolve().parents[2]
PYTHON = (
    str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
)

HAS_OPENVINO = "OpenVINOExecutionProvider" in ort.get_available_providers()
SKIP_NO_OPENVINO = pytest.mark.skipif(
    not HAS_OPENVINO, reason="needs the OpenVINO execution provider (onnxruntime-openvino)"
)
requires_openvino = pytest.mark.skipif(
    not HAS_OPENVINO,
    reason="needs the OpenVINO execution provider: install hetero-cli[openvino] (onnxruntime-openvino)",
)
# For `pytestmark = OPENVINO_ONLY` or `@pytest.mark.parametrize(..., marks=OPENVINO_ONLY)`.
OPENVINO_ONLY = [pytest.mark.openvino, SKIP_NO_OPENVINO]

FLOAT = TensorProto.FLOAT


def _gpu_answers() -> bool:
    from hetero_cli.placement import devices as registry

    return registry.is_available(registry.lookup("GPU"))


HAS_GPU = _gpu_answers()
# A split's second device: OPENVINO (onnxruntime-openvino) or GPU (onnxruntime-gpu on an NVIDIA GPU);
# None with the CPU flavour, where the split tests run on CPU alone.
ACCELERATOR = "OPENVINO" if HAS_OPENVINO else "GPU" if HAS_GPU else None
SPLIT_DEVICES: tuple[str, ...] = (ACCELERATOR, "CPU") if ACCELERATOR else ("CPU",)
SPLIT = "HETERO:" + ",".join(SPLIT_DEVICES)
# A split's results against one CPU session: the GPU computes MatMul and Conv in TF32 by default (ORT's
# CUDA EP as a user gets it; 10-bit mantissas), so they agree to about 1e-3 there, to 1e-4 elsewhere.
# tests/runtime/test_gpu.py turns TF32 off and checks random graphs to the tight tolerance.
SPLIT_TOLERANCE = {"rtol": 5e-3, "atol": 5e-3} if ACCELERATOR == "GPU" else {"rtol": 1e-4, "atol": 1e-5}
# Config for float32 arithmetic on the accelerator (TF32 off on the GPU), for tests held to f32 tolerances.
EXACT_F32: dict[str, dict[str, str]] = {"GPU": {"use_tf32": "0"}} if ACCELERATOR == "GPU" else {}


def needs_openvino(obj):
    """Decorator: mark ``openvino`` and skip cleanly where the OpenVINO EP is not installed."""
    return pytest.mark.openvino(SKIP_NO_OPENVINO(obj))


def needs_accelerator(obj):
    """Decorator: skip cleanly where this ORT flavour has no second device (ACCELERATOR) to split over."""
    return pytest.mark.skipif(
        ACCELERATOR is None, reason="needs a second device: onnxruntime-openvino, or onnxruntime-gpu on a GPU"
    )(obj)


def vi(name: str, shape: Sequence[int | str | None] | None = (2,), elem: int = FLOAT) -> onnx.ValueInfoProto:
    """A tensor value_info."""
    return h.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def const(name: str, values, dtype=np.float32) -> onnx.TensorProto:
    """An initializer."""
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def make_model(
    nodes: Iterable[onnx.NodeProto],
    inputs: Iterable[onnx.ValueInfoProto],
    outputs: Iterable[onnx.ValueInfoProto],
    initializers: Iterable[onnx.TensorProto] = (),
    *,
    name: str = "test_graph",
    opsets: Mapping[str, int] | None = None,
    ir_version: int = 9,
    functions: Iterable[onnx.FunctionProto] = (),
    value_info: Iterable[onnx.ValueInfoProto] = (),
) -> onnx.ModelProto:
    """A model with an explicit IR version (make_model's default can be newer than ORT accepts)."""
    graph = h.make_graph(list(nodes), name, list(inputs), list(outputs), list(initializers))
    graph.value_info.extend(value_info)
    opsets = {"": 17} if opsets is None else opsets
    return h.make_model(
        graph,
        ir_version=ir_version,
        opset_imports=[h.make_opsetid(d, v) for d, v in opsets.items()],
        functions=list(functions),
    )


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One plain CPU-EP session over the whole model: the reference results."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds)), strict=True))


def assert_same(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], *, exact: bool = True) -> None:
    """Same outputs: bit-exact (every subgraph on CPU) or within float tolerance."""
    assert list(got) == list(want)
    for name, w in want.items():
        g = np.asarray(got[name])
        assert g.dtype == w.dtype, name
        assert g.shape == w.shape, name
        if exact or not np.issubdtype(w.dtype, np.floating):
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=name)


def hardmax_model() -> onnx.ModelProto:
    """x[2,4] -> MatMul -> Add -> Relu -> Hardmax -> Mul(relu, onehot) -> Sigmoid -> y: the samples' model.

    The OpenVINO EP refuses Hardmax, so automatic HETERO:OPENVINO,CPU gives OPENVINO -> CPU -> OPENVINO.
    """
    sys.path.insert(0, str(ROOT / "samples"))
    try:
        from _example_model import build_model
    finally:
        sys.path.remove(str(ROOT / "samples"))
    return build_model()


def guarded_chain_model() -> onnx.ModelProto:
    """x[4,8] -> Relu -> IsInf -> Where(inf, 0, relu) -> Sigmoid (output c) -> Hardmax -> y: the OpenVINO
    EP refuses IsInf and Hardmax, and the nodes it takes sit on both sides of IsInf."""
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu"),
        h.make_node("IsInf", ["a"], ["inf"], name="isinf"),
        h.make_node("Where", ["inf", "zero", "a"], ["b"], name="where"),
        h.make_node("Sigmoid", ["b"], ["c"], name="sigmoid"),
        h.make_node("Hardmax", ["c"], ["y"], name="hardmax"),
    ]
    zero = h.make_tensor("zero", FLOAT, [], [0.0])
    return make_model(
        nodes, [vi("x", [4, 8])], [vi("y", [4, 8]), vi("c", [4, 8])], [zero], name="guarded_chain"
    )


def isinf_model() -> onnx.ModelProto:
    """x[2,3] -> IsInf -> Cast -> Add(relu(x)) -> y: the OpenVINO EP refuses IsInf."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("IsInf", ["x"], ["inf"], name="isinf"),
        h.make_node("Cast", ["inf"], ["inf_f"], name="cast", to=FLOAT),
        h.make_node("Add", ["r", "inf_f"], ["s"], name="add"),
        h.make_node("Mul", ["s", "x"], ["y"], name="mul"),
    ]
    return make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], name="isinf_model")


#: a chain where only Exp's arithmetic differs between OpenVINO and the CPU EP (hetero validate's bisect)
EXP_CHAIN = ("Neg", "Abs", "Relu", "Exp", "Neg", "Abs", "Relu", "Neg")


def chain_model(ops: Sequence[str] = ("Relu", "Neg", "Abs", "Sigmoid"), shape=(2, 3)) -> onnx.ModelProto:
    """x -> op0 -> op1 -> ... -> y, nodes named n0, n1, ...; every op runs on every EP."""
    names = ["x", *[f"t{i}" for i in range(len(ops) - 1)], "y"]
    nodes = [h.make_node(op, [names[i]], [names[i + 1]], name=f"n{i}") for i, op in enumerate(ops)]
    return make_model(nodes, [vi("x", shape)], [vi("y", shape)], name="chain")


def seeded(shape, dtype=np.float32, seed: int = 0) -> np.ndarray:
    """A deterministic random array."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def cpu_split(proto, devices: Sequence[str] | None = None, config=None):
    """``proto`` (a ModelProto or a hetero_cli Model) compiled with node i on made-up device
    ``devices[i]`` (default: alternating A, B), each of them the CPU EP: a split into several CPU
    subgraphs, bit-exact against one ORT session. ``config``: a SplitConfig (default: none); under
    HETERO_CONCURRENCY=CONCURRENT branches of one device that meet only at a model input are cut apart,
    as Core.compile_model cuts them."""
    from hetero_cli.graph.model import Model
    from hetero_cli.placement import devices as registry
    from hetero_cli.placement.config import SplitConfig
    from hetero_cli.placement.partition import partition
    from hetero_cli.runtime import CompiledModel
    from hetero_cli.runtime.compiler import compile_plan

    model = proto if isinstance(proto, Model) else Model(proto)
    ops = [n.get_friendly_name() for n in model.get_ops()]
    devices = list(devices or ["AB"[i % 2] for i in range(len(ops))])
    config = config or SplitConfig()
    branches = config.concurrency == "CONCURRENT"
    plan = partition(model, dict(zip(ops, devices, strict=True)), branches=branches)
    cpu = registry.lookup("CPU")
    compiled = compile_plan(model, plan, {d: cpu for d in set(devices)}, config, "HETERO:CPU")
    return CompiledModel(compiled)


def run_threads(work: Callable[[int], None], count: int, timeout_s: float = 120) -> None:
    """``work(i)`` for i in range(count), each on its own thread, started together; re-raise the first
    failure in the calling thread, and fail if a thread hangs."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def reference(model_proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the whole model in ONE plain ONNX Runtime session on the CPU EP: {output name: array}.

    ORT refuses two nodes with one name, which ONNX allows (and hetero-cli copes with): such names are
    cleared in a copy first, which changes no value.
    """
    names = Counter(n.name for n in model_proto.graph.node if n.name)
    if any(c > 1 for c in names.values()):
        copy = onnx.ModelProto()
        copy.CopyFrom(model_proto)
        for n in copy.graph.node:
            if names[n.name] > 1:
                n.name = ""
        model_proto = copy
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds)), strict=True))


class WorkClock:
    """A tune's clock (tune_model's ``now``) that moves only as the tune works: ``session_s`` for each
    session it creates (a compile's price) and the latencies its timer reports. The budget's checks then
    see the same seconds on any machine under any load, where wall time depends on both."""

    def __init__(self, session_s: float) -> None:
        self.session_s = session_s
        self.seconds = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.seconds

    def _add(self, seconds: float) -> None:
        with self._lock:  # sessions are created on a pool's threads
            self.seconds += seconds

    @contextlib.contextmanager
    def counting_sessions(self) -> Iterator[None]:
        """Within the block, each session hetero-cli creates moves the clock by ``session_s``."""
        with observe_sessions(lambda _: self._add(self.session_s)):
            yield

    def timing(self, timer):
        """``timer`` (measure.Timer), moving the clock by the latencies it reports."""

        def timed(label, run, count):
            samples = timer(label, run, count)
            self._add(sum(samples) / 1e3)
            return samples

        return timed


def optimized(request: Any) -> bool:
    """Whether ORT's graph optimizations are on for the session a SessionRequest (observe_sessions) asks
    for: the query's probes may turn them off."""
    return request.options.graph_optimization_level != ort.GraphOptimizationLevel.ORT_DISABLE_ALL


def queued_results(compiled, xs: Sequence[np.ndarray], jobs: int, output: str = "y") -> list[np.ndarray]:
    """``output`` of each of ``xs`` (fed as ``x``), inferred through an AsyncInferQueue of ``jobs``
    requests, in the order of ``xs``."""
    import hetero_cli as hc

    got: dict[int, np.ndarray] = {}
    queue = hc.AsyncInferQueue(compiled, jobs)
    queue.set_callback(lambda request, k: got.__setitem__(k, request.results[output].copy()))
    for k, x in enumerate(xs):
        queue.start_async({"x": x}, userdata=k)
    queue.wait_all()
    return [got[k] for k in range(len(xs))]
