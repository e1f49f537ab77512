"""Export: one subgraph of a plan (or any set of nodes) as a standalone ONNX model ORT can load.

The exported model keeps the source's IR version, every opset import, model-local functions, attributes
and node metadata; nodes are named by their friendly names so ORT's placement reports can be read back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import onnx
from onnx import helper

from ..errors import ModelError
from ..graph.model import Model, Node
from ..ort.session import ort, session_options
from .partition import Subgraph


def subgraph_model(
    model: Model, subgraph: Subgraph, *, embed: bool = False, fed: Iterable[str] = ()
) -> onnx.ModelProto:
    """The ONNX model of one plan subgraph: its nodes, copies of the constants it reads, its boundary.

    The large weights of a model read from a file are referenced in that file (external data, relative to
    its folder: a session needs ``session_options(external_dir=model.external_dir)``); ``embed=True``
    copies them in, for a model that stands on its own (to save elsewhere, say). ``fed``: overridable
    initializers that become plain inputs, fed at every run (for EPs that would fold them).
    """
    nodes = [model.node(n) for n in (*subgraph.constant_nodes, *subgraph.nodes)]
    return extract(
        model,
        nodes,
        subgraph.inputs,
        subgraph.outputs,
        name=f"{model.name}_{subgraph.name}",
        embed=embed,
        fed=frozenset(fed),
    )


def fed_initializers(model: Model, subgraph: Subgraph, folds: bool) -> frozenset[str]:
    """The overridable initializers ``subgraph``'s nodes read, where its device's EP folds initializers
    (``folds``) and would ignore a value fed for them: they must be inputs of its session instead."""
    if not folds or not model.overridable_initializers:
        return frozenset()
    read = {t for n in (*subgraph.constant_nodes, *subgraph.nodes) for t in model.node(n).inputs}
    return frozenset(read & model.overridable_initializers)


def extract(
    model: Model,
    nodes: Iterable[Node],
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    name: str,
    embed: bool = False,
    fed: frozenset[str] = frozenset(),
) -> onnx.ModelProto:
    """A model of ``nodes`` (topologically sorted here) reading ``inputs`` and producing ``outputs``;
    ``embed``: weights copied in rather than referenced in the model's file; ``fed``: overridable
    initializers made plain inputs (see subgraph_model)."""
    chosen = sorted(nodes, key=lambda n: n.index)
    src = model.skeleton
    graph = src.graph
    read: dict[str, None] = {}
    for n in chosen:
        read.update(dict.fromkeys(n.inputs))
    produced = {t for n in chosen for t in n.outputs}
    types = _types_for(model, [*inputs, *outputs])

    dense = model.dense_initializer_names
    sparse = model.sparse_initializers
    new = onnx.GraphProto(name=name)
    for n in chosen:
        copy = new.node.add()
        copy.CopyFrom(n.proto)
        copy.name = n.friendly_name
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
    for t in outputs:
        new.output.append(helper.make_value_info(t, types[t]))
    boundary = set(inputs) | set(outputs)
    for vi in graph.value_info:
        if vi.name in produced and vi.name not in boundary:
            new.value_info.append(vi)

    out = onnx.ModelProto(
        ir_version=src.ir_version,
        producer_name=src.producer_name or "hetero-cli",
        producer_version=src.producer_version,
        domain=src.domain,
        model_version=src.model_version,
        graph=new,
    )
    out.opset_import.extend(src.opset_import)
    out.functions.extend(src.functions)
    out.metadata_props.extend(src.metadata_props)
    return out


def _types_for(model: Model, names: Sequence[str]) -> dict[str, onnx.TypeProto]:
    """Types of boundary tensors: onnx's shape inference first, ONNX Runtime's own inference for the rest."""
    types: dict[str, onnx.TypeProto] = {}
    missing = []
    for t in dict.fromkeys(names):
        known = model.value_type(t)
        if known is not None and (_complete(known) or model.is_corrected(t)):
            types[t] = known
        else:
            missing.append(t)
    if missing:
        found = ort_types(model, missing)
        for t in missing:  # keep onnx's answer where ORT knows no more
            if t in found and (_complete(found[t]) or model.value_type(t) is None):
                types[t] = found[t]
            else:
                types[t] = model.value_type(t) or found[t]
    return types


def _complete(t: onnx.TypeProto) -> bool:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":  # element type and rank both known
        return bool(t.tensor_type.elem_type) and t.tensor_type.HasField("shape")
    return kind is not None


def ort_types(model: Model, names: Sequence[str]) -> dict[str, onnx.TypeProto]:
    """Ask ONNX Runtime (which knows its contrib ops) the types of tensors onnx could not infer."""
    try:
        # types, not weights: the weightless copy first, the whole model if ORT needs a weight's value;
        # nodes named by their friendly names, unique where the model repeats a name (ORT refuses that)
        try:
            sess = _typing_session(model.weightless_copy(rename=True), names, model)
        except Exception:
            sess = _typing_session(model.session_copy(), names, model)
    except Exception as exc:
        raise ModelError(
            f"cannot tell the type of tensor(s) {', '.join(names)} at a subgraph boundary "
            f"({str(exc).splitlines()[0][:200]}): add value_info for them to the model"
        ) from None
    out = {}
    for arg in sess.get_outputs():
        t = arg_type(arg)
        if t is None:
            raise ModelError(
                f"tensor {arg.name!r} has type {arg.type}, which cannot cross a subgraph boundary"
            )
        out[arg.name] = t
    return out


def arg_type(arg: Any) -> onnx.TypeProto | None:
    """The tensor type an ORT session reports for one of its inputs or outputs (a NodeArg); None where it
    is no tensor. ORT reports [] both for a scalar and for an unknown shape: only a non-empty list says
    anything."""
    elem = _ort_elem_type(arg.type)
    if elem is None:
        return None
    shape = [d if isinstance(d, int) else (d or None) for d in arg.shape] if arg.shape else None
    return helper.make_tensor_type_proto(elem, shape)


def _typing_session(probe: onnx.ModelProto, names: Sequence[str], model: Model) -> ort.InferenceSession:
    del probe.graph.output[:]
    for t in names:
        probe.graph.output.add(name=t)
    return ort.InferenceSession(
        probe.SerializeToString(),
        session_options(optimize=False, external_dir=model.external_dir),
        providers=["CPUExecutionProvider"],
        enable_fallback=0,
    )


def _ort_elem_type(text: str) -> int | None:
    if not text.startswith("tensor(") or not text.endswith(")"):
        return None
    try:
        return onnx.TensorProto.DataType.Value(text[len("tensor(") : -1].upper())
    except ValueError:
        return None
