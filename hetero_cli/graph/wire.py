"""Where each initializer's bytes lie in an .onnx file, read from the protobuf wire format.

An exported subgraph, or a probe of the whole model, can then point ONNX Runtime at those bytes as
external data (location = the model file, offset, length) instead of carrying a copy: the weights of a
model read from a file are never loaded into Python, and nothing serializes them again. Only the top
level of the file is walked (ModelProto.graph -> GraphProto.initializer -> TensorProto.name, raw_data),
skipping every other field by its length; the file is memory-mapped, not read.

``skeleton`` uses the same walk to hand protobuf the file without the data of its large weights,
so reading a model never holds its weights in memory, not even for a moment.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

# field numbers of onnx.proto
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_DIMS = 1
_TENSOR_NAME = 8
_TENSOR_RAW_DATA = 9
_TENSOR_DATA_LOCATION = 14
_EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
_LEN = 2  # wire type of length-delimited fields
#: the most fields one walk of a file visits (a model's top level, its graph's, its large initializers'):
#: a real model has far fewer; a file with more is left to onnx's parser (in C++), as one a walk cannot
#: read, so that no file holds Python in a walk for longer than this many fields take
MAX_FIELDS = 1 << 20


def raw_data_spans(path: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """{initializer name: (offset, length)} of the raw_data of each top-level graph initializer stored
    inline in the file; {} if the file cannot be read or walked (callers then keep the weights in memory)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return {}
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _spans(buf, _Budget())
    except (OSError, ValueError, IndexError):
        return {}


def skeleton(path: str | os.PathLike[str], more_than: int) -> tuple[bytes, dict[int, int]] | None:
    """The serialized model in ``path`` without the raw_data of its top-level graph initializers of more
    than ``more_than`` elements stored inline (their name, type and dims kept), and {index in
    graph.initializer: bytes of the raw_data left out} of the initializers it holds without their data
    (so their size can still be checked against their shape); None when the file cannot be read or
    walked (callers then parse the whole file)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return None
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                left_out: dict[int, int] = {}
                return bytes(_without_weights(buf, more_than, left_out, _Budget())), left_out
    except (OSError, ValueError, IndexError):
        return None


def _without_weights(buf: mmap.mmap, more_than: int, left_out: dict[int, int], budget: _Budget) -> bytearray:
    out = bytearray()
    for number, wire, key_start, start, end in _all_fields(buf, 0, len(buf), budget):
        if number != _MODEL_GRAPH or wire != _LEN:
            out += buf[key_start:end]
            continue
        graph, index = bytearray(), 0
        for inner, inner_wire, inner_key, tensor_start, tensor_end in _all_fields(buf, start, end, budget):
            if inner == _GRAPH_INITIALIZER and inner_wire == _LEN:
                index += 1
                stripped = _tensor_without_data(buf, tensor_start, tensor_end, more_than, budget)
                if stripped is not None:
                    tensor, left_out[index - 1] = stripped
                    graph += _key(inner, _LEN) + _encode_varint(len(tensor)) + tensor
                    continue
            graph += buf[inner_key:tensor_end]
        out += _key(number, _LEN) + _encode_varint(len(graph)) + graph
    return out


def _tensor_without_data(
    buf: mmap.mmap, start: int, end: int, more_than: int, budget: _Budget
) -> tuple[bytearray, int] | None:
    """The TensorProto in buf[start:end] without its raw_data, and that raw_data's length, when it is
    large and inline; else None."""
    elements, external, has_raw, raw_length = 1, False, False, 0
    for number, wire, _, begin, finish in _all_fields(buf, start, end, budget):
        if number == _TENSOR_DIMS and wire == 0:
            elements *= _varint(buf, begin)[0]
        elif number == _TENSOR_DIMS and wire == _LEN:
            pos = begin
            while pos < finish:
                dim, pos = _varint(buf, pos)
                elements *= dim
        elif number == _TENSOR_DATA_LOCATION and wire == 0:
            external = _varint(buf, begin)[0] == _EXTERNAL
        elif number == _TENSOR_RAW_DATA and wire == _LEN:
            has_raw, raw_length = True, finish - begin
    if not has_raw or external or elements <= more_than:
        return None
    kept = bytearray()
    for number, _, key_start, _, finish in _all_fields(buf, start, end, budget):
        if number != _TENSOR_RAW_DATA:
            kept += buf[key_start:finish]
    return kept, raw_length


class _Budget:
    """How many more fields one walk of a file may visit (MAX_FIELDS)."""

    def __init__(self) -> None:
        self.fields = MAX_FIELDS
        self.left = self.fields

    def spend(self) -> None:
        """Count one field visited; ValueError once the walk has visited more than its budget."""
        self.left -= 1
        if self.left < 0:
            raise ValueError(f"more than {self.fields} fields to walk")


def _all_fields(
    buf: mmap.mmap, start: int, end: int, budget: _Budget
) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, start of its key, start of its value, end) of each field in buf[start:end];
    a length-delimited value starts after its length. ValueError where the bytes are no protobuf message
    (field number 0, which protobuf never writes: a file of zeros is refused at its first byte), or
    ``budget`` runs out."""
    pos = start
    while pos < end:
        budget.spend()
        key_start = pos
        key, pos = _varint(buf, pos)
        if key >> 3 == 0:
            raise ValueError("field number 0 (no protobuf message)")
        wire = key & 7
        value_start = pos
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == _LEN:
            length, value_start = _varint(buf, pos)
            pos = value_start + length
        else:  # groups (3, 4) are not used by onnx.proto
            raise ValueError(f"unexpected wire type {wire}")
        if pos > end:
            raise ValueError("a field runs past its message")
        yield key >> 3, wire, key_start, value_start, pos


def _key(number: int, wire: int) -> bytes:
    return _encode_varint(number << 3 | wire)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _spans(buf: mmap.mmap, budget: _Budget) -> dict[str, tuple[int, int]]:
    spans: dict[str, tuple[int, int]] = {}
    for number, start, end in _fields(buf, 0, len(buf), budget):
        if number != _MODEL_GRAPH:
            continue
        for inner, tensor_start, tensor_end in _fields(buf, start, end, budget):
            if inner != _GRAPH_INITIALIZER:
                continue
            name, raw = None, None
            for field, begin, finish in _fields(buf, tensor_start, tensor_end, budget):
                if field == _TENSOR_NAME:
                    name = bytes(buf[begin:finish]).decode("utf-8", "replace")
                elif field == _TENSOR_RAW_DATA:
                    raw = (begin, finish - begin)
            if name is not None and raw is not None:
                spans[name] = raw
    return spans


def _fields(buf: mmap.mmap, start: int, end: int, budget: _Budget) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end) of each length-delimited field in buf[start:end]; others are skipped."""
    for number, wire, _, value_start, value_end in _all_fields(buf, start, end, budget):
        if wire == _LEN:
            yield number, value_start, value_end


def _varint(buf: mmap.mmap, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
