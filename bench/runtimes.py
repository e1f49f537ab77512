"""The runtimes the harness compares, each prepared once and then called for one inference at a time.

* ``ort_cpu`` / ``ort_ov``: one ONNX Runtime session with providers [CPU] / [OpenVINO, CPU] (the baselines);
* ``hetero_cpu``: hetero-cli ``HETERO:CPU``; ``hetero_ov``: automatic ``HETERO:OPENVINO,CPU`` (the default
  PERFORMANCE_HINT=LATENCY: one session may run several subgraphs); ``hetero_ov_stages``: the same with
  PERFORMANCE_HINT=THROUGHPUT, one session per subgraph (reported beside it on the synthetic model);
* ``split_k<N>``: hetero-cli with manual affinities cutting the model into N chunks, alternating CPU and
  OPENVINO; ``chain_k<N>``: the very sessions of that split, chained by a minimal loop (the floor any
  hetero engine can reach with ORT sessions);
* ``openvino``: native OpenVINO (``openvino.Core().compile_model(path, "CPU")``) on the same file, at f32;
* CUDA rows (bench/gpu.py): ``ort_cuda``, one ORT session with providers [CUDA, CPU]; ``hetero_gpu``,
  automatic ``HETERO:GPU,CPU``; ``gsplit_k<N>``, manual affinities cutting the model into N chunks
  alternating GPU and CPU.

All runtimes read the model from an ONNX file, the way a user gives it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

import hetero_cli
from hetero_cli.graph.model import Model

# Native OpenVINO picks bf16 on CPUs with AMX/AVX512-BF16; every runtime here computes in f32.
OPENVINO_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
SPLIT_DEVICES = ("CPU", "OPENVINO")
GPU_SPLIT_DEVICES = ("GPU", "CPU")
THREADS_ENV = "HETERO_BENCH_THREADS"
_threads = int(os.environ.get(THREADS_ENV, "0") or 0)


def set_threads(n: int) -> None:
    """Threads per session for every runtime (0: each runtime's default), also for worker processes."""
    global _threads
    _threads = max(0, int(n))
    os.environ[THREADS_ENV] = str(_threads)


@contextlib.contextmanager
def threads_set(n: int | None) -> Iterator[None]:
    """Within the block, ``n`` threads per session (None: leave the setting alone)."""
    if n is None:
        yield
        return
    before = _threads
    set_threads(n)
    try:
        yield
    finally:
        set_threads(before)


def provider_list(kind: str) -> list[Any]:
    """ORT providers for "CPU", "OPENVINO,CPU" (the OpenVINO EP on its CPU device) or "CUDA,CPU"."""
    ov_options = {"device_type": "CPU"}
    if _threads:
        ov_options["num_of_threads"] = str(_threads)
    return {
        "CPU": ["CPUExecutionProvider"],
        "OPENVINO,CPU": [("OpenVINOExecutionProvider", ov_options), "CPUExecutionProvider"],
        "CUDA,CPU": ["CUDAExecutionProvider", "CPUExecutionProvider"],
    }[kind]


THROUGHPUT = "THROUGHPUT"


def hetero_config(hint: str | None = None) -> dict[str, Any] | None:
    """hetero-cli's config for the thread setting and PERFORMANCE_HINT ``hint`` (None: defaults)."""
    config: dict[str, Any] = {}
    if _threads:
        config.update(
            {"CPU": {"INFERENCE_NUM_THREADS": _threads}, "OPENVINO": {"INFERENCE_NUM_THREADS": _threads}}
        )
    if hint is not None:
        config["PERFORMANCE_HINT"] = hint
    return config or None


@dataclass(frozen=True)
class Spec:
    """What a runtime is: a label for tables, and the runtime(s) whose median its ratio is taken against."""

    label: str
    baseline: tuple[str, ...] = ()


SPECS: dict[str, Spec] = {
    "ort_cpu": Spec("ORT [CPU]"),
    "hetero_cpu": Spec("hetero HETERO:CPU", ("ort_cpu",)),
    "ort_ov": Spec("ORT [OpenVINO, CPU]"),
    "hetero_ov": Spec("hetero HETERO:OPENVINO,CPU auto", ("ort_ov",)),
    "hetero_ov_stages": Spec("hetero HETERO:OPENVINO,CPU auto, a session per subgraph", ("ort_ov",)),
    "openvino": Spec("native OpenVINO CPU f32", ("ort_ov",)),
    "ort_cuda": Spec("ORT [CUDA, CPU]"),
    "hetero_gpu": Spec("hetero HETERO:GPU,CPU auto", ("ort_cuda",)),
}
# A forced split runs half of the model on each EP: its compute-matched baseline is the mean of both sessions.
MIX = ("ort_cpu", "ort_ov")
GPU_MIX = ("ort_cuda", "ort_cpu")


def spec(runtime: str) -> Spec:
    """The Spec of a runtime id, including the ``split_k<N>`` and ``chain_k<N>`` families."""
    if runtime in SPECS:
        return SPECS[runtime]
    if runtime.startswith("split_k"):
        return Spec(f"hetero split k={runtime[7:]} CPU/OPENVINO", MIX)
    if runtime.startswith("chain_k"):
        return Spec(f"same k={runtime[7:]} sessions, bare loop", MIX)
    if runtime.startswith("gsplit_k"):
        return Spec(f"hetero split k={runtime[8:]} GPU/CPU", GPU_MIX)
    raise KeyError(runtime)


@dataclass
class Prepared:
    """A compiled runtime: ``infer()`` runs one inference on the bound feeds, ``outputs()`` returns them."""

    runtime: str
    infer: Callable[[], Any]
    outputs: Callable[[], dict[str, np.ndarray]]
    compile_s: float
    subgraphs: int = 1
    boundaries: int = 0
    sessions: int = 1  # sessions run per inference: 1 where LATENCY runs a split in the query's one session
    # hetero-cli's: each subgraph's device and nodes, and the sessions an inference runs (placement_key)
    placement: str = ""
    handle: Any = None  # the session / compiled model, kept alive while the runtime is in use


def session_options() -> ort.SessionOptions:
    """Defaults as a user gets them (all graph optimizations, default threads), with ORT's logs quiet."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if _threads:
        so.intra_op_num_threads = _threads
    return so


def ort_session(path: Path, providers: str) -> ort.InferenceSession:
    """One ORT session over the whole model (``providers``: "CPU" or "OPENVINO,CPU")."""
    return ort.InferenceSession(str(path), session_options(), providers=provider_list(providers))


def placement_key(compiled: hetero_cli.CompiledModel) -> str:
    """A digest of what ``compiled`` runs: each subgraph's device and nodes, and how many sessions an
    inference runs. Two compiled models with one key run the same sessions: the same runtime, however each
    was asked for (manual affinities, automatic, one device)."""
    plan = [(s.device, sorted(s.nodes)) for s in compiled.plan.subgraphs]
    text = json.dumps([plan, len(compiled.runs)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def max_abs_diff(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> float | None:
    """The largest absolute difference over the outputs both runs have (None if they share none): how far
    a runtime's outputs are from ORT [CPU]'s, recorded beside its timings."""
    common = [k for k in a if k in b]
    if not common:
        return None
    return max(
        float(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64)))) for k in common
    )


def prepare_ort(runtime: str, path: Path, feeds: Mapping[str, np.ndarray], providers: str) -> Prepared:
    """A plain ORT session."""
    start = time.perf_counter()
    sess = ort_session(path, providers)
    compile_s = time.perf_counter() - start
    names = [o.name for o in sess.get_outputs()]
    feeds = dict(feeds)

    def infer() -> Any:
        return sess.run(names, feeds)

    def outputs() -> dict[str, np.ndarray]:
        return dict(zip(names, sess.run(names, feeds), strict=True))

    return Prepared(runtime, infer, outputs, compile_s, handle=sess)


def read(path: Path) -> Model:
    """A fresh hetero-cli Model of the file (query results are cached per Model)."""
    return hetero_cli.Core().read_model(path)


def split_affinities(model: Model, k: int, devices: tuple[str, str] = SPLIT_DEVICES) -> dict[str, str]:
    """Manual affinities: the non-constant nodes in ``k`` contiguous topological chunks alternating
    ``devices`` (CPU / OPENVINO by default); constant-only nodes (copied into each subgraph that reads them)
    get the first device."""
    active = [n.friendly_name for n in model.get_ops() if not n.is_constant]
    affinities = {n.friendly_name: devices[0] for n in model.get_ops() if n.is_constant}
    n = len(active)
    for i, name in enumerate(active):
        affinities[name] = devices[(i * min(k, n) // n) % 2]
    return affinities


def compile_hetero(
    path: Path,
    device: str,
    split: int | None = None,
    devices: tuple[str, str] = SPLIT_DEVICES,
    hint: str | None = None,
) -> hetero_cli.CompiledModel:
    """``Core().compile_model`` from the file; with ``split`` = k, manual affinities cut it into k chunks
    alternating ``devices``; ``hint``: PERFORMANCE_HINT (None: the default, LATENCY)."""
    core = hetero_cli.Core()
    if split is None:
        return core.compile_model(str(path), device, hetero_config(hint))
    model = core.read_model(path)
    model.set_affinities(split_affinities(model, split, devices))
    return core.compile_model(model, device, hetero_config(hint))


def prepare_hetero(
    runtime: str,
    path: Path,
    feeds: Mapping[str, np.ndarray],
    device: str,
    split: int | None = None,
    devices: tuple[str, str] = SPLIT_DEVICES,
    hint: str | None = None,
) -> Prepared:
    """A hetero-cli compiled model and one infer request (reused, as a serving loop would)."""
    start = time.perf_counter()
    compiled = compile_hetero(path, device, split, devices, hint)
    compile_s = time.perf_counter() - start
    request = compiled.create_infer_request()
    feeds = dict(feeds)

    def infer() -> Any:
        return request.infer(feeds)

    def outputs() -> dict[str, np.ndarray]:
        return dict(request.infer(feeds))

    return Prepared(
        runtime,
        infer,
        outputs,
        compile_s,
        subgraphs=len(compiled.subgraphs),
        boundaries=len(compiled.plan.crossing_tensors()),
        placement=placement_key(compiled),
        sessions=len(compiled.runs),
        handle=compiled,
    )


_ELEMENT = {"tensor(float)": 1, "tensor(bool)": 9, "tensor(int64)": 7, "tensor(int32)": 6}


def prepare_chain(runtime: str, split: Prepared, feeds: Mapping[str, np.ndarray]) -> Prepared:
    """The sessions of a hetero split run back to back by the thinnest possible loop: every output
    allocated once and bound (IOBinding), each consumer bound to its producer's OrtValue, the inputs wrapped
    and bound once, one RunOptions: per inference nothing but the sessions' runs. (Dynamic output shapes
    fall back to run_with_ort_values.)"""
    compiled: hetero_cli.CompiledModel = split.handle
    C = ort.capi._pybind_state
    cpu = C.OrtDevice(C.OrtDevice.cpu(), C.OrtDevice.default_memory(), 0)
    run_options = ort.RunOptions()
    wanted = list(compiled.plan.outputs)
    held = {name: np.ascontiguousarray(value) for name, value in feeds.items()}
    values: dict[str, Any] = {name: C.OrtValue.ortvalue_from_numpy(v, cpu) for name, v in held.items()}
    bound = []
    static = True
    for sub in compiled.subgraphs:
        metas = {o.name: o for o in sub.session.get_outputs()}
        io = C.SessionIOBinding(sub.session._sess)
        for name in sub.inputs:
            io.bind_ortvalue_input(name, values[name])
        for name in sub.outputs:
            meta = metas[name]
            if not all(isinstance(d, int) for d in meta.shape) or meta.type not in _ELEMENT:
                static = False
                break
            value = C.OrtValue.ortvalue_from_shape_and_onnx_type(list(meta.shape), _ELEMENT[meta.type], cpu)
            io.bind_ortvalue_output(name, value)
            values[name] = value
        bound.append((sub.session._sess, io, list(sub.inputs), list(sub.outputs)))
    if static:

        def run() -> dict[str, Any]:
            for sess, io, _, _ in bound:
                sess.run_with_iobinding(io, run_options)
            return values

    else:
        wrapped = {name: values[name] for name in held}

        def run() -> dict[str, Any]:
            live = dict(wrapped)
            for sess, _, inputs, outputs in bound:
                produced = sess.run_with_ort_values({t: live[t] for t in inputs}, outputs, run_options)
                live.update((name, produced[i]) for i, name in enumerate(outputs))
            return live

    def infer() -> Any:
        result = run()
        return [result[name].numpy() for name in wanted]

    def outputs() -> dict[str, np.ndarray]:
        result = run()
        return {name: np.array(result[name].numpy(), copy=True) for name in wanted}

    return Prepared(
        runtime,
        infer,
        outputs,
        0.0,
        split.subgraphs,
        split.boundaries,
        split.subgraphs,  # the loop runs every subgraph's own session
        handle=(compiled, held, values, bound),
    )


def prepare_openvino(runtime: str, path: Path, feeds: Mapping[str, np.ndarray]) -> Prepared:
    """Native OpenVINO on the CPU plugin, f32, one infer request reused."""
    import openvino as ov

    start = time.perf_counter()
    config: dict[str, Any] = dict(OPENVINO_CONFIG)
    if _threads:
        config["INFERENCE_NUM_THREADS"] = _threads
    compiled = ov.Core().compile_model(str(path), "CPU", config)
    compile_s = time.perf_counter() - start
    request = compiled.create_infer_request()
    feeds = dict(feeds)
    ports = list(compiled.outputs)

    def infer() -> Any:
        return request.infer(feeds)

    wanted = {o.name for o in onnx.load(str(path), load_external_data=False).graph.output}

    def name(port: Any) -> str:  # a port may carry several names (OpenVINO folds Identity nodes)
        return next(iter(sorted(port.get_names() & wanted)), port.get_any_name())

    def outputs() -> dict[str, np.ndarray]:
        result = request.infer(feeds)
        return {name(port): np.array(result[port]) for port in ports}

    return Prepared(runtime, infer, outputs, compile_s, handle=compiled)


def prepare(
    runtime: str, path: Path, feeds: Mapping[str, np.ndarray], splits: Mapping[int, Prepared] | None = None
) -> Prepared:
    """Build any runtime by id; ``chain_k<N>`` needs the already prepared ``split_k<N>`` in ``splits``."""
    if runtime == "ort_cpu":
        return prepare_ort(runtime, path, feeds, "CPU")
    if runtime == "ort_ov":
        return prepare_ort(runtime, path, feeds, "OPENVINO,CPU")
    if runtime == "hetero_cpu":
        return prepare_hetero(runtime, path, feeds, "HETERO:CPU")
    if runtime == "hetero_ov":
        return prepare_hetero(runtime, path, feeds, "HETERO:OPENVINO,CPU")
    if runtime == "hetero_ov_stages":
        return prepare_hetero(runtime, path, feeds, "HETERO:OPENVINO,CPU", hint=THROUGHPUT)
    if runtime == "openvino":
        return prepare_openvino(runtime, path, feeds)
    if runtime == "ort_cuda":
        return prepare_ort(runtime, path, feeds, "CUDA,CPU")
    if runtime == "hetero_gpu":
        return prepare_hetero(runtime, path, feeds, "HETERO:GPU,CPU")
    if runtime.startswith("gsplit_k"):
        k = int(runtime[8:])
        return prepare_hetero(runtime, path, feeds, "HETERO:GPU,CPU", split=k, devices=GPU_SPLIT_DEVICES)
    if runtime.startswith("split_k"):
        return prepare_hetero(runtime, path, feeds, "HETERO:OPENVINO,CPU", split=int(runtime[7:]))
    if runtime.startswith("chain_k"):
        if not splits or int(runtime[7:]) not in splits:
            raise ValueError(f"{runtime} needs split_k{runtime[7:]} prepared first")
        return prepare_chain(runtime, splits[int(runtime[7:])], feeds)
    raise KeyError(f"unknown runtime {runtime!r}")


def model_inputs(path: Path) -> list[tuple[str, list[int | str | None]]]:
    """[(name, shape)] of the inputs a caller feeds (initializers listed as inputs left out)."""
    model = read(path)
    return [(i.name, list(i.shape or ())) for i in model.inputs]


def build(
    feeds: Mapping[str, np.ndarray], runtime: str, path: str, device: str | None = None
) -> Callable[[], Any]:
    """Runtime ``runtime`` of the model file ``path`` as a measuring worker builds it (hetero_cli.app.measure:
    RuntimeSpec "runtimes:build"): ``prepare``'s ids (``chain_k<N>`` builds its ``split_k<N>`` first), or,
    with ``device``, a hetero-cli compile of the file on that device (a tuned file's affinities in its
    nodes). Returns the callable that runs one inference on ``feeds``; the thread setting is this process's
    (HETERO_BENCH_THREADS, inherited from the bench)."""
    file = Path(path)
    if device is not None:
        prepared = prepare_hetero(runtime, file, feeds, device)
    elif runtime.startswith("chain_k"):
        split = prepare(f"split_k{runtime[7:]}", file, feeds)
        prepared = prepare(runtime, file, feeds, {int(runtime[7:]): split})
    else:
        prepared = prepare(runtime, file, feeds)
    infer = prepared.infer
    infer.__dict__["prepared"] = prepared  # the session / compiled model lives as long as the callable
    return infer
