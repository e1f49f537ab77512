""".npy data that is not read (benchmark's and tune's -i files, the arrays in Polygraphy's JSON files): one
line that says what is wrong with it, never numpy's advice to load it "unsafely" with allow_pickle."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from support.robust import invoke, nothing_left_behind, one_error_line

from hetero_cli.app.npy import NpyError, load_npy, npy_header
from hetero_cli.app.validate.polygraphy_json import load_inputs
from hetero_cli.cli import hetero
from hetero_cli.errors import ValidationError

DIGITS = Path(__file__).resolve().parents[2] / "models" / "digits.onnx"


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


OBJECTS = np.array([{"a": 1}, None], dtype=object)
GOOD = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)

BAD_DATA = {
    "not npy": (b"hello world", "is not .npy data (it lacks the header np.save writes)"),
    "empty": (b"", "is not .npy data"),
    "Python objects": (_npy(OBJECTS), "holds Python objects (dtype object), which are never loaded"),
    "cut short": (_npy(GOOD)[:-10], "is damaged .npy data"),
    "a damaged header": (
        b"\x93NUMPY\x01\x00\x10\x00{'descr': <f4'",
        "is damaged .npy data: its header cannot be read",
    ),
}


@pytest.mark.parametrize(("data", "words"), BAD_DATA.values(), ids=list(BAD_DATA))
def test_bad_npy_data_says_what_is_wrong_and_never_suggests_unpickling(tmp_path, data, words):
    path = tmp_path / "x.npy"
    path.write_bytes(data)
    for source in (data, path):
        with pytest.raises(NpyError) as err:
            load_npy(source)
        assert words in str(err.value)
        assert "pickle" not in str(err.value)


def test_an_npz_payload_gives_its_first_array_and_is_checked_the_same():
    np.testing.assert_array_equal(load_npy(_npz(a=GOOD, b=GOOD + 1), npz=True), GOOD)
    with pytest.raises(NpyError, match="holds Python objects") as err:
        load_npy(_npz_objects(), npz=True)
    assert "pickle" not in str(err.value)
    with pytest.raises(NpyError, match=r"is not \.npy data"):
        load_npy(_npz(a=GOOD))  # an .npz where only .npy is taken (an -i file)


def _npz_objects() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, a=OBJECTS)  # savez pickles object arrays
    return buffer.getvalue()


def test_the_header_alone_gives_shape_and_type(tmp_path):
    np.save(tmp_path / "x.npy", GOOD)
    assert npy_header(tmp_path / "x.npy") == ((1, 1, 4, 4), np.dtype(np.float32))
    np.testing.assert_array_equal(load_npy(tmp_path / "x.npy"), GOOD)


@pytest.mark.parametrize("payload", [base64.b64encode(b"hello world").decode(), "not base64 !!"])
def test_a_polygraphy_payload_that_is_no_npy_data_says_so(tmp_path, payload):
    """Base64 of something else, or text that is neither base64 nor latin-1 .npy bytes."""
    path = tmp_path / "in.json"
    path.write_text(json.dumps([{"x": {"array": payload, "polygraphy_class": "ndarray"}}]))
    with pytest.raises(ValidationError) as err:
        load_inputs(path)
    assert "holds an array payload that is not .npy data" in str(err.value)
    assert "pickle" not in str(err.value)


def test_load_inputs_with_a_bad_payload_is_one_line_exit_2(tmp_path):
    path = tmp_path / "in.json"
    payload = base64.b64encode(_npy(OBJECTS)).decode()
    path.write_text(json.dumps([{"image": {"array": payload, "polygraphy_class": "ndarray"}}]))
    with nothing_left_behind(tmp_path):
        result = invoke(hetero, "validate", "-m", DIGITS, "-d", "CPU", "--load-inputs", path)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "holds an array payload that holds Python objects (dtype object)" in line
    assert "pickle" not in line


@pytest.mark.parametrize("command", ["benchmark", "tune"])
@pytest.mark.parametrize(("data", "words"), BAD_DATA.values(), ids=list(BAD_DATA))
def test_an_input_file_of_bad_npy_data_is_one_line_exit_2(tmp_path, command, data, words):
    path = tmp_path / "x.npy"
    path.write_bytes(data)
    args = (
        ["-d", "HETERO:CPU", "-niter", "1"]
        if command == "benchmark"
        else ["-d", "HETERO:CPU", "-shape", "[1,1,32,32]", "--save", tmp_path / "t.onnx"]
    )
    with nothing_left_behind(tmp_path):
        result = invoke(hetero, command, "-m", DIGITS, "-i", path, *args)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"-i {path} {words}" in line
    assert "pickle" not in line
