"""String (KServe BYTES) tensors served for real by the local engine: what a client sends is the text the
model gets, in JSON and in binary tensor data, and text UTF-8 cannot hold is a 400 (no device needed)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto
from onnx import helper as h
from support.helpers import make_model
from support.serving import client, post

import hetero_cli as hc
from hetero_cli.app.serve import Metrics
from hetero_cli.app.serve.http import make_app
from hetero_cli.app.serve.local import LocalBackend
from hetero_cli.app.serve.server import serving


@pytest.fixture(scope="module")
def url():
    """A model that echoes its string input ``text`` (Identity), served on CPU."""
    nodes = [h.make_node("Identity", ["text"], ["echo"], name="echo")]
    strings = [h.make_tensor_value_info(t, TensorProto.STRING, ["n"]) for t in ("text", "echo")]
    compiled = hc.Core().compile_model(make_model(nodes, strings[:1], strings[1:]), "CPU")
    backend = LocalBackend(compiled, "echo")
    backend.metrics = metrics = Metrics("echo", backend.stage_names())
    with serving(make_app(backend, metrics, max_body_bytes=1 << 20)) as served:
        yield served
    backend.close()


def _request(data: list[str]) -> bytes:
    return json.dumps(
        {"inputs": [{"name": "text", "shape": [len(data)], "datatype": "BYTES", "data": data}]}
    ).encode()


def test_the_model_gets_the_text_sent_in_json_and_in_binary_data(url):
    status, answer = post(url, "/v2/models/echo/infer", _request(["hello", "héllo", ""]))
    assert status == 200, answer
    assert answer["outputs"][0]["data"] == ["hello", "héllo", ""]
    words = httpclient.InferInput("text", [2], "BYTES")
    words.set_data_from_numpy(np.array([b"ab", "é".encode()], dtype=object), binary_data=True)
    echoed = client(url).infer("echo", [words]).as_numpy("echo")
    assert [bytes(v) for v in echoed] == [b"ab", "é".encode()]


def test_text_utf8_cannot_hold_is_a_400_and_serving_goes_on(url):
    status, answer = post(url, "/v2/models/echo/infer", _request(["\ud800"]))
    assert status == 400 and "BYTES" in answer["error"], answer
    words = httpclient.InferInput("text", [1], "BYTES")
    words.set_data_from_numpy(np.array([b"\xff"], dtype=object), binary_data=True)
    with pytest.raises(Exception, match="no UTF-8 text"):
        client(url).infer("echo", [words])
    assert post(url, "/v2/models/echo/infer", _request(["ok"]))[1]["outputs"][0]["data"] == ["ok"]
