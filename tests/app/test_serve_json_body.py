"""An infer request's JSON as untrusted input (app/serve/json_body.py, through protocol.parse_infer_request):
nesting bounded before anything is parsed, NaN, Infinity and numbers past the datatype's range refused,
empty tensors refused, and large arrays of numbers read a chunk at a time into what json.loads would give."""

from __future__ import annotations

import json
import random
import threading
import tracemalloc

import numpy as np
import pytest

from hetero_cli.app.serve import TensorSpec, json_body
from hetero_cli.app.serve import protocol as kserve
from hetero_cli.errors import RequestError

X = TensorSpec("x", "FP32", (-1, 4))


def _body(data: str, datatype: str = "FP32", shape: str = "[1, 4]") -> bytes:
    entry = f'"name": "x", "shape": {shape}, "datatype": "{datatype}", "data": {data}'
    return ('{"inputs": [{' + entry + "}]}").encode()


def _parse(body: bytes, spec: TensorSpec = X) -> np.ndarray:
    return kserve.parse_infer_request(body, None, [spec], []).feeds["x"]


def _flat(listed: list) -> list:
    out, stack = [], [listed]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


@pytest.mark.parametrize("depth", [65, 100_000])
def test_a_body_nested_too_deep_is_a_400_before_it_is_parsed(depth):
    body = b'{"inputs": ' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(RequestError, match="nests arrays and objects deeper than 64 levels") as refused:
        _parse(body)
    assert refused.value.status == 400


def test_nesting_inside_strings_does_not_count():
    body = ('{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4], '
            '"parameters": {"note": "%s\\" ]]] [[[ {{{"}}]}' % ("[" * 200)).encode()  # fmt: skip
    np.testing.assert_array_equal(_parse(body), [[1, 2, 3, 4]])


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_no_json_numbers(token):
    with pytest.raises(RequestError, match=f"holds {token}, which is no JSON number") as refused:
        _parse(_body(f"[1, 2, {token}, 4]"))
    assert refused.value.status == 400


@pytest.mark.parametrize(
    ("datatype", "number"), [("FP32", "1e39"), ("FP32", "-3.5e38"), ("FP16", "65520"), ("FP64", "1e400")]
)
def test_a_number_past_the_datatypes_range_is_refused_not_made_inf(datatype, number):
    spec = TensorSpec("x", datatype, (-1, 4))
    with pytest.raises(RequestError, match=f"data out of {datatype}'s range") as refused:
        _parse(_body(f"[1, 2, 3, {number}]", datatype), spec)
    assert refused.value.status == 400
    largest = np.finfo(kserve.DATATYPES[datatype]).max
    assert _parse(_body(f"[1, 2, 3, {float(largest)!r}]", datatype), spec)[0, 3] == largest


@pytest.mark.parametrize("shape", ["[0, 4]", "[0, 0]"])
def test_an_empty_tensor_is_refused_before_any_session(shape):
    spec = TensorSpec("x", "FP32", (-1, -1))
    with pytest.raises(RequestError, match=r"has no element \(dimension 0 is 0\)") as refused:
        _parse(_body("[]", shape=shape), spec)
    assert refused.value.status == 400


def test_an_empty_dimension_the_model_declares_is_taken():
    spec = TensorSpec("x", "FP32", (-1, 0))
    assert _parse(_body("[]", shape="[3, 0]"), spec).shape == (3, 0)


def _large(values: list, nested: int = 0, spaced: bool = False) -> str:
    """``values`` as a JSON array, nested in rows of ``nested`` where given."""
    separator = ", " if spaced else ","
    if nested:
        rows = [values[i : i + nested] for i in range(0, len(values), nested)]
        return "[" + separator.join("[" + separator.join(map(str, r)) + "]" for r in rows) + "]"
    return "[" + separator.join(map(str, values)) + "]"


