"""Copies of a whole model for ONNX Runtime and onnx: without its large weights (for what reads types:
shape inference, a CPU kernel probe), or with them referenced in the model's file (a session)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx
from onnx import helper

from .node import Node
from .weights import Weights, is_small


def model_copy(
    proto: onnx.ModelProto,
    ops: Sequence[Node] | None,
    weights: Weights | None,
    *,
    constants_as_inputs: bool = False,
) -> onnx.ModelProto:
    """A copy of ``proto`` (the model as held, its large weights possibly left in its file).

    ``ops``: the nodes in this (topological) order, each named by its friendly name; None keeps the
    graph's nodes as they are. ``weights``: the initializers for a session (those left in the file
    referenced there, as ``Weights.for_session`` gives them); None makes each large initializer a graph
    input of its type and shape instead, so no copy of the weights is made, while small ones (shapes,
    axes, scales) stay, since inference reads their values. ``constants_as_inputs`` (with ``ops`` None):
    each top-level Constant node whose value is large becomes such an input too (for onnx's inference:
    paddle2onnx writes every weight as a Constant node, and onnx serializes the model it infers).
    """
    graph = proto.graph
    out = empty_copy(proto, graph.name)
    new = out.graph
    if ops is not None:
        add_renamed(new, ops)
    moved = []
    if ops is None and constants_as_inputs:
        values = [_large_value(node) for node in graph.node]
        new.node.extend(node for node, value in zip(graph.node, values, strict=True) if value is None)
        moved = [
            helper.make_tensor_value_info(node.output[0], value.data_type, list(value.dims))
            for node, value in zip(graph.node, values, strict=True)
            if value is not None
        ]
    elif ops is None:
        new.node.extend(graph.node)
    new.input.extend(graph.input)
    new.input.extend(moved)
    new.output.extend(graph.output)
    new.value_info.extend(graph.value_info)
    new.sparse_initializer.extend(graph.sparse_initializer)
    declared = {i.name for i in graph.input}
    for t in graph.initializer:
        if weights is not None:
            new.initializer.append(weights.for_session(t))
        elif is_small(t):
            new.initializer.append(t)
        elif t.name not in declared:
            new.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return out


def empty_copy(proto: onnx.ModelProto, name: str) -> onnx.ModelProto:
    """A model with ``proto``'s IR version, producer, domain, model version, opsets, functions and metadata,
    and an empty graph named ``name``, for the caller to fill in place (a graph handed to ModelProto() would
    be copied whole, bodies and all)."""
    out = onnx.ModelProto(
        ir_version=proto.ir_version,
        producer_name=proto.producer_name,
        producer_version=proto.producer_version,
        domain=proto.domain,
        model_version=proto.model_version,
    )
    out.opset_import.extend(proto.opset_import)
    out.functions.extend(proto.functions)
    out.metadata_props.extend(proto.metadata_props)
    out.graph.name = name
    return out


def add_renamed(graph: onnx.GraphProto, nodes: Iterable[Node]) -> None:
    """A copy of each of ``nodes`` appended to ``graph``, named by its friendly name (so that ORT's record of
    where it placed them reads back)."""
    for node in nodes:
        copy = graph.node.add()
        copy.CopyFrom(node.proto)
        copy.name = node.friendly_name


def _large_value(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor of a Constant node of the default domain whose ``value`` is not small (is_small), else None."""
    if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
        return None
    for attr in node.attribute:
        if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
            return None if is_small(attr.t) else attr.t
    return None
