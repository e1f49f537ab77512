"""The weights of an export, each kept once: the models an artifact holds (the source model, each
subgraph's) are stored without the data of their large initializers and Constant nodes' values, and those
bytes lie in one pool payload, each distinct tensor once, which the header's table maps per model: an
initializer by its name, a Constant by its index among the graph's nodes (a Constant may have no name).

Why: a subgraph's weights are the source model's. Stored in each model, they doubled the artifact, and
an import parsed them twice and handed ONNX Runtime a serialized copy, which made importing a one-subgraph
model 2.5-3x slower than compiling it afresh. An import of an artifact on disk now points ONNX Runtime at
the bytes in the file (external data: the file's own name, an offset, a length), as a compile of an .onnx
file does; an import of bytes puts them back inline.

``pool`` splits models at export; ``fill`` joins one at import, checking the table first: it is untrusted
input, and no entry of it may make an import read outside the pool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from ...errors import ArtifactError
from ...graph.external import elements, is_external, tensor_nbytes
from ...graph.shared import copy_fields, field_kind
from ...graph.weights import SMALL_INITIALIZER, holds_data

#: the header key of the tables, one per model payload: {INITIALIZERS: {name: [offset in the pool, length]},
#: CONSTANTS: {index in graph.node, as text: [offset, length]}}
TABLES = "weights"
INITIALIZERS = "initializers"
CONSTANTS = "constants"


@dataclass(frozen=True)
class Pooled:
    """Models split for an export: each one's ``skeletons`` (serialized, without its pooled weights), its
    ``tables`` (where each lies in the pool: TABLES), and the ``pool``: the distinct weights' bytes, in
    the order the tables' offsets count them (artifact.pack writes them one after another)."""

    skeletons: tuple[bytes, ...]
    tables: tuple[dict[str, dict[str, list[int]]], ...]
    pool: tuple[bytes, ...]


@dataclass(frozen=True)
class PoolFile:
    """Where a pool lies on disk, for references to it: the artifact's real ``path``, the ``offset`` of
    the pool payload in it and its ``size``."""

    path: Path
    offset: int
    size: int


def pool(models: Iterable[onnx.ModelProto]) -> Pooled:
    """``models`` split (their messages are not changed; each is let go once split, so a generator's can
    be freed one by one): the raw_data of each top-level graph
    initializer, and of each top-level Constant node's value, of more than SMALL_INITIALIZER elements goes
    to the pool, identical bytes once; smaller ones (shapes, axes, scales, read by shape inference) and data
    in other fields stay in the model."""
    pooled = _Chunks()
    skeletons, tables = [], []
    for proto in models:
        skeleton, table = _split(proto, pooled)
        del proto  # nothing here holds it now: a generator's model goes before the next one is made
        skeletons.append(skeleton)
        tables.append(table)
    return Pooled(tuple(skeletons), tuple(tables), tuple(pooled.chunks))


def _split(proto: onnx.ModelProto, pooled: _Chunks) -> tuple[bytes, dict[str, dict[str, list[int]]]]:
    """``proto`` serialized without its poolable weights, which go to ``pooled``, and its table."""
    out = onnx.ModelProto()
    copy_fields(out, proto, skip={"graph"})
    copy_fields(out.graph, proto.graph, skip={"initializer"})
    initializers: dict[str, list[int]] = {}
    constants: dict[str, list[int]] = {}
    for tensor in proto.graph.initializer:
        if not _poolable(tensor) or tensor.name in initializers:
            out.graph.initializer.append(tensor)
            continue
        initializers[tensor.name] = pooled.place(tensor.raw_data)
        out.graph.initializer.append(_without_raw_data(tensor))
    for index, node in enumerate(out.graph.node):
        value = _constant_value(node)
        if value is not None and _poolable(value):
            constants[str(index)] = pooled.place(value.raw_data)
            value.ClearField("raw_data")
    return out.SerializeToString(), {INITIALIZERS: initializers, CONSTANTS: constants}


