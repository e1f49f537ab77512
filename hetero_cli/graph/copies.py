"""Copies of a whole model for ONNX Runtime and onnx: without its large weights (for what reads types:
shape inference, a CPU kernel probe), or with them referenced in the model's file (a session)."""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import helper

from .node import Node
from .weights import Weights, is_small


def model_copy(
    proto: onnx.ModelProto, ops: Sequence[Node] | None, weights: Weights | None
) -> onnx.ModelProto:
    """A copy of ``proto`` (the model as held, its large weights possibly left in its file).

    ``ops``: the nodes in this (topological) order, each named by its friendly name; None keeps the
    graph's nodes as they are. ``weights``: the initializers for a session (those left in the file
    referenced there, as ``Weights.for_session`` gives them); None makes each large initializer a graph
    input of its type and shape instead, so no copy of the weights is made, while small ones (shapes,
    axes, scales) stay, since inference reads their values.
    """
    graph = proto.graph
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
    new = out.graph
    new.name = graph.name
    if ops is not None:
        for node in ops:
            copy = new.node.add()
            copy.CopyFrom(node.proto)
            copy.name = node.friendly_name
    else:
        new.node.extend(graph.node)
    new.input.extend(graph.input)
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
