"""Static shape values: the tensors whose values follow from a model's fixed shapes and its constants
(``Shape`` of a tensor of fixed shape, and the small integer arithmetic on it that sizes a Resize or a
Reshape), as ONNX Runtime's and OpenVINO's own compiles fold them.

A cut between subgraphs never carries one (placement.partition gives each subgraph that reads one its
value): the OpenVINO EP folds such a tensor into a constant, so a subgraph handing it on fails to compile
("node not found in graph cache", quirk openvino-shape-of-output), and one taking it as an input compiles
the shapes it sets as dynamic (an upsampling decoder's Resize measured several times slower).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .external import is_external

if TYPE_CHECKING:
    from .model import Model
    from .node import Node

#: a shape value holds at most this many elements (a shape, a few sizes or scales): anything larger is data
MAX_ELEMENTS = 64

Value = np.ndarray
Evaluate = Callable[[onnx.NodeProto, list[Value | None]], Value | None]


def shape_values(model: Model) -> dict[str, np.ndarray]:
    """{tensor: value} of ``model``'s static shape values, in topological order: the outputs of Shape and
    Size nodes whose input's shape is fixed, and of the integer and shape ops (EVALUATED) whose inputs are
    such values or small constants, at least one of them a shape value. Empty for a model without them.

    A tensor's shape is taken from onnx's inference from the model's inputs alone (its value_info left
    out: a wrong one must not be folded into a constant), or from a correction ONNX Runtime made."""
    if not any(n.proto.op_type in ("Shape", "Size") for n in model.get_ops()):
        return {}  # nothing to start from: spare the shape inference (time, and memory a compile keeps)
    shapes = model.types_without_value_info
    known: dict[str, np.ndarray] = {}
    constants: dict[str, np.ndarray | None] = {}
    for node in model.get_ops():
        proto = node.proto
        if proto.domain not in ("", "ai.onnx") or node.has_subgraphs or node.is_constant or not proto.output:
            continue
        op = proto.op_type
        if op in ("Shape", "Size"):
            dims = _fixed_dims(model, shapes, node.inputs[0]) if node.inputs else None
            if dims is None:
                continue
            value = _small(_shape(proto, dims) if op == "Shape" else np.array(int(np.prod(dims)), np.int64))
        elif op in EVALUATED and any(t in known for t in node.inputs):
            value = _evaluate(node, [_argument(model, t, known, constants) for t in node.inputs])
        else:
            continue
        if value is not None:
            known[node.outputs[0]] = value
    return known


def _evaluate(node: Node, args: list[Value | None]) -> Value | None:
    """``node``'s first output from its input values ``args`` (EVALUATED's op), or None where an input is
    unknown, numpy cannot evaluate it, or the result is no small numeric tensor."""
    if any(a is None and t for a, t in zip(args, node.inputs, strict=True)):
        return None
    try:
        value = EVALUATED[node.proto.op_type](node.proto, args)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    return _small(value)


def _small(value: Value | None) -> Value | None:
    """``value`` as an array where it is a small numeric tensor (a shape value's), else None."""
    if value is None:
        return None
    value = np.asarray(value)
    return value if value.size <= MAX_ELEMENTS and value.dtype.kind in "biuf" else None


def _fixed_dims(model: Model, shapes: Mapping[str, onnx.TypeProto], tensor: str) -> list[int] | None:
    """The dimensions of ``tensor`` where every one is fixed, else None."""
    if model.correction(tensor) is not None or tensor in model.input_names:
        t = model.value_type(tensor)
    else:
        t = shapes.get(tensor)
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = []
    for d in t.tensor_type.shape.dim:
        if not d.HasField("dim_value") or d.dim_value < 0:
            return None
        dims.append(d.dim_value)
    return dims


def _shape(proto: onnx.NodeProto, dims: list[int]) -> np.ndarray:
    """Shape's output: ``dims[start:end]`` (opset 15's attributes, clamped as the operator says)."""
    attrs = _attributes(proto)
    rank = len(dims)
    start = int(attrs.get("start", 0))
    end = int(attrs.get("end", rank))
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return np.array(dims[start:end], np.int64)


def _argument(
    model: Model, tensor: str, known: Mapping[str, np.ndarray], constants: dict[str, np.ndarray | None]
) -> np.ndarray | None:
    """An input's value: a shape value, or a small constant (an initializer, a Constant node's, or one a
    constant-only node computes from those); None for anything else ('' for an omitted optional input)."""
    if not tensor:
        return None
    if tensor in known:
        return known[tensor]
    if tensor not in constants:
        constants[tensor] = _constant(model, tensor, constants)
    return constants[tensor]


def _constant(model: Model, tensor: str, constants: dict[str, np.ndarray | None]) -> np.ndarray | None:
    if not model.is_constant(tensor) or tensor in model.overridable_initializers:
        return None
    if tensor in model.dense_initializer_names:
        held = model.weights.held[tensor]
        if int(np.prod(held.dims)) > MAX_ELEMENTS:
            return None
        return model.initializer_array(tensor)
    node: Node | None = model.producer.get(tensor)
    if node is None or node.proto.domain not in ("", "ai.onnx"):
        return None
    if node.proto.op_type == "Constant":
        return _constant_attribute(node.proto)
    if node.proto.op_type not in EVALUATED or node.outputs[0] != tensor:
        return None
    return _evaluate(node, [_argument(model, t, {}, constants) for t in node.inputs])


def _constant_attribute(proto: onnx.NodeProto) -> np.ndarray | None:
    for attr in proto.attribute:
        if attr.name == "value":  # a value in external data is large: never a shape's
            return None if is_external(attr.t) else numpy_helper.to_array(attr.t)
        if attr.name in ("value_int", "value_ints"):
            return np.array(helper.get_attribute_value(attr), np.int64)
        if attr.name in ("value_float", "value_floats"):
            return np.array(helper.get_attribute_value(attr), np.float32)
    return None


def _attributes(proto: onnx.NodeProto) -> dict[str, object]:
    return {a.name: helper.get_attribute_value(a) for a in proto.attribute}


def _axes(proto: onnx.NodeProto, args: Sequence[Value | None], index: int) -> list[int] | None:
    """Axes from input ``index`` (newer opsets) or the ``axes`` attribute (older ones); None if neither."""
    if len(args) > index and args[index] is not None:
        return [int(a) for a in np.asarray(args[index]).ravel()]
    axes = _attributes(proto).get("axes")
    return None if axes is None else [int(a) for a in axes]  # type: ignore[union-attr]


def _unsqueeze(proto: onnx.NodeProto, args: list[Value | None]) -> Value | None:
    axes = _axes(proto, args, 1)
    if axes is None or args[0] is None:
        return None
    rank = np.ndim(args[0]) + len(axes)
    out = np.asarray(args[0])
    for axis in sorted(a + rank if a < 0 else a for a in axes):
        out = np.expand_dims(out, axis)
    return out


def _squeeze(proto: onnx.NodeProto, args: list[Value | None]) -> Value | None:
    axes = _axes(proto, args, 1)
    data = np.asarray(args[0])
    return np.squeeze(data) if axes is None else np.squeeze(data, axis=tuple(axes))


def _slice(proto: onnx.NodeProto, args: list[Value | None]) -> Value | None:
    data = np.asarray(args[0])
    attrs = _attributes(proto)
    if len(args) >= 3:
        starts, ends = np.asarray(args[1]).ravel(), np.asarray(args[2]).ravel()
        axes = np.asarray(args[3]).ravel() if len(args) > 3 and args[3] is not None else range(len(starts))
        steps = np.asarray(args[4]).ravel() if len(args) > 4 and args[4] is not None else [1] * len(starts)
    else:  # opset 1-9: attributes
        starts, ends = attrs["starts"], attrs["ends"]  # type: ignore[assignment]
        axes = attrs.get("axes", range(len(starts)))  # type: ignore[arg-type,assignment]
        steps = [1] * len(starts)  # type: ignore[arg-type]
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):  # type: ignore[arg-type]
        index[int(axis)] = slice(int(start), int(end), int(step))
    return data[tuple(index)]


