"""Whether each tensor stored in a model holds as much data as its shape and type need: a damaged
initializer (raw_data cut short or too long) is the model's fault, found when the model is read, not by
every device in turn when its session is created. External data lengths are checked with their files
(external.check_external).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper

from ..errors import ModelError
from .external import PACKED, all_tensors, elements, is_external, tensor_nbytes

_COMPLEX = frozenset({onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128})


def check_tensor_sizes(proto: onnx.ModelProto, where: str, left_out: Mapping[int, int]) -> None:
    """ModelError naming the first tensor whose data does not fit its shape and type (an initializer,
    a Constant's value, a sparse tensor's part, in every body and function), and what it holds and needs.

    ``left_out``: {index in graph.initializer: bytes of its raw_data} of the initializers held without
    their data (read from the file with their weights left in it: wire.skeleton).
    """
    top = len(proto.graph.initializer)
    # all_tensors yields the graph's initializers first, in order
    for index, tensor in enumerate(all_tensors(proto)):
        problem = size_problem(tensor, left_out.get(index) if index < top else None)
        if problem is not None:
            what = f"initializer {tensor.name!r}" if index < top else f"tensor {tensor.name or '(unnamed)'!r}"
            raise ModelError(
                f"{where}: {what} {problem}: the file is damaged or was written wrong; re-export the model"
            )


def size_problem(tensor: onnx.TensorProto, raw_bytes: int | None = None) -> str | None:
    """What is wrong with the size of ``tensor``'s data ("holds 12 bytes where its shape [4, 4] of float32
    needs 64"), or None where it fits (or the type's size is unknown here). External tensors are not
    judged here. ``raw_bytes``: the length of its raw_data where that is not in the message."""
    if is_external(tensor):
        return None
    if raw_bytes is not None or tensor.HasField("raw_data"):
        held = raw_bytes if raw_bytes is not None else len(tensor.raw_data)
        need = tensor_nbytes(tensor)
        if need is None or held == need:
            return None
        return f"holds {held} bytes of raw_data where its shape {list(tensor.dims)} of {_type_name(tensor)} needs {need}"
    need = _values_needed(tensor)
    if need is None:
        return None
    field = _value_field(tensor)
    held = len(getattr(tensor, field)) if field else 0
    if held == need:
        return None
    if held == 0:
        return (
            f"holds no data where its shape {list(tensor.dims)} of {_type_name(tensor)} needs {need} value(s)"
        )
    return f"holds {held} value(s) in {field} where its shape {list(tensor.dims)} of {_type_name(tensor)} needs {need}"


def _values_needed(tensor: onnx.TensorProto) -> int | None:
    """How many entries of its typed data field (float_data, int32_data...) the tensor's shape needs:
    two per complex element, one per few packed 4-bit or 2-bit elements; None for an unknown type."""
    count = elements(tensor)
    per_entry = PACKED.get(tensor.data_type)
    if per_entry is not None:
        return -(-count // per_entry)
    if tensor.data_type == onnx.TensorProto.STRING:
        return count
    if tensor_nbytes(tensor) is None:
        return None
    return 2 * count if tensor.data_type in _COMPLEX else count


def _value_field(tensor: onnx.TensorProto) -> str | None:
    """The typed data field ONNX keeps this element type in (float_data, int32_data...), or None."""
    try:
        return helper.tensor_dtype_to_field(tensor.data_type)
    except (KeyError, ValueError):
        return None


def _type_name(tensor: onnx.TensorProto) -> str:
    """numpy's name of the element type (float32), or ONNX's where numpy has none (bfloat16, int4)."""
    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)))
    except (KeyError, TypeError, ValueError):
        return onnx.TensorProto.DataType.Name(tensor.data_type).lower()
