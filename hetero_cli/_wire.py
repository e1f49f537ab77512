"""Where each initializer's bytes lie in an .onnx file, read from the protobuf wire format.

An exported subgraph, or a probe of the whole model, can then point ONNX Runtime at those bytes as
external data (location = the model file, offset, length) instead of carrying a copy: the weights of a
model read from a file are never loaded into Python, and nothing serializes them again. Only the top
level of the file is walked (ModelProto.graph -> GraphProto.initializer -> TensorProto.name, raw_data),
skipping every other field by its length; the file is memory-mapped, not read.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator

# field numbers of onnx.proto
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_NAME = 8
_TENSOR_RAW_DATA = 9
_LEN = 2  # wire type of length-delimited fields


def raw_data_spans(path: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """{initializer name: (offset, length)} of the raw_data of each top-level graph initializer stored
    inline in the file; {} if the file cannot be read or walked (callers then keep the weights in memory)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return {}
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _spans(buf)
    except (OSError, ValueError, IndexError):
        return {}


def _spans(buf: mmap.mmap) -> dict[str, tuple[int, int]]:
    spans: dict[str, tuple[int, int]] = {}
    for number, start, end in _fields(buf, 0, len(buf)):
        if number != _MODEL_GRAPH:
            continue
        for inner, tensor_start, tensor_end in _fields(buf, start, end):
            if inner != _GRAPH_INITIALIZER:
                continue
            name, raw = None, None
            for field, begin, finish in _fields(buf, tensor_start, tensor_end):
                if field == _TENSOR_NAME:
                    name = bytes(buf[begin:finish]).decode("utf-8", "replace")
                elif field == _TENSOR_RAW_DATA:
                    raw = (begin, finish - begin)
            if name is not None and raw is not None:
                spans[name] = raw
    return spans


def _fields(buf: mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end) of each length-delimited field in buf[start:end]; others are skipped."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == _LEN:
            length, pos = _varint(buf, pos)
            if pos + length > end:
                raise ValueError("a field runs past its message")
            yield key >> 3, pos, pos + length
            pos += length
        else:  # groups (3, 4) are not used by onnx.proto
            raise ValueError(f"unexpected wire type {wire}")


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
