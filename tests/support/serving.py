"""What the serving tests share: a chain model split over OPENVINO and CPU by hand, its reference answers
from one plain ONNX Runtime session, and KServe v2 calls with tritonclient.http or raw HTTP."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import onnx
import onnxruntime as ort
import tritonclient.http as httpclient
from onnx import TensorProto, numpy_helper
from onnx import helper as h

from .helpers import make_model


def chain_model(path: Path, width: int = 64, layers: int = 4, seed: int = 0) -> Path:
    """``layers`` x (MatMul by one shared weight, Tanh) on x [n, width], each layer's nodes given to
    OPENVINO and CPU in turn (rt_info affinities): ``layers`` subgraphs, alternating devices. Saved to
    ``path``, which is returned."""
    rng = np.random.default_rng(seed)
    weight = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    nodes, previous = [], "x"
    for i in range(layers):
        nodes.append(h.make_node("MatMul", [previous, "w"], [f"m{i}"], name=f"matmul{i}"))
        nodes.append(h.make_node("Tanh", [f"m{i}"], [f"t{i}"], name=f"tanh{i}"))
        previous = f"t{i}"
    nodes.append(h.make_node("Identity", [previous], ["y"], name="out"))
    for node in nodes:
        layer = int(re.sub(r"\D", "", node.name) or layers - 1)
        entry = node.metadata_props.add()
        entry.key, entry.value = "affinity", "OPENVINO" if layer % 2 == 0 else "CPU"
    model = make_model(
        nodes,
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["n", width])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, ["n", width])],
        [numpy_helper.from_array(weight, "w")],
    )
    onnx.save(model, path)
    return path


def reference(path: Path, x: np.ndarray) -> np.ndarray:
    """The whole model's answer: one plain ONNX Runtime session on the CPU."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def client(url: str) -> httpclient.InferenceServerClient:
    """A tritonclient.http client of the server at ``url`` (http://host:port)."""
    return httpclient.InferenceServerClient(
        urlparse(url).netloc, network_timeout=300.0, connection_timeout=300.0
    )


def infer(url_or_client: str | httpclient.InferenceServerClient, model: str, x: np.ndarray) -> np.ndarray:
    """``model``'s y for x, asked with tritonclient (binary tensors, as it sends by default)."""
    c = client(url_or_client) if isinstance(url_or_client, str) else url_or_client
    given = httpclient.InferInput("x", list(x.shape), "FP32")
    given.set_data_from_numpy(x)
    return c.infer(model, [given]).as_numpy("y")


def post(url: str, path: str, body: bytes) -> tuple[int, dict]:
    """POST ``body`` as JSON; the status and the JSON answer."""
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=300)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def json_request(x: np.ndarray, name: str = "x", datatype: str = "FP32") -> bytes:
    """An infer request's JSON body for one input."""
    doc = {
        "inputs": [{"name": name, "shape": list(x.shape), "datatype": datatype, "data": x.ravel().tolist()}]
    }
    return json.dumps(doc).encode()


def in_flight(url: str) -> int:
    """The server's hetero_requests_in_flight, from /metrics."""
    connection = http.client.HTTPConnection(urlparse(url).netloc, timeout=60)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    return int(re.search(r"^hetero_requests_in_flight\{[^}]*\} (\d+)$", text, re.M)[1])


def wait_until(condition: Callable[[], bool], timeout_s: float = 120.0) -> bool:
    """Poll ``condition`` every 10 ms until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        threading.Event().wait(0.01)
    return condition()
