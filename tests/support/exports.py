"""Exports built at test time, whole and damaged, for the tests of what an import refuses (issue 42):
a three-subgraph CPU split whose models share pooled weights and an unnamed Constant, and the ways to
damage one consistently (checksummed again, as another writer could)."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

import onnx
from onnx import helper as h
from onnx import numpy_helper

import hetero_cli as hc
from hetero_cli.runtime.artifacts import artifact
from support.helpers import cpu_split, make_model, seeded, vi

N = 64  # weights of 64 x 64: above SMALL_INITIALIZER, so pooled
FEEDS = {"x": seeded((2, N))}


def chain(n: int = N) -> onnx.ModelProto:
    """x -> MatMul w1 -> Add b -> Relu -> MatMul w2 -> MatMul c -> y: w1 and w2 large initializers (n x n),
    c the large value of an unnamed Constant node (as PaddleOCR's models keep all their weights), b small
    (kept in the model)."""
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
        h.make_node("Add", ["m1", "b"], ["a1"], name="add"),
        h.make_node("Relu", ["a1"], ["r1"], name="relu"),
        h.make_node("MatMul", ["r1", "w2"], ["m2"], name="mm2"),
        h.make_node("Constant", [], ["c"], value=numpy_helper.from_array(seeded((n, n), seed=4))),
        h.make_node("MatMul", ["m2", "c"], ["y"], name="mm3"),
    ]
    weights = [
        numpy_helper.from_array(seeded((n, n), seed=1), "w1"),
        numpy_helper.from_array(seeded((n, n), seed=2), "w2"),
        numpy_helper.from_array(seeded((n,), seed=3), "b"),
    ]
    return make_model(nodes, [vi("x", (2, n))], [vi("y", (2, n))], weights)


def listing_initializers(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` as IR version 3 wrote models (opset 9; the onnx wheel's light_*.onnx are such): every
    initializer listed among the graph's inputs too."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    out.ir_version = 3
    del out.opset_import[:]
    out.opset_import.add(domain="", version=9)
    for tensor in out.graph.initializer:
        out.graph.input.append(h.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))
    return out


def split(proto: onnx.ModelProto, on_b: Sequence[str]) -> hc.CompiledModel:
    """``proto`` split on the CPU: the nodes ``on_b`` names on made-up device B, the others on A."""
    model = hc.Core().read_model(proto)
    return cpu_split(model, ["B" if n.get_friendly_name() in on_b else "A" for n in model.get_ops()])


def split_export() -> bytes:
    """The chain split in three CPU subgraphs (mm1, add, relu | mm2 | mm3 with the Constant), exported:
    subgraph1's model holds w1, subgraph2's w2, subgraph3's the Constant, each in the pool."""
    return split(chain(), ["mm2"]).export_model()


def repacked(
    data: bytes, change: Callable[[dict[str, Any]], object] | None = None, payloads: Sequence[bytes] = ()
) -> bytes:
    """``data`` with its header changed in place by ``change`` and its payloads replaced by
    ``payloads`` (where given), checksummed again."""
    unpacked = artifact.unpack(data, "it")
    header = json.loads(json.dumps(unpacked.header))
    if change is not None:
        change(header)
    return artifact.pack(header, list(payloads) or [bytes(p) for p in unpacked.payloads])


def with_model(data: bytes, index: int, edit: Callable[[onnx.ModelProto], object]) -> bytes:
    """``data`` with model payload ``index`` (0: the source model, i: subgraph i) changed in place by
    ``edit``, checksummed again."""
    payloads = [bytes(p) for p in artifact.unpack(data, "it").payloads]
    proto = onnx.ModelProto()
    proto.ParseFromString(payloads[index])
    edit(proto)
    payloads[index] = proto.SerializeToString()
    return repacked(data, payloads=payloads)


def framed(header: bytes, payloads: Sequence[bytes] = ()) -> bytes:
    """An artifact framed by hand around the header text ``header`` (whatever it is), checksummed."""
    body = artifact.MAGIC + f"{artifact.FORMAT_VERSION}\n".encode() + struct.pack(">Q", len(header)) + header
    for payload in payloads:
        body += struct.pack(">Q", len(payload)) + payload
    return body + hashlib.sha256(body).digest()


def magic_line() -> bytes:
    """What every export of this format starts with."""
    return artifact.MAGIC + f"{artifact.FORMAT_VERSION}\n".encode()