def _divide(_: onnx.NodeProto, args: list[Value | None]) -> Value:
    a, b = np.asarray(args[0]), np.asarray(args[1])
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":  # ONNX's integer Div truncates toward zero
        return np.trunc(a / b).astype(np.result_type(a, b))
    return a / b


def _cast(proto: onnx.NodeProto, args: list[Value | None]) -> Value | None:
    to = int(_attributes(proto)["to"])  # type: ignore[arg-type]
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(to))
    return np.asarray(args[0]).astype(dtype) if dtype.kind in "biuf" else None


def _reshape(proto: onnx.NodeProto, args: list[Value | None]) -> Value:
    data, shape = np.asarray(args[0]), [int(d) for d in np.asarray(args[1]).ravel()]
    allow_zero = bool(_attributes(proto).get("allowzero", 0))
    shape = [data.shape[i] if d == 0 and not allow_zero else d for i, d in enumerate(shape)]
    return data.reshape(shape)


def _constant_of_shape(proto: onnx.NodeProto, args: list[Value | None]) -> Value | None:
    """ConstantOfShape's output where it is small (a shape's suffix of ones, say); None where it is not: a
    large one is data, and never made here."""
    dims = [int(d) for d in np.asarray(args[0]).ravel()]
    if any(d < 0 for d in dims) or int(np.prod(dims)) > MAX_ELEMENTS:
        return None
    value = _attributes(proto).get("value")
    fill = numpy_helper.to_array(value).ravel() if value is not None else np.zeros(1, np.float32)
    return np.full(dims, fill[0], dtype=fill.dtype)


