"""KServe v2 REST, as Triton and OpenVINO Model Server speak it: pure functions, no web framework.

    request = parse_infer_request(body, header_length, inputs, outputs)   # RequestError if refused
    results = ...infer request.feeds...
    body, header_length = encode_infer_response("digits", results, request)

An infer request is JSON (``{"inputs": [{"name", "shape", "datatype", "data"}], "outputs"?, "parameters"?}``)
or, with Triton's binary tensor extension (what ``tritonclient.http`` sends), a JSON header of
``Inference-Header-Content-Length`` bytes followed by each input's raw bytes, in order, for the inputs whose
``parameters.binary_data_size`` says so. Outputs go back as JSON data, or as raw bytes after the JSON header
for those asked with ``parameters.binary_data`` (or all, with the request's ``binary_data_output``).
Shapes use -1 for a dynamic dimension. Refusals are RequestError, whose ``status`` is the HTTP status.

A request's JSON is read by json_body.read_json (nesting bounded, NaN and Infinity refused, large arrays of
numbers read by numpy a chunk at a time), and a response's large JSON data are written a chunk at a time:
neither holds Python's GIL for long, so a server that parses on a worker thread keeps answering.
"""

from __future__ import annotations

import json
import math
import secrets
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import __version__
from ...errors import RequestError
from .json_body import read_json

#: KServe v2 datatypes and the numpy dtypes that hold them (BYTES: numpy object arrays of bytes)
DATATYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}
_BY_DTYPE = {dtype: name for name, dtype in DATATYPES.items() if name != "BYTES"}
HEADER_LENGTH = "Inference-Header-Content-Length"
SERVER_NAME = "hetero-cli"
#: what the server supports beyond the core protocol (Triton's names)
EXTENSIONS = ("binary_tensor_data",)
#: an output of this many values or more is written to JSON a chunk of that many at a time
LARGE_OUTPUT = 1 << 16


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as KServe v2 names it: ``datatype`` one of DATATYPES' keys, ``shape`` with
    -1 for a dynamic dimension (empty for a scalar)."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    def metadata(self) -> dict[str, Any]:
        """The tensor's entry in model metadata: name, datatype, shape."""
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


@dataclass(frozen=True)
class OutputRequest:
    """An output the request asks for, and whether it wants the output's data as raw bytes."""

    name: str
    binary: bool


@dataclass
class InferRequest:
    """A parsed infer request: its ``id`` (echoed back), the model's inputs as arrays (``feeds``), the
    outputs asked for (None: all, each binary if ``binary_default``)."""

    feeds: dict[str, np.ndarray]
    id: str | None = None
    outputs: list[OutputRequest] | None = None
    binary_default: bool = False
    parameters: dict[str, Any] = field(default_factory=dict)


def datatype_of(dtype: np.dtype) -> str:
    """The KServe datatype of numpy ``dtype`` (strings and objects: BYTES). RequestError (500) for a dtype
    KServe v2 has no datatype for."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return "BYTES"
    try:
        return _BY_DTYPE[dtype]
    except KeyError:
        raise RequestError(f"the model's tensor type {dtype} has no KServe v2 datatype", 500) from None


def server_metadata() -> dict[str, Any]:
    """``GET /v2``: the server's name, version and protocol extensions."""
    return {"name": SERVER_NAME, "version": __version__, "extensions": list(EXTENSIONS)}


def model_metadata(
    name: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], version: str = "1"
) -> dict[str, Any]:
    """``GET /v2/models/<name>``: name, versions, platform, inputs and outputs (name, datatype, shape)."""
    return {
        "name": name,
        "versions": [version],
        "platform": "onnxruntime_onnx",
        "inputs": [t.metadata() for t in inputs],
        "outputs": [t.metadata() for t in outputs],
    }


def error_body(message: str) -> dict[str, str]:
    """A KServe error's body: ``{"error": message}``."""
    return {"error": message}


