"""make_app's KServe v2 routes over a small real Backend (numpy arithmetic, stages timed into Metrics),
served by uvicorn on a thread and queried by tritonclient.http and plain HTTP: the interface the local and
Ray engines share."""

from __future__ import annotations

import asyncio
import http.client
import json
from collections.abc import Iterator
from urllib.parse import urlparse

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from hetero_cli.app.serve import Backend, Metrics, TensorSpec
from hetero_cli.app.serve.http import make_app
from hetero_cli.app.serve.server import bind, serving
from hetero_cli.errors import InferenceError, ServeError

LIMIT = 4096


class Doubling:
    """y = 2 * x, in two timed stages; x of 1001 refused as a model would refuse it."""

    name = "double"
    inputs = (TensorSpec("x", "FP32", (-1, 4)),)
    outputs = (TensorSpec("y", "FP32", (-1, 4)),)

    def __init__(self, metrics: Metrics | None = None) -> None:
        self.metrics = metrics

    def ready(self) -> bool:
        return True

    def stage_names(self) -> list[str]:
        return ["first", "second"]

    async def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = feeds["x"]
        if (x == 1001).any():
            raise InferenceError("1001 is out of range")
        await asyncio.sleep(0)
        if self.metrics is not None:
            self.metrics.observe_stage("first", 0.001)
            self.metrics.observe_stage("second", 0.002)
        return {"y": x * 2}


@pytest.fixture
def server() -> Iterator[tuple[str, Metrics]]:
    backend = Doubling()
    metrics = Metrics(backend.name, backend.stage_names())
    backend.metrics = metrics
    assert isinstance(backend, Backend)
    with serving(make_app(backend, metrics, LIMIT)) as url:
        yield url, metrics


def _client(url: str) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(urlparse(url).netloc)


