"""How much memory one inference's tensors take at given input shapes, worked out from the shapes alone
(onnx's shape inference at those shapes), before anything is compiled or allocated: a run whose
intermediate tensors cannot fit in memory is refused with a message instead of being ended by the
kernel's OOM killer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from .model import Model


def activation_peak(model: Model, shapes: Mapping[str, Sequence[int]]) -> int:
    """The most bytes of non-constant tensors alive at once in one inference of ``model`` with inputs of
    ``shapes`` ({input: concrete shape}): the nodes run in topological order, each tensor alive from the
    node that makes it (the inputs from the start) to the last node that reads it (graph outputs to the
    end). Tensors whose size shape inference does not give (data-dependent shapes, sequences, the insides
    of If and Loop bodies) count 0, so this is an estimate from below; weights are not counted."""
    types = model.types.at_shapes(shapes)
    ops = model.get_ops()
    last: dict[str, int] = {name: len(ops) for name in model.output_names}
    for position, node in enumerate(ops):
        for name in node.inputs:
            last[name] = max(last.get(name, position), position)
    sizes = {name: _bytes(types.get(name)) for name in model.input_names}
    for name, dims in shapes.items():
        info = model.tensor_info(name)
        if info.dtype is not None:
            sizes[name] = math.prod(int(d) for d in dims) * info.dtype.itemsize
    freed: dict[int, list[int]] = {}
    alive = 0
    for name, size in sizes.items():
        if name in last:
            alive += size
            freed.setdefault(last[name], []).append(size)
    peak = alive
    for position, node in enumerate(ops):
        if not node.is_constant:
            for name in node.outputs:
                if name in last and name not in sizes:
                    size = _bytes(types.get(name))
                    alive += size
                    freed.setdefault(last[name], []).append(size)
            peak = max(peak, alive)
        alive -= sum(freed.pop(position, ()))
    return peak


def _bytes(value_type: onnx.TypeProto | None) -> int:
    """A tensor type's bytes where its element type and every dimension are known; 0 otherwise."""
    if value_type is None or not value_type.HasField("tensor_type"):
        return 0
    tensor = value_type.tensor_type
    if not tensor.elem_type or not tensor.HasField("shape"):
        return 0
    dims = tensor.shape.dim
    if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
        return 0
    try:
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)).itemsize
    except (KeyError, TypeError, ValueError):
        return 0
    return math.prod(d.dim_value for d in dims) * itemsize
