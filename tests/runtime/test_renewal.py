"""A device failure on one inference never changes the answer to the next (runtime/renewal.py): the OpenVINO
EP keeps the shape of a run that failed inside it (quirk openvino-failed-shape-kept), so its failed session
is made again and swapped in as the compiled model's next revision before the failure is raised; other
EPs' sessions stay as they are."""

from __future__ import annotations

import logging
import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as h
from support.helpers import ROOT, make_model, needs_openvino, seeded, vi
from support.quirk_sides import expect

import hetero_cli as hc
from hetero_cli.ort.session import SUBGRAPH, observe_sessions
from hetero_cli.quirks.openvino import FAILED_SHAPE_KEPT

DIGITS = ROOT / "models" / "digits.onnx"
ONE = seeded((1, 1, 32, 32))
EMPTY = np.zeros((0, 1, 32, 32), np.float32)


def _want(x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(DIGITS), providers=["CPUExecutionProvider"])
    return session.run(None, {"image": x})[0]


def _infer(request: hc.InferRequest, x: np.ndarray, api: str) -> np.ndarray:
    if api == "sync":
        return request.infer({"image": x})["probabilities"]
    request.start_async({"image": x})
    request.wait()
    return request.results["probabilities"]


def _renewals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if FAILED_SHAPE_KEPT.id in r.getMessage()]


@needs_openvino
@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"], ids=["one session", "a session per subgraph"])
def test_after_a_zero_batch_fails_on_openvino_the_next_inference_is_right(hint, api, caplog):
    compiled = hc.Core().compile_model(str(DIGITS), "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": hint})
    assert compiled.one_session == (hint == "LATENCY")
    request = compiled.create_infer_request()
    np.testing.assert_allclose(_infer(request, ONE, api), _want(ONE), rtol=1e-4, atol=1e-6)
    first = compiled.current()
    logged = caplog.at_level(logging.WARNING, logger="hetero_cli")
    with logged, pytest.raises(hc.InferenceError, match=r"failed: .*MaxPool node with name 'pool1'"):
        _infer(request, EMPTY, api)
    for asked in (request, compiled.create_infer_request()):  # this request, and a new one
        np.testing.assert_allclose(_infer(asked, ONE, api), _want(ONE), rtol=1e-4, atol=1e-6)
    assert compiled.revision == expect(FAILED_SHAPE_KEPT, 1, 0)
    assert len(_renewals(caplog)) == expect(FAILED_SHAPE_KEPT, 1, 0)
    if compiled.revision:
        renewed = compiled.current()
        assert renewed.plan is first.plan and len(renewed.runs) == len(first.runs)
        made_again = [(a, b) for a, b in zip(first.runs, renewed.runs, strict=True) if a is not b]
        assert [a.device for a, _ in made_again] == ["OPENVINO"]  # the CPU's session stays
        ((old, new),) = made_again
        assert new.session is not old.session and new.subgraph is old.subgraph
        assert first.holds(old) and not renewed.holds(old)  # the revision a request started with stays


def _reshaping(device: str) -> tuple[hc.CompiledModel, dict, dict]:
    """Relu(x [2,4]) -> Reshape(s) -> Neg, all on ``device``: an s the input cannot take fails the run."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Reshape", ["r", "s"], ["m"], name="reshape"),
        h.make_node("Neg", ["m"], ["z"], name="neg"),
    ]
    proto = make_model(nodes, [vi("x", [2, 4]), vi("s", [2], TensorProto.INT64)], [vi("z", None)])
    compiled = hc.Core().compile_model(proto, device)
    good = {"x": seeded((2, 4)), "s": np.array([4, 2], np.int64)}
    bad = {"x": seeded((2, 4)), "s": np.array([5, 5], np.int64)}
    return compiled, good, bad


def test_a_failed_run_on_the_cpu_leaves_its_session_as_it_is(caplog):
    compiled, good, bad = _reshaping("CPU")
    request = compiled.create_infer_request()
    want = -np.maximum(good["x"], 0).reshape(4, 2)
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        with pytest.raises(hc.InferenceError, match="reshape"):
            request.infer(bad)
        np.testing.assert_array_equal(request.infer(good)["z"], want)
    assert compiled.revision == 0 and not _renewals(caplog)


@needs_openvino
def test_a_session_that_cannot_be_made_again_leaves_the_failure_as_it_was(caplog):
    compiled = hc.Core().compile_model(str(DIGITS), "OPENVINO")
    request = compiled.create_infer_request()
    request.infer({"image": ONE})

    def refuse(asked) -> None:
        if asked.purpose == SUBGRAPH or asked.device == "OPENVINO":
            raise RuntimeError("the device is gone")  # as ORT's own refusal would be

    logged = caplog.at_level(logging.WARNING, logger="hetero_cli")
    refused = pytest.raises(hc.InferenceError, match="MaxPool node with name 'pool1'")
    with logged, observe_sessions(refuse), refused:
        request.infer({"image": EMPTY})
    assert compiled.revision == 0
    made = [r.getMessage() for r in caplog.records if "could not be made again" in r.getMessage()]
    assert len(made) == expect(FAILED_SHAPE_KEPT, 1, 0)
    with pytest.raises(hc.InferenceError):  # the failure then renews it
        request.infer({"image": EMPTY})
    np.testing.assert_allclose(
        request.infer({"image": ONE})["probabilities"], _want(ONE), rtol=1e-4, atol=1e-6
    )


@needs_openvino
def test_a_valid_inference_in_flight_when_another_fails_on_openvino_is_answered_right():
    """B runs its OPENVINO subgraph on the revision it started with, after A's failed run there: the
    failure B meets there is A's state (where the EP keeps it), and B starts over on the fresh session."""
    compiled = hc.Core().compile_model(str(DIGITS), "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    a, b = compiled.create_infer_request(), compiled.create_infer_request()
    a.infer({"image": ONE})  # proven: HETERO_FALLBACK leaves its failures to the input
    gate = threading.Event()

    def hold_b(event: str, request: object, _position: int, lane: str) -> None:
        if event == "start" and request is b and lane == "OPENVINO":
            assert gate.wait(60)

    compiled.pipeline.observer = hold_b
    b.start_async({"image": ONE})  # held before its OPENVINO subgraph, on the first revision
    with pytest.raises(hc.InferenceError, match="MaxPool node with name 'pool1'"):
        a.infer({"image": EMPTY})  # on the calling thread: the OPENVINO lane is held by b
    gate.set()
    b.wait()
    np.testing.assert_allclose(b.results["probabilities"], _want(ONE), rtol=1e-4, atol=1e-6)
