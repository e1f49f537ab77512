"""Export: one subgraph of a plan (or any set of nodes) as a standalone ONNX model ORT can load.

The exported model keeps the source's IR version, every opset import, model-local functions, attributes
and node metadata; nodes are named by their friendly names so ORT's placement reports can be read back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ..errors import ModelError
from ..graph import Model, Node
from ..graph.extract import extract_model
from ..ort.types import arg_type, ort_types
from ..quirks import in_force
from ..quirks.cpu import FOLDED_IF_RANGE_SCALARS
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
    values = model.shape_values() if subgraph.fixed else {}
    return extract(
        model,
        nodes,
        subgraph.inputs,
        subgraph.outputs,
        name=f"{model.name}_{subgraph.name}",
        embed=embed,
        fed=frozenset(fed),
        values={t: values[t] for t in subgraph.fixed},
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
    values: Mapping[str, np.ndarray] | None = None,
    typed_outputs: bool = True,
) -> onnx.ModelProto:
    """graph.extract.extract_model with the boundary typed here: onnx's inference, else ONNX Runtime's.
    Without ``typed_outputs``, an output whose element type onnx's inference knows but not its shape is
    declared untyped (ORT then infers its type from the node that makes it, as a typing session would):
    a probe's model, whose session answers those outputs' types (record_output_types).

    ``values`` from which an If's condition follows come in as overridable initializers where quirk
    cpu-folded-if-range-scalars is in force: ORT would fold the If as the whole model's session does not.

    Raises ModelError where neither can tell a boundary tensor's type.
    """
    nodes = list(nodes)
    types = _types_for(model, [*inputs, *outputs], () if typed_outputs else outputs)
    unfolded = (
        _conditions_from(nodes, values) if values and in_force(FOLDED_IF_RANGE_SCALARS) else frozenset()
    )
    return extract_model(
        model,
        nodes,
        inputs,
        outputs,
        name=name,
        types=types,
        embed=embed,
        fed=fed,
        values=values,
        unfolded=unfolded,
    )


def _conditions_from(nodes: Sequence[Node], values: Mapping[str, Any]) -> frozenset[str]:
    """Those of ``values`` from which the condition of an If among ``nodes`` follows, through ``nodes``."""
    made = {t: n for n in nodes for t in n.outputs if t}
    todo = [n.inputs[0] for n in nodes if n.proto.op_type == "If" and n.inputs]
    seen: set[str] = set()
    found = set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in values:
            found.add(t)
        elif t in made:
            todo.extend(i for i in made[t].inputs if i)
    return frozenset(found)


def _types_for(model: Model, names: Sequence[str], loose: Sequence[str] = ()) -> dict[str, onnx.TypeProto]:
    """Types of boundary tensors: onnx's shape inference first, ONNX Runtime's own inference for the rest;
    for those of ``loose``, onnx's type where it has an element type, ONNX Runtime's cached answer where
    that is complete."""
    types: dict[str, onnx.TypeProto] = {}
    missing = []
    cached = model.ort_type_cache
    for t in dict.fromkeys(names):
        known = model.value_type(t)
        if t in loose and t in cached and _complete(cached[t]):
            types[t] = cached[t]
        elif known is not None and (_complete(known) or model.correction(t) is not None):
            types[t] = known
        elif t in loose and _elem_known(known):
            types[t] = onnx.TypeProto()  # untyped: ORT's inference fills it in
        else:
            missing.append(t)
    if missing:
        found = _ort_answers(model, missing)
        for t in missing:  # keep onnx's answer where ORT knows no more
            if t in found and (_complete(found[t]) or model.value_type(t) is None):
                types[t] = found[t]
            else:
                types[t] = model.value_type(t) or found[t]
    return types


def _ort_answers(model: Model, missing: Sequence[str]) -> dict[str, onnx.TypeProto]:
    """ONNX Runtime's types for ``missing``, from ``model.ort_type_cache``. The first time one is not there,
    one session asks for every tensor onnx's inference leaves incomplete (each such session loads the whole
    model: a split asked it again for every subgraph), and only for ``missing`` where ORT refuses that wider
    question (a tensor it cannot hand out as an output). Raises ModelError as ort_types does."""
    cache = model.ort_type_cache
    unknown = [t for t in missing if t not in cache]
    if unknown:
        wider = list(dict.fromkeys([*unknown, *_untyped(model)]))
        try:
            cache.update(ort_types(model, wider))
        except ModelError:
            cache.update(ort_types(model, unknown))
    return {t: cache[t] for t in missing if t in cache}


def _untyped(model: Model) -> list[str]:
    """The tensors made by the model's non-constant nodes whose type onnx's inference leaves incomplete."""
    return [
        t
        for node in model.get_ops()
        if not node.is_constant
        for t in node.outputs
        if t and model.correction(t) is None and not _complete(model.value_type(t) or onnx.TypeProto())
    ]


def record_output_types(model: Model, session: Any) -> None:
    """The types of an ORT session's outputs into ``model.ort_type_cache`` (where none is there) when the
    session is of a part of ``model`` fed only by the model's own inputs (a probe whose outputs were
    declared untyped: extract's ``typed_outputs``): ORT inferred them from all that makes them in the
    model, so they are what a typing session of the whole model would answer."""
    if not {i.name for i in session.get_inputs()} <= set(model.input_names):
        return
    for arg in session.get_outputs():
        t = arg_type(arg)
        if t is not None:
            model.ort_type_cache.setdefault(arg.name, t)


def _elem_known(t: onnx.TypeProto | None) -> bool:
    return t is not None and t.WhichOneof("value") == "tensor_type" and bool(t.tensor_type.elem_type)


def _complete(t: onnx.TypeProto) -> bool:
    kind = t.WhichOneof("value")
    if kind == "tensor_type":  # element type and rank both known
        return bool(t.tensor_type.elem_type) and t.tensor_type.HasField("shape")
    return kind is not None