def _data_doc(text: str) -> bytes:
    return ('{"data": ' + text + "}").encode()


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks and 'large' arrays a few bytes long, so that every array is read in many chunks."""
    monkeypatch.setattr(json_body, "CHUNK", 97)
    monkeypatch.setattr(json_body, "LARGE", 64)


def test_large_arrays_read_in_chunks_equal_what_json_loads_gives(small_chunks):
    rng = random.Random(0)
    for trial in range(300):
        values = [
            rng.choice([rng.randint(-5000, 5000), rng.uniform(-1e3, 1e3), f"{rng.uniform(-9, 9):.3e}", "-0"])
            for _ in range(rng.randint(20, 200))
        ]
        if trial % 3 == 0:
            values = [rng.randint(-(2**40), 2**40) for _ in values]  # integers only: int64, as json's
        text = _large(values, nested=rng.choice([0, 1, 4, 7]), spaced=trial % 2 == 0)
        body = ('{"a": [{"s": "x]\\"[", "data": ' + text + '}], "b": ' + text + ', "c": null}').encode()
        got = json_body.read_json(body)
        want = json.loads(body)
        assert got["c"] is None and got["a"][0]["s"] == 'x]"['
        for array, listed in ((got["a"][0]["data"], want["a"][0]["data"]), (got["b"], want["b"])):
            expected = np.asarray(_flat(listed))  # what the protocol makes of json.loads' lists
            assert isinstance(array, np.ndarray) and array.dtype == expected.dtype
            np.testing.assert_array_equal(array, expected)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2 3, 4]", "misplaced commas, brackets or spaces"),
        ("[1,,2, 3, 4]", "misplaced commas, brackets or spaces"),
        ("[[1, 2][3, 4]]", "misplaced commas, brackets or spaces"),
        ("[1, 2, 3, 4,]", "misplaced commas, brackets or spaces"),
        ("[1., 2, 3, 4]", "no JSON number"),
        ("[01, 2, 3, 4]", "no JSON number"),
        ("[1, 2, +3, 4]", "no JSON number"),
    ],
)
def test_a_large_array_that_is_no_json_is_refused(small_chunks, text, says):
    padded = text[:-1] + ", 0" * 40 + "]"
    with pytest.raises(RequestError, match=says):
        json_body.read_json(_data_doc(padded))
    with pytest.raises(ValueError):
        json.loads(_data_doc(padded))  # json.loads refuses it too


@pytest.mark.parametrize(
    "body", ['{%s: 1, "data": [1]}', '{"inputs": [{%s: 5, "name": "x"}]}', '[{"v": %s}, "s"]']
)
def test_a_large_array_where_json_takes_no_array_is_refused(small_chunks, body):
    """As an object's key an array is no JSON, however long (a large one was read apart and stood in for
    by a string, which passed for a key); as a value it is read."""
    text = "[" + ", ".join(["0.5"] * 40) + "]"
    if body.startswith("{"):
        with pytest.raises(ValueError):
            json.loads(body % text)
        with pytest.raises(RequestError, match="no valid JSON"):
            json_body.read_json((body % text).encode())
    else:
        got = json_body.read_json((body % text).encode())
        assert got[1] == "s" and got[0]["v"].tolist() == [0.5] * 40


def test_a_large_array_of_numbers_with_other_values_is_refused(small_chunks):
    text = "[" + ", ".join(["1.5"] * 60) + ', "x"]'
    with pytest.raises(RequestError, match="holds other values than numbers among its numbers"):
        json_body.read_json(_data_doc(text))


def test_integers_past_int64_are_read_as_json_loads_reads_them(small_chunks):
    values = [2**63 + i for i in range(40)]
    got = json_body.read_json(_data_doc(_large(values)))
    assert got["data"] == values  # left to json.loads: a list of Python ints


def test_utf16_bodies_are_read_as_json_loads_reads_them():
    doc = {
        "inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}],
        "id": "\u5b5b",
    }
    for encoding in ("utf-16", "utf-32-le"):
        assert json_body.read_json(json.dumps(doc, ensure_ascii=False).encode(encoding)) == doc


def test_a_large_body_is_read_without_holding_the_gil_throughout():
    """While a 16 MiB array of numbers is read on a worker thread, this thread runs many times (json.loads
    of it whole is one native call that holds the GIL until it is done)."""
    body = ('{"data": [' + "0.5," * (4 << 20) + "0.5]}").encode()
    done = threading.Event()
    ran = 0
    result: list[np.ndarray] = []

    def read() -> None:
        result.append(json_body.read_json(body)["data"])
        done.set()

    worker = threading.Thread(target=read)
    worker.start()
    while not done.wait(0.001):
        ran += 1
    worker.join(300)
    assert result[0].shape == ((4 << 20) + 1,) and result[0].dtype == np.float64
    assert ran >= 20, ran


def test_strings_with_escapes_and_brackets_around_large_arrays_read_as_json_loads_reads_them(small_chunks):
    names = ["a\\", 'b"[', '\\"]]', "{[\\\\]}", "plain"] * 30
    doc = {"names": names, "data": [[1.5, -2, 3e-3]] * 40, "id": 'x"y'}
    got = json_body.read_json(json.dumps(doc).encode())
    assert got["names"] == names and got["id"] == 'x"y'
    np.testing.assert_array_equal(got["data"], np.asarray(doc["data"]).reshape(-1))


def test_a_body_of_many_strings_is_read_in_a_few_times_its_size():
    """A body of a million empty strings (3 bytes each) takes at most 8 times its size while read, and the
    work of a chunk (CHUNK bytes) besides: its strings' bounds are numpy arrays, not a Python tuple each
    (which took about 66 times: a 63 MiB body, 5 GB of the server's memory)."""
    body = ('{"data": [' + ",".join(['""'] * 1_000_000) + "]}").encode()
    tracemalloc.start()
    try:
        doc = json_body.read_json(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(doc["data"]) == 1_000_000
    assert peak < 8 * len(body) + 24 * json_body.CHUNK, peak / len(body)
