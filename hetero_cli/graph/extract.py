"""Extract: a set of a model's nodes as a standalone ONNX model, its boundary typed by the caller.

The extracted model keeps the source's IR version, every opset import, model-local functions, attributes
and node metadata; nodes are named by their friendly names so ORT's placement reports can be read back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .copies import add_renamed, empty_copy
from .model import Model
from .node import Node


def extract_model(
    model: Model,
    nodes: Iterable[Node],
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    name: str,
    embed: bool = False,
    types: Mapping[str, onnx.TypeProto],
    fed: frozenset[str] = frozenset(),
    values: Mapping[str, np.ndarray] | None = None,
    unfolded: frozenset[str] = frozenset(),
) -> onnx.ModelProto:
    """A model of ``nodes`` (topologically sorted here) reading ``inputs`` and producing ``outputs``.

    ``types``: the type of every input and output (the caller knows them: onnx's inference, or ONNX
    Runtime's for contrib ops); ``embed``: weights copied in rather than referenced in the model's file;
    ``fed``: overridable initializers made plain inputs, fed at every run; ``values``: tensors the nodes
    read that come in as constants of the model's own ({name: value}: static shape values made outside
    ``nodes``); ``unfolded``: those of ``values`` declared as inputs too (overridable initializers, which
    ORT's optimizer does not fold). Returns a model that keeps the source's IR version, opsets, functions
    and metadata, its nodes named by their friendly names.
    """
    chosen = sorted(nodes, key=lambda n: n.index)
    src = model.skeleton
    graph = src.graph
    read: dict[str, None] = {}
    for n in chosen:
        read.update(dict.fromkeys(n.inputs))
    produced = {t for n in chosen for t in n.outputs}

    dense = model.dense_initializer_names
    sparse = model.sparse_initializers
    out = empty_copy(src, name)
    out.producer_name = src.producer_name or "hetero-cli"
    new = out.graph
    add_renamed(new, chosen)
    declared_inputs = model.declared_inputs
    for t in inputs:
        new.input.append(helper.make_value_info(t, types[t]))
    for t in read:
        if t in fed:
            new.input.append(declared_inputs[t])
        elif t in dense:
            new.initializer.append(model.initializers[t] if embed else model.export_initializer(t))
            if t in declared_inputs:
                new.input.append(declared_inputs[t])
        elif t in sparse:
            new.sparse_initializer.append(sparse[t])
    for t, value in (values or {}).items():
        if t in read and t not in produced:
            constant = numpy_helper.from_array(np.asarray(value), t)
            new.initializer.append(constant)
            if t in unfolded:
                new.input.append(helper.make_tensor_value_info(t, constant.data_type, constant.dims))
    for t in outputs:
        new.output.append(helper.make_value_info(t, types[t]))
    boundary = set(inputs) | set(outputs)
    for vi in graph.value_info:
        if vi.name in produced and vi.name not in boundary:
            new.value_info.append(vi)
    return out