def parse_infer_request(
    body: bytes,
    header_length: int | str | None,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
) -> InferRequest:
    """The infer request in ``body``: JSON alone, or (``header_length``, the Inference-Header-Content-Length
    header's value) a JSON header followed by binary tensor data. Each input is checked against ``inputs``
    (every one given once, by name, in its datatype and a shape that fits its own), the outputs asked for
    against ``outputs``. Returns an InferRequest; raises RequestError (400) saying what is wrong."""
    header, binary = _split_body(body, header_length)
    doc = read_json(header)
    if not isinstance(doc, dict):
        raise RequestError(f"the request body must be a JSON object, not {type(doc).__name__}")
    given = doc.get("inputs")
    if not isinstance(given, list) or not given:
        raise RequestError(
            'the request has no "inputs": give a list of {"name", "shape", "datatype", "data"}'
        )
    specs = {t.name: t for t in inputs}
    feeds: dict[str, np.ndarray] = {}
    offset = 0
    for entry in given:
        spec = _input_spec(entry, specs, feeds)
        feeds[spec.name], offset = _input_array(entry, spec, binary, offset)
    if offset != len(binary):
        raise RequestError(
            f"the request carries {len(binary) - offset} byte(s) of binary data no input's binary_data_size claims"
        )
    missing = [t.name for t in inputs if t.name not in feeds]
    if missing:
        raise RequestError(f"input(s) missing: {', '.join(missing)} (the model takes {_names(inputs)})")
    parameters = _parameters(doc, "the request")
    return InferRequest(
        feeds=feeds,
        id=_request_id(doc),
        outputs=_output_requests(doc.get("outputs"), outputs, _flag(parameters, "binary_data_output")),
        binary_default=_flag(parameters, "binary_data_output"),
        parameters=parameters,
    )


