"""The local engine for real: a split over OPENVINO and CPU compiled by hetero-cli, served by uvicorn on a
thread through LocalBackend and make_app, queried with tritonclient.http and raw HTTP (no mocks)."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from support.helpers import OPENVINO_ONLY, ROOT
from support.serving import chain_model, client, in_flight, infer, json_request, post, reference, wait_until

import hetero_cli as hc
from hetero_cli.app.serve import Metrics
from hetero_cli.app.serve.http import make_app
from hetero_cli.app.serve.local import LocalBackend
from hetero_cli.app.serve.server import serving

pytestmark = OPENVINO_ONLY
WIDTH = 64


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, hc.CompiledModel]:
    path = chain_model(tmp_path_factory.mktemp("serve") / "chain.onnx", width=WIDTH, layers=4)
    core = hc.Core()
    core.set_property("HETERO", {"PERFORMANCE_HINT": "THROUGHPUT"})
    compiled = core.compile_model(core.read_model(path), "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU", "OPENVINO", "CPU"]
    return path, compiled


@pytest.fixture(scope="module")
def served(split) -> Iterator[tuple[str, Metrics, Path, hc.CompiledModel]]:
    path, compiled = split
    backend = LocalBackend(compiled, "chain")
    backend.metrics = metrics = Metrics("chain", backend.stage_names())
    with serving(make_app(backend, metrics, max_body_bytes=1 << 20)) as url:
        yield url, metrics, path, compiled
    backend.close()


def _x(rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, WIDTH)).astype(np.float32)


def test_answers_equal_the_whole_models_and_the_split_runs_every_stage(served):
    url, metrics, path, compiled = served
    before = metrics.stage_runs()
    for rows in (1, 3):
        x = _x(rows, rows)
        got = infer(url, "chain", x)
        np.testing.assert_array_equal(got, compiled(x)["y"])  # the same sessions, the same answer
        np.testing.assert_allclose(got, reference(path, x), rtol=1e-4, atol=1e-5)
    after = metrics.stage_runs()
    assert list(after) == ["subgraph1", "subgraph2", "subgraph3", "subgraph4"]
    assert all(after[s] - before.get(s, 0) == 2 for s in after)


def test_metadata_gives_the_models_tensors(served):
    url = served[0]
    meta = client(url).get_model_metadata("chain")
    assert meta["name"] == "chain" and meta["versions"] == ["1"]
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, WIDTH]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, WIDTH]}]
    assert client(url).is_model_ready("chain")


@pytest.mark.parametrize("clients", [1, 4])
def test_concurrent_clients_all_get_their_own_answers(served, clients):
    url, _, path, _ = served
    wrong: list[str] = []

    def one_client(k: int) -> None:
        c = client(url)
        for i in range(6):
            x = _x(2, 100 * k + i)
            if not np.allclose(infer(c, "chain", x), reference(path, x), rtol=1e-4, atol=1e-5):
                wrong.append(f"client {k} request {i}")

    threads = [threading.Thread(target=one_client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not wrong and not any(t.is_alive() for t in threads)


def test_bad_requests_get_kserve_errors_and_the_server_keeps_serving(served):
    url, _, path, _ = served
    route = "/v2/models/chain/infer"
    x = _x(1, 7)
    bad = [
        (json_request(np.zeros((1, WIDTH + 1), np.float32)), 400, "the model takes [-1, 64]"),
        (json_request(x.astype(np.int64), datatype="INT64"), 400, "datatype 'INT64', the model takes FP32"),
        (json_request(x, name="z"), 400, "unknown input 'z'"),
        (b'{"inputs": [', 400, "no valid JSON"),
        (b" " * ((1 << 20) + 1), 413, "over the server's limit"),
    ]
    for body, status, says in bad:
        got, doc = post(url, route, body)
        assert got == status and says in doc["error"], doc
        np.testing.assert_allclose(infer(url, "chain", x), reference(path, x), rtol=1e-4, atol=1e-5)


def test_clients_that_disconnect_mid_request_leave_nothing_stuck(served):
    url, _, path, compiled = served
    many = 2 * len(compiled.subgraphs) + 2  # more than the backend has requests
    body = json_request(_x(512, 3))
    seen_in_flight = 0
    for _ in range(many):
        connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=60)
        connection.request(
            "POST", "/v2/models/chain/infer", body=body, headers={"Content-Type": "application/json"}
        )
        seen_in_flight += wait_until(lambda: in_flight(url) >= 1, timeout_s=5.0)
        connection.close()  # gone before the answer
    assert seen_in_flight, "no request was seen in flight: none was cut off mid-request"
    assert wait_until(lambda: in_flight(url) == 0)
    x = _x(2, 11)
    np.testing.assert_allclose(infer(url, "chain", x), reference(path, x), rtol=1e-4, atol=1e-5)


def test_inputs_the_model_refuses_give_the_request_back_to_the_pool(split):
    import asyncio

    path, compiled = split
    backend = LocalBackend(compiled, "chain", jobs=1)

    async def calls() -> np.ndarray:
        for _ in range(3):  # more refusals than the one request: each must come back to the pool
            with pytest.raises(hc.InferenceError):
                await backend.infer({"x": np.zeros((1, WIDTH + 1), np.float32)})
        return (await backend.infer({"x": _x(2, 5)}))["y"]

    try:
        got = asyncio.run(asyncio.wait_for(calls(), 120))
    finally:
        backend.close()
    np.testing.assert_allclose(got, reference(path, _x(2, 5)), rtol=1e-4, atol=1e-5)


DIGITS = ROOT / "models" / "digits.onnx"


def test_a_device_failure_never_changes_the_answer_to_the_next():
    """A zero batch fails OPENVINO's MaxPool in the session (the protocol refuses it over HTTP; here it
    reaches the backend): the EP kept that shape and refused every valid request after it
    (openvino-failed-shape-kept); the failed session is made again, so the next answer is right."""
    import asyncio

    compiled = hc.Core().compile_model(str(DIGITS), "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    backend = LocalBackend(compiled, "digits", jobs=1)
    image = np.random.default_rng(3).random((1, 1, 32, 32), dtype=np.float32)

    async def calls() -> list[np.ndarray]:
        got = [(await backend.infer({"image": image}))["probabilities"]]
        with pytest.raises(hc.InferenceError, match="MaxPool"):
            await backend.infer({"image": np.zeros((0, 1, 32, 32), np.float32)})
        for _ in range(2):
            got.append((await backend.infer({"image": image}))["probabilities"])
        return got

    try:
        first, *after = asyncio.run(asyncio.wait_for(calls(), 120))
    finally:
        backend.close()
    for answer in after:
        np.testing.assert_array_equal(answer, first)
    assert backend.ready() and backend.missing() == []


def _held(compiled: hc.CompiledModel) -> tuple[threading.Event, threading.Event]:
    """An observer on the compiled model's pipeline that holds the first stage of the next inference until
    ``release`` is set (then hands over to the observer it replaced); ``held`` is set once one is held."""
    pipeline = compiled.pipeline
    previous = pipeline.observer
    held, release = threading.Event(), threading.Event()

    def observer(event, request, position, lane):
        if event == "start" and position == 0 and not held.is_set():
            held.set()
            release.wait(120)
            pipeline.observer = previous
        if previous is not None:
            previous(event, request, position, lane)

    pipeline.observer = observer
    return held, release


def test_a_request_past_its_deadline_is_a_504_and_its_infer_request_comes_back(split):
    path, compiled = split
    backend = LocalBackend(compiled, "chain", jobs=1)  # one request: lost, the next would wait forever
    backend.metrics = metrics = Metrics("chain", backend.stage_names())
    held, release = _held(compiled)
    body = json_request(_x(2, 21))
    try:
        with serving(make_app(backend, metrics, 1 << 20, request_timeout_s=1.0)) as url:
            status, doc = post(url, "/v2/models/chain/infer", body)
            assert held.is_set()
            assert status == 504 and "not answered within the server's deadline of 1 s" in doc["error"]
            release.set()  # the run goes on and ends: its request goes back to the idle ones
            x = _x(2, 22)
            np.testing.assert_allclose(infer(url, "chain", x), reference(path, x), rtol=1e-4, atol=1e-5)
            assert metrics.requests("cut") == 1 and metrics.requests("success") == 1
    finally:
        release.set()
        backend.close()


def test_readiness_says_what_keeps_the_model_from_answering(split, monkeypatch):
    import http.client as client_lib

    _, compiled = split
    backend = LocalBackend(compiled, "chain")
    metrics = Metrics("chain", backend.stage_names())

    def ready(url: str) -> tuple[int, bytes]:
        connection = client_lib.HTTPConnection(urlparse(url).netloc, timeout=60)
        try:
            connection.request("GET", "/v2/models/chain/ready")
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    try:
        with serving(make_app(backend, metrics, 1 << 20)) as url:
            assert ready(url) == (200, b"")
            # what the compiled model reports after a failed run whose session could not be made again
            gone = {"subgraph3 on OPENVINO": "the device is gone"}
            monkeypatch.setattr(type(compiled), "unrenewed", property(lambda self: dict(gone)))
            status, body = ready(url)
            assert status == 503
            assert (
                "subgraph3 on OPENVINO failed a run and its session could not be made again" in body.decode()
            )
            assert "the device is gone" in body.decode() and not client(url).is_server_ready()
            gone.clear()
            backend.stopping = True
            assert ready(url)[0] == 503 and b"the server is stopping" in ready(url)[1]
    finally:
        backend.close()
