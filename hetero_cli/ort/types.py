"""Types as ONNX Runtime sees them: a session's NodeArgs as onnx TypeProtos, and ORT's own type inference
(it knows its contrib ops) for tensors onnx's shape inference cannot type."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import onnx
from onnx import helper

from ..errors import ModelError
from ..graph import Model
from ..graph.shared import short_reason
from .session import ORT_ERRORS, TYPING, create_session, ort, session_options

log = logging.getLogger("hetero_cli")


def ort_types(model: Model, names: Sequence[str]) -> dict[str, onnx.TypeProto]:
    """Ask ONNX Runtime (which knows its contrib ops) the types of tensors onnx could not infer."""
    try:
        # types, not weights: the weightless copy first, the whole model if ORT needs a weight's value;
        # nodes named by their friendly names, unique where the model repeats a name (ORT refuses that)
        try:
            sess = _typing_session(model.weightless_copy(rename=True), names, model)
        except ORT_ERRORS as exc:  # ORT needed a weight's value: the whole model answers
            log.debug("typing %s without its weights failed (%s): with them", model.name, exc)
            sess = _typing_session(model.session_copy(), names, model)
    except ORT_ERRORS as exc:
        raise ModelError(
            f"cannot tell the type of tensor(s) {', '.join(names)} at a subgraph boundary "
            f"({short_reason(exc)}): add value_info for them to the model"
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
    return create_session(
        probe.SerializeToString(),
        session_options(optimize=False, external_dir=model.external_dir),
        ["CPUExecutionProvider"],
        purpose=TYPING,
    )


def _ort_elem_type(text: str) -> int | None:
    if not text.startswith("tensor(") or not text.endswith(")"):
        return None
    try:
        return onnx.TensorProto.DataType.Value(text[len("tensor(") : -1].upper())
    except ValueError:
        return None
