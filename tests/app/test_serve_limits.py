"""The limits make_app holds every request to, whichever engine serves it: a deadline per request (408 for a
body that has not all come, 504 for an inference not answered), nesting, numbers JSON has or the datatype
holds, empty tensors; served by uvicorn on a thread and asked over raw sockets and plain HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
from urllib.parse import urlparse

import numpy as np
import pytest

from hetero_cli.app.serve import Metrics, TensorSpec, head_guard
from hetero_cli.app.serve.http import make_app
from hetero_cli.app.serve.server import serving

LIMIT = 1 << 20
DEADLINE_S = 0.5
GUARD_S = 120  # only guards against a hang: every answer here comes in well under a second
GOOD = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}


class Stuck:
    """y = 2 * x, except that an x holding 7 never answers (until the server stops)."""

    name = "double"
    inputs = (TensorSpec("x", "FP32", (-1, 4)),)
    outputs = (TensorSpec("y", "FP32", (-1, 4)),)

    def ready(self) -> bool:
        return True

    def stage_names(self) -> list[str]:
        return ["only"]

    async def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if (feeds["x"] == 7).any():
            await asyncio.Event().wait()  # never set
        return {"y": feeds["x"] * 2}


def _post(url: str, body: bytes) -> tuple[int, dict]:
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=GUARD_S)
    try:
        connection.request("POST", "/v2/models/double/infer", body=body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _stalled(url: str, sent: bytes, declared: int) -> tuple[socket.socket, bytes]:
    """A client that sends its headers (Content-Length ``declared``) and ``sent``, then nothing: the socket
    and all the server sent back before closing it."""
    parts = urlparse(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=GUARD_S)
    head = (
        f"POST /v2/models/double/infer HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    )
    sock.sendall(head.encode() + sent)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return sock, answer


@pytest.fixture
def stuck() -> tuple[str, Metrics]:
    metrics = Metrics("double")
    with serving(make_app(Stuck(), metrics, LIMIT, request_timeout_s=DEADLINE_S)) as url:
        yield url, metrics


def test_an_inference_past_the_deadline_is_a_504_and_the_server_keeps_serving(stuck):
    url, metrics = stuck
    x = dict(GOOD["inputs"][0], data=[7, 7, 7, 7])
    status, doc = _post(url, json.dumps({"inputs": [x]}).encode())
    assert status == 504, doc
    assert "not answered within the server's deadline of 0.5 s" in doc["error"]
    assert "--request-timeout" in doc["error"]
    assert _post(url, json.dumps(GOOD).encode())[0] == 200
    assert metrics.requests("cut") == 1 and metrics.in_flight() == 0


def test_a_body_that_stalls_past_the_deadline_is_a_408_and_the_connection_closed(stuck):
    url, metrics = stuck
    sock, answer = _stalled(url, b'{"inputs": [', 5000)
    sock.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert "had not all come within the server's deadline" in json.loads(body)["error"]
    assert _post(url, json.dumps(GOOD).encode())[0] == 200
    assert metrics.in_flight() == 0


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf")])
def test_a_deadline_that_is_no_positive_number_is_refused(timeout):
    with pytest.raises(ValueError, match="request_timeout_s must be a positive number of seconds"):
        make_app(Stuck(), Metrics("double"), LIMIT, request_timeout_s=timeout)


def test_a_body_nested_100000_deep_is_a_400_and_the_server_keeps_serving(stuck):
    url, _ = stuck
    status, doc = _post(url, b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert status == 400 and "deeper than 64 levels" in doc["error"], doc
    assert _post(url, json.dumps(GOOD).encode())[0] == 200


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("[1, 2, NaN, 4]", "holds NaN, which is no JSON number"),
        ("[1, Infinity, 3, 4]", "holds Infinity, which is no JSON number"),
        ("[1, 2, 3, 1e39]", "data out of FP32's range"),
    ],
)
def test_numbers_json_cannot_carry_or_fp32_cannot_hold_are_400s(stuck, data, says):
    url, _ = stuck
    body = json.dumps(GOOD).replace("[1, 2, 3, 4]", data).encode()
    status, doc = _post(url, body)
    assert status == 400 and says in doc["error"], doc


def test_an_empty_batch_is_a_400_before_the_backend(stuck):
    url, _ = stuck
    body = json.dumps({"inputs": [{"name": "x", "shape": [0, 4], "datatype": "FP32", "data": []}]})
    status, doc = _post(url, body.encode())
    assert status == 400 and "has no element (dimension 0 is 0)" in doc["error"], doc
    assert _post(url, json.dumps(GOOD).encode())[0] == 200


def _raw(url: str, sent: bytes) -> bytes:
    """What the server answers a client that sends ``sent`` and then nothing, until it closes."""
    parts = urlparse(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=GUARD_S) as sock:
        sock.sendall(sent)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


@pytest.mark.parametrize("sent", [b"", b"P", b"POST /v2/models/double/infer HTTP/1.1\r\nHost: x\r\n"])
def test_a_head_that_never_comes_in_is_a_408_and_the_connection_closed(stuck, monkeypatch, sent):
    """No head, or part of one: answered 408 once HEAD_TIMEOUT_S is past (uvicorn alone held it forever);
    the server keeps serving."""
    url, _ = stuck
    monkeypatch.setattr(head_guard, "HEAD_TIMEOUT_S", DEADLINE_S)
    assert _raw(url, sent).startswith(b"HTTP/1.1 408 ")
    assert _post(url, json.dumps(GOOD).encode())[0] == 200


def test_a_head_over_its_limit_is_a_431_and_the_connection_closed(stuck, monkeypatch):
    """A header line that keeps growing (held in memory by uvicorn alone, hundreds of MiB): 431 past
    HEAD_BYTES."""
    url, _ = stuck
    monkeypatch.setattr(head_guard, "HEAD_BYTES", 4096)
    head = b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 8192
    assert _raw(url, head).startswith(b"HTTP/1.1 431 ")
    assert _post(url, json.dumps(GOOD).encode())[0] == 200