def encode_infer_response(
    model_name: str, results: Mapping[str, np.ndarray], request: InferRequest, version: str = "1"
) -> tuple[bytes, int | None]:
    """The response to ``request``: its outputs from ``results`` ({output name: array}, in the model's
    order), as JSON data or binary as asked. Returns the body and, where binary data follows the JSON, the
    JSON's length (the Inference-Header-Content-Length header to send), else None."""
    wanted = request.outputs or [OutputRequest(n, request.binary_default) for n in results]
    tag = secrets.token_hex(16)  # no string of the response can be taken for a placeholder
    large: dict[str, np.ndarray] = {}  # JSON data written a chunk at a time, by placeholder
    entries: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    for out in wanted:
        array = np.asarray(results[out.name])
        entry: dict[str, Any] = {
            "name": out.name,
            "datatype": datatype_of(array.dtype),
            "shape": list(array.shape),
        }
        if out.binary:
            blob = _to_bytes(array)
            entry["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        elif array.size >= LARGE_OUTPUT:
            entry["data"] = placeholder = f"{tag}:{len(large)}"
            large[placeholder] = array
        else:
            entry["data"] = _to_list(array)
        entries.append(entry)
    doc: dict[str, Any] = {"model_name": model_name, "model_version": version, "outputs": entries}
    if request.id is not None:
        doc["id"] = request.id
    header = json.dumps(doc, separators=(",", ":")).encode()
    for placeholder, array in large.items():
        before, _, after = header.partition(f'"{placeholder}"'.encode())
        header = b"".join([before, _json_data(array), after])
    if not blobs:
        return header, None
    return header + b"".join(blobs), len(header)


# --- requests ------------------------------------------------------------------------------------------


def _split_body(body: bytes, header_length: int | str | None) -> tuple[bytes, bytes]:
    """The JSON header and the binary data after it."""
    if header_length is None:
        return body, b""
    try:
        length = int(header_length)
    except (TypeError, ValueError):
        raise RequestError(
            f"{HEADER_LENGTH} must be a whole number of bytes, not {header_length!r}"
        ) from None
    if not 0 <= length <= len(body):
        raise RequestError(f"{HEADER_LENGTH} is {length}, but the body has {len(body)} byte(s)")
    return body[:length], body[length:]


def _names(specs: Sequence[TensorSpec]) -> str:
    return ", ".join(f"{t.name} ({t.datatype} {list(t.shape)})" for t in specs)


def _input_spec(entry: Any, specs: Mapping[str, TensorSpec], seen: Mapping[str, np.ndarray]) -> TensorSpec:
    """The model's spec for an input entry (by its name); RequestError for an entry that is no object, an
    unknown name or one given twice."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise RequestError('each of "inputs" must be an object with a "name"')
    name = entry["name"]
    if name not in specs:
        raise RequestError(f"unknown input {name!r}: the model takes {_names(list(specs.values()))}")
    if name in seen:
        raise RequestError(f"input {name!r} is given twice")
    return specs[name]


def _input_array(
    entry: dict[str, Any], spec: TensorSpec, binary: bytes, offset: int
) -> tuple[np.ndarray, int]:
    """The array of one input entry, checked against ``spec``, and the binary data's offset after it."""
    datatype = entry.get("datatype")
    if datatype != spec.datatype:
        raise RequestError(f"input {spec.name!r}: datatype {datatype!r}, the model takes {spec.datatype}")
    shape = _shape(entry.get("shape"), spec)
    size = _parameters(entry, f"input {spec.name!r}").get("binary_data_size")
    if size is not None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RequestError(f"input {spec.name!r}: binary_data_size must be a byte count, not {size!r}")
        if offset + size > len(binary):
            raise RequestError(
                f"input {spec.name!r}: binary_data_size {size!r} does not fit the {len(binary) - offset} "
                "byte(s) of binary data left"
            )
        return _from_bytes(binary[offset : offset + size], spec, shape), offset + size
    if "data" not in entry:
        raise RequestError(f'input {spec.name!r} has no "data" (nor binary_data_size)')
    return _from_json(entry["data"], spec, shape), offset


def _flag(parameters: Mapping[str, Any], name: str, default: bool = False) -> bool:
    """A boolean parameter (binary_data, binary_data_output); RequestError for a value that is no JSON
    boolean (the string "false" would have counted as true)."""
    value = parameters.get(name, default)
    if not isinstance(value, bool):
        raise RequestError(f'parameter "{name}" must be true or false, not {value!r}')
    return value


def _shape(value: Any, spec: TensorSpec) -> tuple[int, ...]:
    """A request's shape for ``spec``: whole numbers >= 0, as many as the model's, equal where the model's is
    fixed."""
    if not isinstance(value, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in value):
        raise RequestError(f"input {spec.name!r}: shape must be a list of whole numbers, not {value!r:.100}")
    fits = len(value) == len(spec.shape) and all(
        d >= 0 and want in (-1, d) for d, want in zip(value, spec.shape, strict=True)
    )
    if not fits:
        raise RequestError(
            f"input {spec.name!r}: shape {_shown(value)}, the model takes {list(spec.shape)} (-1: any)"
        )
    empty = [i for i, (d, want) in enumerate(zip(value, spec.shape, strict=True)) if d == 0 and want != 0]
    if empty:
        raise RequestError(
            f"input {spec.name!r}: shape {value} has no element (dimension {empty[0]} is 0): the server "
            "refuses empty tensors where the model does not declare them, as devices fail on them; send at "
            "least one element along each dimension"
        )
    return tuple(value)


def _shown(values: list[int]) -> str:
    """A list of numbers for a message: the first few of a long one."""
    return (
        str(values)
        if len(values) <= 8
        else f"[{', '.join(map(str, values[:8]))}, ...] ({len(values)} numbers)"
    )


def _from_json(data: Any, spec: TensorSpec, shape: tuple[int, ...]) -> np.ndarray:
    """JSON data (flat or nested, row-major) as an array of ``shape``: numbers of the datatype's kind only
    (booleans for BOOL, integers in range for integer types; a string "1" is refused, not parsed)."""
    if spec.datatype == "BYTES":
        try:
            flat = np.array([_bytes_item(v) for v in _flatten(data)], dtype=object)
        except (TypeError, UnicodeError) as exc:  # no string, or one UTF-8 cannot hold (a lone surrogate)
            raise RequestError(f"input {spec.name!r}: data are no BYTES values ({exc})") from None
    else:
        flat = _numbers(data, spec)
    count = math.prod(shape)
    if flat.size != count:
        raise RequestError(
            f"input {spec.name!r}: {flat.size} value(s) in data, its shape {list(shape)} holds {count}"
        )
    return flat.reshape(shape)


def _numbers(data: Any, spec: TensorSpec) -> np.ndarray:
    """JSON numbers as a flat array of ``spec``'s datatype, read by numpy in one pass."""
    dtype = DATATYPES[spec.datatype]
    try:
        raw = np.asarray(data)
    except ValueError:  # ragged nesting: still row-major values
        raw = np.asarray(_flatten(data))
    raw = raw.reshape(-1)
    if raw.size == 0:
        return raw.astype(dtype)
    kinds = {"BOOL": "b", "FP16": "iuf", "FP32": "iuf", "FP64": "iuf"}.get(spec.datatype, "iu")
    if raw.dtype.kind != "b" and isinstance(data, list) and any(isinstance(v, bool) for v in _flatten(data)):
        raise RequestError(
            f"input {spec.name!r}: data are no {spec.datatype} values (true or false among numbers)"
        )
    if raw.dtype.kind == "O" and all(type(v) in (int, float) for v in raw):
        raw = _wide_integers(raw, spec, dtype)  # integers past 64 bits: numpy holds them as objects
    if raw.dtype.kind not in kinds:
        raise RequestError(f"input {spec.name!r}: data are no {spec.datatype} values")
    if raw.dtype.kind in "iu" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if raw.min() < info.min or raw.max() > info.max:
            raise RequestError(
                f"input {spec.name!r}: data out of {spec.datatype}'s range {info.min}..{info.max}"
            )
    if dtype.kind != "f":
        return raw.astype(dtype)
    with np.errstate(over="ignore"):  # a number past the type's range becomes inf: refused below
        values = raw.astype(dtype)
    if not np.isfinite(values).all():  # JSON has no inf or NaN (read_json refuses their names)
        finite = np.finfo(dtype).max
        raise RequestError(
            f"input {spec.name!r}: data out of {spec.datatype}'s range -{finite:g}..{finite:g} (a number "
            "whose magnitude is larger, which would be inf)"
        )
    return values


def _wide_integers(raw: np.ndarray, spec: TensorSpec, dtype: np.dtype) -> np.ndarray:
    """JSON numbers among which integers too wide for 64 bits (``raw``, numpy's objects) as float64 for a
    floating ``dtype`` (2**64 is the same number as 1.8446744073709552e19); RequestError (out of range)
    for an integer ``dtype`` or a number no float holds."""
    if dtype.kind == "f":
        try:
            return raw.astype(np.float64)
        except OverflowError:  # past float64's range: out of every FP type's, as inf would be
            pass
    if dtype.kind == "f":
        held = f"-{np.finfo(dtype).max:g}..{np.finfo(dtype).max:g}"
    else:
        held = f"{np.iinfo(dtype).min}..{np.iinfo(dtype).max}"
    raise RequestError(f"input {spec.name!r}: data out of {spec.datatype}'s range {held}")


def _flatten(data: Any) -> list[Any]:
    """Nested lists' values in row-major order (an array read_json made of a large part: its values)."""
    if isinstance(data, np.ndarray):
        return list(data.ravel())
    if not isinstance(data, list):
        return [data]
    out: list[Any] = []
    for item in data:
        out.extend(_flatten(item))
    return out


def _bytes_item(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"{value!r} is no string")


def _from_bytes(blob: bytes, spec: TensorSpec, shape: tuple[int, ...]) -> np.ndarray:
    """Raw little-endian bytes (BYTES: each element a 4-byte length and its bytes) as an array of ``shape``."""
    count = math.prod(shape)
    if spec.datatype == "BYTES":
        items = _split_bytes(blob, spec.name)
        if len(items) != count:
            raise RequestError(
                f"input {spec.name!r}: {len(items)} element(s), its shape {list(shape)} holds {count}"
            )
        return np.array(items, dtype=object).reshape(shape)
    dtype = DATATYPES[spec.datatype].newbyteorder("<")
    if len(blob) != count * dtype.itemsize:
        raise RequestError(
            f"input {spec.name!r}: {len(blob)} byte(s) of binary data, its shape {list(shape)} in "
            f"{spec.datatype} takes {count * dtype.itemsize}"
        )
    return np.frombuffer(blob, dtype=dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def _split_bytes(blob: bytes, name: str) -> list[bytes]:
    items: list[bytes] = []
    at = 0
    while at < len(blob):
        if at + 4 > len(blob):
            raise RequestError(f"input {name!r}: BYTES data end inside an element's 4-byte length")
        (length,) = struct.unpack_from("<I", blob, at)
        at += 4
        if at + length > len(blob):
            raise RequestError(f"input {name!r}: a BYTES element of {length} byte(s) runs past the data")
        items.append(blob[at : at + length])
        at += length
    return items


def _parameters(doc: Mapping[str, Any], what: str) -> dict[str, Any]:
    parameters = doc.get("parameters", {})
    if not isinstance(parameters, dict):
        raise RequestError(f'{what}: "parameters" must be an object')
    return parameters


def _request_id(doc: Mapping[str, Any]) -> str | None:
    value = doc.get("id")
    if value is None or isinstance(value, str):
        return value
    raise RequestError(f'the request\'s "id" must be a string, not {value!r}')


def _output_requests(
    value: Any, outputs: Sequence[TensorSpec], binary_default: bool
) -> list[OutputRequest] | None:
    """The outputs asked for (None: all); RequestError for an unknown one, or one asked twice."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise RequestError('"outputs" must be a list of {"name"}')
    known = {t.name for t in outputs}
    wanted: list[OutputRequest] = []
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise RequestError('each of "outputs" must be an object with a "name"')
        name = entry["name"]
        if name not in known:
            raise RequestError(f"unknown output {name!r}: the model gives {_names(outputs)}")
        if any(w.name == name for w in wanted):
            raise RequestError(f"output {name!r} is asked twice")
        binary = _flag(_parameters(entry, f"output {name!r}"), "binary_data", binary_default)
        wanted.append(OutputRequest(name, binary))
    return wanted or None


# --- responses -----------------------------------------------------------------------------------------


def _to_bytes(array: np.ndarray) -> bytes:
    """An output's raw bytes: little-endian, row-major; BYTES elements each as a 4-byte length and bytes."""
    if datatype_of(array.dtype) == "BYTES":
        parts = []
        for item in array.ravel():
            data = item if isinstance(item, bytes) else str(item).encode()
            parts.append(struct.pack("<I", len(data)) + data)
        return b"".join(parts)
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


def _json_data(array: np.ndarray) -> bytes:
    """A large numeric output's JSON data, flat, written LARGE_OUTPUT values at a time: json.dumps of them all
    at once would hold the GIL for seconds."""
    flat = array.ravel()
    chunks = [
        json.dumps(_to_list(flat[at : at + LARGE_OUTPUT]), separators=(",", ":"))[1:-1].encode()
        for at in range(0, flat.size, LARGE_OUTPUT)
    ]
    return b"[" + b",".join(chunks) + b"]"


def _to_list(array: np.ndarray) -> list[Any]:
    """An output's JSON data: flat, row-major; BYTES as strings."""
    flat = array.ravel()
    if datatype_of(array.dtype) == "BYTES":
        return [v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in flat]
    return flat.tolist()