def _post(url: str, path: str, body: bytes, headers: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=30)
    try:
        connection.request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _get(url: str, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _infer(client: httpclient.InferenceServerClient, x: np.ndarray, binary: bool = True) -> np.ndarray:
    given = httpclient.InferInput("x", list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=binary)
    wanted = httpclient.InferRequestedOutput("y", binary_data=binary)
    return client.infer("double", [given], outputs=[wanted]).as_numpy("y")


@pytest.mark.parametrize("binary", [False, True])
def test_tritonclient_infers_and_reads_metadata(server, binary):
    url, metrics = server
    client = _client(url)
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("double")
    assert client.get_server_metadata()["name"] == "hetero-cli"
    meta = client.get_model_metadata("double")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
    assert meta["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(_infer(client, x, binary), x * 2)
    assert metrics.requests("success") == 1
    assert metrics.stage_runs() == {"first": 1, "second": 1}


def test_bad_requests_get_kserve_errors_and_the_server_keeps_serving(server):
    url, metrics = server
    path = "/v2/models/double/infer"
    good = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    bad = [
        (b"{oops", 400, "no valid JSON"),
        (
            json.dumps({**good, "inputs": [{**good["inputs"][0], "shape": [1, 5]}]}).encode(),
            400,
            "shape [1, 5]",
        ),
        (
            json.dumps({**good, "inputs": [{**good["inputs"][0], "datatype": "INT32"}]}).encode(),
            400,
            "datatype",
        ),
        (json.dumps({"inputs": [{**good["inputs"][0], "name": "q"}]}).encode(), 400, "unknown input 'q'"),
        (json.dumps({"inputs": [{**good["inputs"][0], "data": [1001] * 4}]}).encode(), 400, "out of range"),
        (b"x" * (LIMIT + 1), 413, "over the server's limit of 4096"),
    ]
    for body, status, says in bad:
        got, doc = _post(url, path, body)
        assert got == status and says in doc["error"], (got, doc)
        assert _post(url, path, json.dumps(good).encode()) == (
            200,
            {
                "model_name": "double",
                "model_version": "1",
                "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 4], "data": [2.0, 4.0, 6.0, 8.0]}],
            },
        )
    assert metrics.requests("failure") == len(bad)


def test_a_body_streamed_past_the_limit_is_refused_with_413(server):
    url, _ = server
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=30)
    try:
        connection.putrequest("POST", "/v2/models/double/infer")
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        chunk = b"x" * 1024
        for _ in range(5):
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        connection.send(b"0\r\n\r\n")
        response = connection.getresponse()
        assert response.status == 413
        assert "limit of 4096" in json.loads(response.read())["error"]
    finally:
        connection.close()


def test_unknown_models_versions_and_routes_are_kserve_404s(server):
    url, _ = server
    for path in ("/v2/models/other", "/v2/models/double/versions/2", "/v2/nothing", "/v2/models/other/ready"):
        status, body = _get(url, path)
        assert status == 404 and "error" in json.loads(body), path
    status, doc = _post(url, "/v2/models/other/infer", b"{}")
    assert status == 404 and "this server serves 'double'" in doc["error"]
    with pytest.raises(InferenceServerException, match="unknown model"):
        _client(url).get_model_metadata("other")


def test_versioned_routes_answer_version_1(server):
    url, _ = server
    status, body = _get(url, "/v2/models/double/versions/1")
    assert status == 200 and json.loads(body)["versions"] == ["1"]
    assert _get(url, "/v2/models/double/versions/1/ready")[0] == 200


def test_metrics_route_serves_prometheus_text(server):
    url, _ = server
    _infer(_client(url), np.ones((1, 4), np.float32))
    status, body = _get(url, "/metrics")
    text = body.decode()
    assert status == 200
    assert 'hetero_requests_total{model="double",outcome="success"} 1' in text
    assert 'hetero_stage_runs_total{model="double",stage="second"} 1' in text


def test_a_port_in_use_is_one_serve_error():
    with serving(make_app(Doubling(), Metrics("double"), LIMIT)) as url:
        port = urlparse(url).port
        with pytest.raises(ServeError, match=f"port {port} on 127.0.0.1 is in use.*give another --port"):
            bind("127.0.0.1", port)


def test_a_limit_under_one_byte_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        make_app(Doubling(), Metrics("double"), 0)


def test_engines_are_picked_by_name_and_unknown_ones_refused(monkeypatch):
    from hetero_cli.app.serve import engines
    from hetero_cli.app.serve.local import LocalEngine
    from hetero_cli.app.serve.options import ServeOptions

    engine = engines.open_engine("local", ServeOptions("m", port=0))
    try:
        assert isinstance(engine, LocalEngine) and engine.hint == "THROUGHPUT"
        assert engine.url.startswith("http://127.0.0.1:")
    finally:
        engine.close()
    with pytest.raises(ServeError, match="unknown engine 'nope': give one of local"):
        engines.open_engine("nope", ServeOptions("m"))
    monkeypatch.setitem(engines.ENGINES, "later", "not_built_yet:Engine")
    with pytest.raises(ServeError, match="--engine later is not part of this hetero-cli version"):
        engines.open_engine("later", ServeOptions("m"))


class Broken(Doubling):
    """A backend whose inference fails in a way no model refusal does."""

    async def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise RuntimeError("the device fell off")


def test_an_unexpected_failure_is_a_kserve_500_and_the_server_keeps_serving():
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
    metrics = Metrics("double")
    with serving(make_app(Broken(), metrics, LIMIT)) as url:
        for _ in range(2):
            status, doc = _post(url, "/v2/models/double/infer", body.encode())
            assert status == 500 and doc == {"error": "internal error: RuntimeError: the device fell off"}
    assert metrics.requests("failure") == 2


def test_an_engine_whose_dependency_is_missing_names_the_install(monkeypatch):
    import sys

    from hetero_cli.app.serve import engines
    from hetero_cli.app.serve.options import ServeOptions

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the serve extra were not installed
    for module in ("hetero_cli.app.serve.local", "hetero_cli.app.serve.server"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(
        ServeError, match=r"--engine local needs uvicorn, which is not installed: run `make install`"
    ):
        engines.open_engine("local", ServeOptions("m", port=0))


def _head(url: str, path: str) -> tuple[int, bytes, str | None]:
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=30)
    try:
        connection.request("HEAD", path)
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("content-length")
    finally:
        connection.close()


def test_read_routes_answer_head_as_get_without_the_body(server):
    url, _ = server
    for path in (
        "/v2/health/live",
        "/v2/health/ready",
        "/v2",
        "/v2/models/double",
        "/v2/models/double/ready",
        "/v2/models/double/versions/1",
        "/v2/models/double/versions/1/ready",
        "/metrics",
    ):
        status, body, length = _head(url, path)
        got, full = _get(url, path)
        assert (status, body) == (got, b""), path
        assert length is None or int(length) == len(full), path
    assert _head(url, "/v2/models/other")[0] == 404
    assert _head(url, "/v2/models/double/infer")[0] == 405
