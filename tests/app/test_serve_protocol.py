"""KServe v2's requests and responses (app/serve/protocol.py), and the Metrics' Prometheus text: pure
functions, checked against what tritonclient.http itself sends and reads."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.http import InferResult

from hetero_cli.app.serve import Metrics, TensorSpec
from hetero_cli.app.serve import protocol as kserve
from hetero_cli.errors import RequestError

X = TensorSpec("x", "FP32", (-1, 3))
IDS = TensorSpec("ids", "INT64", (2,))
Y = TensorSpec("y", "FP32", (-1, 3))
INPUTS = (X, IDS)
OUTPUTS = (Y,)


def _json(doc: dict) -> bytes:
    return json.dumps(doc).encode()


def _request(**changes) -> dict:
    doc = {
        "inputs": [
            {"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]},
            {"name": "ids", "shape": [2], "datatype": "INT64", "data": [7, 8]},
        ]
    }
    doc.update(changes)
    return doc


def _tritonclient_body(binary: bool) -> tuple[bytes, int | None]:
    """The body (and header length) tritonclient.http sends for x and ids, as it builds it."""
    x = httpclient.InferInput("x", [1, 3], "FP32")
    x.set_data_from_numpy(np.array([[1.5, -2, 3]], np.float32), binary_data=binary)
    ids = httpclient.InferInput("ids", [2], "INT64")
    ids.set_data_from_numpy(np.array([9, -1], np.int64), binary_data=binary)
    out = httpclient.InferRequestedOutput("y", binary_data=binary)
    body, length = httpclient.InferenceServerClient.generate_request_body(
        [x, ids], outputs=[out], request_id="r1"
    )
    return body if isinstance(body, bytes) else body.encode(), length


def test_json_request_becomes_arrays_of_the_models_types():
    request = kserve.parse_infer_request(_json(_request(id="a")), None, INPUTS, OUTPUTS)
    assert request.id == "a"
    assert request.feeds["x"].dtype == np.float32 and request.feeds["x"].shape == (2, 3)
    np.testing.assert_array_equal(request.feeds["ids"], np.array([7, 8], np.int64))
    assert request.outputs is None


def test_nested_json_data_is_read_row_major():
    doc = _request()
    doc["inputs"][0]["data"] = [[1, 2, 3], [4, 5, 6]]
    request = kserve.parse_infer_request(_json(doc), None, INPUTS, OUTPUTS)
    np.testing.assert_array_equal(request.feeds["x"], np.arange(1, 7, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("binary", [False, True])
def test_tritonclients_requests_parse_json_and_binary(binary):
    body, length = _tritonclient_body(binary)
    request = kserve.parse_infer_request(body, length, INPUTS, OUTPUTS)
    np.testing.assert_array_equal(request.feeds["x"], np.array([[1.5, -2, 3]], np.float32))
    np.testing.assert_array_equal(request.feeds["ids"], np.array([9, -1], np.int64))
    assert request.id == "r1"
    assert request.outputs == [kserve.OutputRequest("y", binary)]


@pytest.mark.parametrize("binary", [False, True])
def test_responses_read_back_by_tritonclient(binary):
    body, length = _tritonclient_body(binary)
    request = kserve.parse_infer_request(body, length, INPUTS, OUTPUTS)
    y = np.array([[0.25, -1.0, 3e38]], np.float32)
    content, header = kserve.encode_infer_response("m", {"y": y}, request)
    assert (header is not None) == binary
    result = InferResult.from_response_body(content, header_length=header)
    np.testing.assert_array_equal(result.as_numpy("y"), y)
    assert result.get_response()["model_name"] == "m" and result.get_response()["id"] == "r1"


def test_binary_data_output_makes_every_output_binary():
    request = kserve.parse_infer_request(
        _json(_request(parameters={"binary_data_output": True})), None, INPUTS, OUTPUTS
    )
    content, header = kserve.encode_infer_response("m", {"y": np.ones((2, 3), np.float32)}, request)
    assert header is not None and len(content) == header + 6 * 4


def test_bytes_tensors_round_trip_json_and_binary():
    spec = TensorSpec("s", "BYTES", (-1,))
    words = httpclient.InferInput("s", [2], "BYTES")
    words.set_data_from_numpy(np.array([b"ab", b"\xc3\xa9"], dtype=object), binary_data=True)
    body, length = httpclient.InferenceServerClient.generate_request_body([words])
    request = kserve.parse_infer_request(body, length, (spec,), ())
    assert list(request.feeds["s"]) == [b"ab", "é".encode()]
    json_request = kserve.parse_infer_request(
        _json({"inputs": [{"name": "s", "shape": [1], "datatype": "BYTES", "data": ["é"]}]}),
        None,
        (spec,),
        (),
    )
    assert list(json_request.feeds["s"]) == ["é".encode()]


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (_request(inputs=[]), 'no "inputs"'),
        ({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [0] * 6}]}, "missing: ids"),
        (_request(inputs=[*_request()["inputs"], {"name": "z"}]), "unknown input 'z'"),
        (_request(inputs=[_request()["inputs"][1]] * 2), "given twice"),
        (
            _request(inputs=[{**_request()["inputs"][0], "datatype": "INT64"}]),
            "datatype 'INT64', the model takes FP32",
        ),
        (
            _request(inputs=[{**_request()["inputs"][0], "shape": [2, 4]}]),
            "shape [2, 4], the model takes [-1, 3]",
        ),
        (_request(inputs=[{**_request()["inputs"][0], "shape": [6]}]), "shape [6]"),
        (_request(inputs=[{**_request()["inputs"][0], "data": [1, 2]}]), "2 value(s) in data"),
        (_request(inputs=[{**_request()["inputs"][0], "data": ["a"] * 6}]), "no FP32 values"),
        (_request(inputs=[{**_request()["inputs"][1], "data": [1.5, 2]}]), "no INT64 values"),
        (
            _request(inputs=[{**_request()["inputs"][0], "data": [True, 1.5, 2, 3, 4, 5]}]),
            "true or false among",
        ),
        (_request(inputs=[{**_request()["inputs"][1], "data": [False, 2]}]), "true or false among"),
        (_request(outputs=[{"name": "nope"}]), "unknown output 'nope'"),
        (_request(id=3), '"id" must be a string'),
        (
            _request(outputs=[{"name": "y", "parameters": {"binary_data": "false"}}]),
            "true or false, not 'false'",
        ),
        (_request(parameters={"binary_data_output": 1}), '"binary_data_output" must be true or false'),
        (
            _request(inputs=[{**_request()["inputs"][0], "parameters": {"binary_data_size": 4096.0}}]),
            "binary_data_size must be a byte count, not 4096.0",
        ),
    ],
)
def test_bad_requests_say_what_is_wrong(doc, says):
    with pytest.raises(RequestError) as caught:
        kserve.parse_infer_request(_json(doc), None, INPUTS, OUTPUTS)
    assert says in str(caught.value)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("body", "length", "says"),
    [
        (b"{not json", None, "no valid JSON"),
        (b"[1, 2]", None, "must be a JSON object"),
        (b"\xff\xfe", None, "no valid JSON"),
        (b"{}", "ten", "whole number of bytes"),
        (b"{}", 99, "the body has 2 byte(s)"),
    ],
)
def test_malformed_bodies_are_refused(body, length, says):
    with pytest.raises(RequestError) as caught:
        kserve.parse_infer_request(body, length, INPUTS, OUTPUTS)
    assert says in str(caught.value)


def test_json_numbers_are_checked_for_kind_and_range():
    small = TensorSpec("u", "UINT8", (3,))
    flags = TensorSpec("b", "BOOL", (2,))

    def parse(spec: TensorSpec, data: list) -> np.ndarray:
        doc = {
            "inputs": [
                {"name": spec.name, "shape": list(spec.shape), "datatype": spec.datatype, "data": data}
            ]
        }
        return kserve.parse_infer_request(_json(doc), None, (spec,), ()).feeds[spec.name]

    np.testing.assert_array_equal(
        parse(small, [[1], [2, 255]]), np.array([1, 2, 255], np.uint8)
    )  # ragged nesting
    with pytest.raises(RequestError, match=r"out of UINT8's range 0\.\.255"):
        parse(small, [1, 2, 300])
    with pytest.raises(RequestError, match="no UINT8 values"):
        parse(small, [1, 2, None])
    np.testing.assert_array_equal(parse(flags, [True, False]), np.array([True, False]))
    with pytest.raises(RequestError, match="no BOOL values"):
        parse(flags, [1, 0])
    # JSON integers too wide for 64 bits: the numbers they are for a float, out of range for an integer
    wide = TensorSpec("f", "FP32", (2,))
    np.testing.assert_array_equal(parse(wide, [2**64, 10**23]), np.array([2.0**64, 1e23], np.float32))
    with pytest.raises(
        RequestError, match=r"out of INT64's range -9223372036854775808\.\.9223372036854775807"
    ):
        parse(TensorSpec("i", "INT64", (1,)), [2**64])
    with pytest.raises(RequestError, match="out of FP64's range"):
        parse(TensorSpec("d", "FP64", (1,)), [10**400])


def test_binary_data_sizes_must_match_the_data():
    body, length = _tritonclient_body(True)
    with pytest.raises(RequestError, match="no input's binary_data_size claims"):
        kserve.parse_infer_request(body + b"\0", length, INPUTS, OUTPUTS)
    with pytest.raises(RequestError, match="does not fit"):
        kserve.parse_infer_request(body[:-1], length, INPUTS, OUTPUTS)


def test_datatypes_map_both_ways():
    for name, dtype in kserve.DATATYPES.items():
        assert kserve.datatype_of(dtype) == name
    assert kserve.datatype_of(np.dtype("<U3")) == "BYTES"
    with pytest.raises(RequestError):
        kserve.datatype_of(np.dtype("complex64"))


def test_model_metadata_lists_tensors_with_dynamic_dims_as_minus_one():
    doc = kserve.model_metadata("digits", INPUTS, OUTPUTS)
    assert doc["name"] == "digits" and doc["versions"] == ["1"]
    assert doc["inputs"][0] == {"name": "x", "datatype": "FP32", "shape": [-1, 3]}
    assert kserve.server_metadata()["extensions"] == ["binary_tensor_data"]


def test_metrics_render_counts_histogram_and_stages():
    metrics = Metrics("m", ["s0", "s1"], buckets=(0.01, 0.1))
    metrics.request_started()
    metrics.request_started()
    assert 'hetero_requests_in_flight{model="m"} 2' in metrics.render()
    metrics.observe_request(0.005, ok=True)
    metrics.observe_request(0.05, ok=True)
    metrics.observe_request(0.5, ok=False)
    metrics.observe_stage("s1", 0.25)
    text = metrics.render()
    assert 'hetero_requests_total{model="m",outcome="success"} 2' in text
    assert 'hetero_requests_total{model="m",outcome="failure"} 1' in text
    assert 'hetero_requests_in_flight{model="m"} 0' in text
    assert 'hetero_request_duration_seconds_bucket{model="m",le="0.01"} 1' in text
    assert 'hetero_request_duration_seconds_bucket{model="m",le="0.1"} 2' in text
    assert 'hetero_request_duration_seconds_bucket{model="m",le="+Inf"} 2' in text
    assert 'hetero_stage_seconds_total{model="m",stage="s0"} 0.0' in text
    assert 'hetero_stage_seconds_total{model="m",stage="s1"} 0.25' in text
    assert 'hetero_stage_runs_total{model="m",stage="s1"} 1' in text
    assert text.endswith("\n")
