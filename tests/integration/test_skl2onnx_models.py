"""Real skl2onnx output, split every way, against one plain ORT session.

tests/data/skl2onnx/ holds scikit-learn models converted by skl2onnx (make_models.py there makes them, in a
venv of their own) with example inputs in .npz files, so this test needs neither package: ZipMap outputs
(sequences of maps with int64 or string keys), string labels, a string input beside float inputs, ai.onnx.ml
operators (LinearClassifier, TreeEnsemble*, Scaler, OneHotEncoder...), a text model (StringNormalizer,
com.microsoft's Tokenizer, TfIdfVectorizer). Each runs on HETERO:CPU, automatic HETERO:OPENVINO,CPU under
both hints, and a forced split that alternates OPENVINO and CPU over the nodes OpenVINO could take, so
tensors, strings, sequences and maps cross subgraph boundaries.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from support.helpers import OPENVINO_ONLY, needs_openvino

import hetero_cli as hc

DATA = Path(__file__).resolve().parents[1] / "data" / "skl2onnx"
MODELS = sorted(p.stem for p in DATA.glob("*.onnx"))
# OpenVINO computes the float paths (MLP, PCA, Cast) in f32 like ORT's CPU EP, in its own kernel order
RTOL, ATOL = 1e-4, 1e-5

ML_DOMAINS = {"ai.onnx.ml", "com.microsoft"}


def _load(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    with np.load(DATA / f"{name}.npz") as npz:
        feeds = {k: npz[k] for k in npz.files}
    return onnx.load(DATA / f"{name}.onnx"), feeds


@functools.cache
def _plain_session(name: str) -> ort.InferenceSession:
    return ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])


def _reference(name: str, feeds: dict[str, np.ndarray]) -> dict[str, object]:
    """One plain ORT session on the CPU EP; string inputs as object arrays, as ORT documents them."""
    session = _plain_session(name)
    names = [o.name for o in session.get_outputs()]
    given = {k: v.astype(object) if v.dtype.kind == "U" else v for k, v in feeds.items()}
    return dict(zip(names, session.run(names, given), strict=True))


def _same(got: dict[str, object], want: dict[str, object]) -> None:
    """Same outputs in the same order: strings and integers exactly, floats to RTOL/ATOL, ZipMap's lists of
    dicts key by key."""
    assert list(got) == list(want)
    for name, value in want.items():
        if isinstance(value, list):
            assert isinstance(got[name], list), name
            assert len(got[name]) == len(value), name
            for a, b in zip(got[name], value, strict=True):
                assert isinstance(a, dict), name
                assert list(a) == list(b), name
                np.testing.assert_allclose(
                    [a[k] for k in b], list(b.values()), rtol=RTOL, atol=ATOL, err_msg=name
                )
            continue
        result = np.asarray(got[name])
        assert result.shape == value.shape, name
        if value.dtype.kind == "f":
            assert result.dtype == value.dtype, name
            np.testing.assert_allclose(result, value, rtol=RTOL, atol=ATOL, err_msg=name)
        else:  # int64 labels, string labels (object arrays from ORT)
            assert result.dtype.kind == value.dtype.kind or {result.dtype.kind, value.dtype.kind} <= set("OU")
            np.testing.assert_array_equal(result, value, err_msg=name)


def _plain_tensor_types(proto: onnx.ModelProto) -> set[str]:
    """Names of values that are tensors of numbers (no strings, sequences or maps), as ORT types them: every
    node output made a graph output (ONNX's shape inference leaves ai.onnx.ml outputs untyped)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    outputs = {o.name for o in copy.graph.output}
    for node in copy.graph.node:
        for value in node.output:
            if value and value not in outputs:
                copy.graph.output.append(onnx.ValueInfoProto(name=value))
                outputs.add(value)
    session = ort.InferenceSession(copy.SerializeToString(), providers=["CPUExecutionProvider"])
    plain = {t.name for t in copy.graph.initializer if t.data_type != onnx.TensorProto.STRING}
    for arg in [*session.get_inputs(), *session.get_outputs()]:
        if arg.type.startswith("tensor(") and arg.type != "tensor(string)":
            plain.add(arg.name)
    return plain


def _alternating(proto: onnx.ModelProto) -> dict[str, str]:
    """Affinities that alternate OPENVINO, CPU, OPENVINO... in topological order over the standard-domain
    nodes whose inputs and outputs are all tensors of numbers; every other node (ai.onnx.ml and
    com.microsoft operators, strings, sequences, maps) stays on CPU."""
    plain = _plain_tensor_types(proto)
    affinities, turn = {}, 0
    for node in proto.graph.node:  # ONNX keeps graph.node in topological order
        values = [v for v in [*node.input, *node.output] if v]
        if node.domain not in ML_DOMAINS and all(v in plain for v in values):
            affinities[node.name] = ("OPENVINO", "CPU")[turn % 2]
            turn += 1
        else:
            affinities[node.name] = "CPU"
    return affinities


def _compile(name: str, split: str, hint: str) -> hc.CompiledModel:
    core = hc.Core()
    model = core.read_model(DATA / f"{name}.onnx")
    device = "HETERO:CPU" if split == "HETERO:CPU" else "HETERO:OPENVINO,CPU"
    if split == "alternating":
        affinities = _alternating(onnx.load(DATA / f"{name}.onnx"))
        for node in model.get_ops():
            node.get_rt_info()["affinity"] = affinities[node.get_friendly_name()]
    compiled = core.compile_model(model, device, {"PERFORMANCE_HINT": hint})
    if split == "alternating":
        assert {s.device for s in compiled.subgraphs} == set(affinities.values())
        if name == "mlp_string_labels":  # 8 float nodes alternate, then the CPU's string/ZipMap tail
            assert len(compiled.subgraphs) >= 8
    return compiled


def test_the_models_are_there_and_small():
    assert len(MODELS) >= 6, MODELS
    assert sum(p.stat().st_size for p in DATA.iterdir()) < 1_000_000
    for name in MODELS:
        assert (DATA / f"{name}.npz").stat().st_size < 200_000
        assert (DATA / f"{name}.onnx").stat().st_size < 200_000


def test_the_models_hold_what_they_are_here_for():
    """The kinds of value and operator this test exists for are really in the files."""
    kinds = set()
    for name in MODELS:
        proto, _ = _load(name)
        for value in [*proto.graph.input, *proto.graph.output]:
            t = value.type
            if t.HasField("sequence_type"):
                key = t.sequence_type.elem_type.map_type.key_type
                kinds.add(f"seq(map({onnx.TensorProto.DataType.Name(key).lower()}))")
            elif t.tensor_type.elem_type == onnx.TensorProto.STRING:
                kinds.add("string " + ("input" if value in proto.graph.input else "output"))
        kinds |= {n.op_type for n in proto.graph.node}
    assert {"seq(map(int64))", "seq(map(string))", "string input", "string output"} <= kinds
    assert {"ZipMap", "TreeEnsembleClassifier", "TreeEnsembleRegressor", "OneHotEncoder", "Scaler"} <= kinds
    assert {"StringNormalizer", "Tokenizer", "TfIdfVectorizer", "MatMul"} <= kinds


SPLITS = [
    pytest.param("HETERO:CPU", "LATENCY", id="HETERO:CPU"),
    pytest.param("automatic", "LATENCY", id="automatic-LATENCY", marks=OPENVINO_ONLY),
    pytest.param("automatic", "THROUGHPUT", id="automatic-THROUGHPUT", marks=OPENVINO_ONLY),
    pytest.param("alternating", "LATENCY", id="alternating-LATENCY", marks=OPENVINO_ONLY),
    pytest.param("alternating", "THROUGHPUT", id="alternating-THROUGHPUT", marks=OPENVINO_ONLY),
]


@pytest.mark.parametrize(("split", "hint"), SPLITS)
@pytest.mark.parametrize("name", MODELS)
def test_split_gives_plain_orts_results(name, split, hint):
    compiled = _compile(name, split, hint)
    _, feeds = _load(name)
    want = _reference(name, feeds)
    request = compiled.create_infer_request()
    _same(request.infer(feeds), want)
    # strings given as object arrays (ORT's own form) and a second inference on the same request
    _same(request.infer({k: v.astype(object) if v.dtype.kind == "U" else v for k, v in feeds.items()}), want)
    # one row at a time: batch 1, then the whole batch again
    for row in range(len(next(iter(feeds.values())))):
        one = {k: v[row : row + 1] for k, v in feeds.items()}
        _same(request.infer(one), _reference(name, one))
    _same(request.infer(feeds), want)


@pytest.mark.parametrize("name", ["column_transformer", "tfidf_text"])
@pytest.mark.parametrize("split", ["automatic", "alternating"])
@needs_openvino
def test_async_queue_over_rows(name, split):
    """Requests in flight on the subgraphs' pipeline stages: each row's result is its own."""
    compiled = _compile(name, split, "THROUGHPUT")
    _, feeds = _load(name)
    rows = [{k: v[r : r + 1] for k, v in feeds.items()} for r in range(len(next(iter(feeds.values()))))]
    queue = hc.AsyncInferQueue(compiled, 3)
    got = {}
    queue.set_callback(lambda request, k: got.__setitem__(k, request.results))
    for k, one in enumerate(rows * 2):
        queue.start_async(one, userdata=k)
    queue.wait_all()
    assert sorted(got) == list(range(2 * len(rows)))
    for k, one in enumerate(rows * 2):
        _same(got[k], _reference(name, one))