def _reduce_prod(proto: onnx.NodeProto, args: list[Value | None]) -> Value:
    axes = _axes(proto, args, 1)
    keep = bool(_attributes(proto).get("keepdims", 1))
    return np.prod(np.asarray(args[0]), axis=None if not axes else tuple(axes), keepdims=keep)


def _same_type(fn: Callable[..., Value]) -> Evaluate:
    """An elementwise op whose output keeps its first input's element type (as ONNX's do)."""

    def evaluate(_: onnx.NodeProto, args: list[Value | None]) -> Value:
        first = np.asarray(args[0])
        return np.asarray(fn(*[np.asarray(a) for a in args])).astype(first.dtype)

    return evaluate


def _bool(fn: Callable[..., Value]) -> Evaluate:
    return lambda _, args: np.asarray(fn(*[np.asarray(a) for a in args]))


#: the ops a shape value flows through, each evaluated in numpy
EVALUATED: dict[str, Evaluate] = {
    "Identity": lambda _, args: np.asarray(args[0]),
    "Gather": lambda p, args: np.take(
        np.asarray(args[0]),
        np.asarray(args[1]),
        axis=int(_attributes(p).get("axis", 0)),  # type: ignore[arg-type]
    ),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda p, args: np.concatenate(
        [np.atleast_1d(np.asarray(a)) for a in args],
        axis=int(_attributes(p)["axis"]),  # type: ignore[arg-type]
    ),
    "Slice": _slice,
    "Cast": _cast,
    "Reshape": _reshape,
    "Add": _same_type(np.add),
    "Sub": _same_type(np.subtract),
    "Mul": _same_type(np.multiply),
    "Div": _divide,
    "Neg": _same_type(np.negative),
    "Abs": _same_type(np.abs),
    "Floor": _same_type(np.floor),
    "Ceil": _same_type(np.ceil),
    "Max": _same_type(lambda *a: np.maximum.reduce(np.broadcast_arrays(*a))),
    "Min": _same_type(lambda *a: np.minimum.reduce(np.broadcast_arrays(*a))),
    "ReduceProd": _reduce_prod,
    "ConstantOfShape": _constant_of_shape,
    "Equal": _bool(np.equal),
    "Less": _bool(np.less),
    "Greater": _bool(np.greater),
    "Not": _bool(np.logical_not),
    "Where": lambda _, args: np.where(np.asarray(args[0]), np.asarray(args[1]), np.asarray(args[2])),
    "Range": lambda _, args: np.arange(
        np.asarray(args[0]).item(),
        np.asarray(args[1]).item(),
        np.asarray(args[2]).item(),
        dtype=np.asarray(args[0]).dtype,
    ),
}