class _Chunks:
    """The pool being filled: each distinct byte string once (compared whole, found by its length and
    ends: no hash of gigabytes of weights), and where each lies."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self._seen: dict[tuple[int, bytes, bytes], list[tuple[bytes, list[int]]]] = {}

    def place(self, data: bytes) -> list[int]:
        """[offset, length] of ``data`` in the pool, added unless the same bytes are there already."""
        candidates = self._seen.setdefault((len(data), data[:64], data[-64:]), [])
        for held, span in candidates:
            if held == data:
                return span
        span = [self.size, len(data)]
        candidates.append((data, span))
        self.chunks.append(data)
        self.size += len(data)
        return span


def _without_raw_data(tensor: onnx.TensorProto) -> onnx.TensorProto:
    """A copy of ``tensor`` without its raw_data, made field by field: the data is never copied (reading
    every field at once, as copy_fields does, would hand protobuf's raw_data over as a copy)."""
    out = onnx.TensorProto()
    for field in onnx.TensorProto.DESCRIPTOR.fields:
        name = field.name
        if name == "raw_data":
            continue
        is_message, _, repeated = field_kind(field)
        if repeated:
            values = getattr(tensor, name)
            if len(values):
                getattr(out, name).extend(values)
        elif tensor.HasField(name):
            if is_message:
                getattr(out, name).CopyFrom(getattr(tensor, name))
            else:
                setattr(out, name, getattr(tensor, name))
    return out


def _constant_value(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor of a Constant node's ``value`` attribute (the node's own message), or None."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
        return None
    return next(
        (a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR), None
    )


def _poolable(tensor: onnx.TensorProto) -> bool:
    return tensor.HasField("raw_data") and not is_external(tensor) and elements(tensor) > SMALL_INITIALIZER


def fill(proto: onnx.ModelProto, table: Any, pool: memoryview | PoolFile, where: str, what: str) -> None:
    """Give ``proto`` (a skeleton, parsed) its pooled weights, in place: references into the file where
    ``pool`` is a PoolFile (ONNX Runtime reads them there; the session's external data folder must be the
    file's folder), else copies of the pool's bytes. ``what`` names the model in messages.

    Raises ArtifactError where ``table`` is not what ``pool`` writes: an entry that is no [offset, length]
    inside the pool, names no initializer or Constant of the model (or one that holds data of its own), or
    whose length is not what the tensor's type and shape need.
    """
    if not isinstance(table, Mapping) or set(table) != {INITIALIZERS, CONSTANTS}:
        raise ArtifactError(f"{where} is damaged: the weight table of {what} is not what hetero-cli writes")
    initializers, constants = table[INITIALIZERS], table[CONSTANTS]
    if not isinstance(initializers, Mapping) or not isinstance(constants, Mapping):
        raise ArtifactError(f"{where} is damaged: the weight table of {what} is not what hetero-cli writes")
    by_name: dict[str, list[onnx.TensorProto]] = {}
    for tensor in proto.graph.initializer:
        by_name.setdefault(tensor.name, []).append(tensor)
    nodes = proto.graph.node
    wanted = [(repr(name), by_name.get(name, []), span) for name, span in initializers.items()]
    for index, span in constants.items():
        value = (
            _constant_value(nodes[int(index)]) if str(index).isdigit() and int(index) < len(nodes) else None
        )
        wanted.append((f"the Constant at node {index}", [] if value is None else [value], span))
    size = pool.size if isinstance(pool, PoolFile) else len(pool)
    for name, found, span in wanted:
        offset, length = _span(span, size, where, what, name)
        if len(found) != 1 or holds_data(found[0]) or is_external(found[0]):
            raise ArtifactError(
                f"{where} is damaged: the weight table of {what} names {name}, which is not one of its tensors "
                "waiting for its data"
            )
        _give(found[0], offset, length, pool, f"{where} is damaged: the weight table of {what} gives {name}")


def _give(tensor: onnx.TensorProto, offset: int, length: int, pool: memoryview | PoolFile, who: str) -> None:
    """``tensor`` given its ``length`` bytes at ``offset`` in the pool: as a reference into its file, else
    copied in. ArtifactError (``who`` starts its message) where its shape and type need another length."""
    if tensor_nbytes(tensor) != length:
        raise ArtifactError(
            f"{who} {length} bytes, where its shape {list(tensor.dims)} needs {tensor_nbytes(tensor)}"
        )
    if not isinstance(pool, PoolFile):
        tensor.raw_data = bytes(pool[offset : offset + length])
        return
    tensor.data_location = onnx.TensorProto.EXTERNAL
    entries = (("location", pool.path.name), ("offset", str(pool.offset + offset)), ("length", str(length)))
    for key, value in entries:
        tensor.external_data.add(key=key, value=value)


def _span(span: Any, size: int, where: str, what: str, name: str) -> tuple[int, int]:
    """An entry's (offset, length), checked to lie inside a pool of ``size`` bytes."""
    ok = (
        isinstance(span, list)
        and len(span) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in span)
    )
    if not ok or span[0] + span[1] > size:
        raise ArtifactError(
            f"{where} is damaged: the weight table of {what} places {name} at {span!r}, outside its "
            f"{size}-byte pool"
        )
    return span[0], span[1]
