"""The shape check of a subgraph's first inference: an output handed back in another rank, or with its
elements in another shape, than the static shape ONNX Runtime infers for it is the EP's mistake, not a
result to pass on (the OpenVINO EP hands back a self-attention's output split in two: quirk
openvino-attention-output-shape).

A run can contradict an inferred shape for good reasons, which this leaves alone: a value_info that lies
(the shape onnx's inference gives without it must be the one the session declares), or a kernel whose
shape rule differs from onnx's (a ceil_mode pool on ORT's CPU EP: another element count, in the same
rank). It costs one shape comparison per output, only until the subgraph completes an inference (static
shapes cannot change after that).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..graph import Model, shape_text, type_shape
from ..ort.values import OrtValue, Shape

# the words of the check's message, which quirk openvino-attention-output-shape cites as its signature
INFERRED = "ONNX Runtime infers for it"


def static_shapes(declared: Iterable[Any], outputs: Sequence[str]) -> tuple[Shape | None, ...]:
    """Each of ``outputs``' static shape as its session declares it (``declared``: the session's
    get_outputs()), or None where a dimension is dynamic, the rank unknown or the value no tensor."""
    meta = {o.name: o for o in declared}
    shapes: list[Shape | None] = []
    for name in outputs:
        o = meta.get(name)
        shape = o.shape if o is not None and o.type.startswith("tensor(") else None
        # ORT also reports [] when the declared and inferred shapes disagree: rank 0 counts as unknown
        if not shape or not all(isinstance(d, int) and d >= 0 for d in shape):
            shapes.append(None)
        else:
            shapes.append(tuple(shape))
    return tuple(shapes)


def contradiction(
    outputs: Sequence[str], shapes: Sequence[Shape | None], values: Mapping[str, Any], model: Model
) -> str | None:
    """What is wrong with the first of a run's ``outputs`` in ``values`` ({name: what its run made}) that
    came back in another rank, or with the same elements in another shape, than its static shape
    (``shapes``: a step's, static_shapes), where onnx's inference without the model's value_info gives
    that shape too; None where every output agrees (or may differ)."""
    for name, want in zip(outputs, shapes, strict=True):
        if want is None:
            continue
        got = _shape_of(values.get(name))
        if got is None or got == want:
            continue
        if len(got) == len(want) and math.prod(got) != math.prod(want):
            continue  # another size in the same rank: a kernel's own shape rule, or a declaration's lie
        if type_shape(model.types_without_value_info.get(name)) != want:
            continue  # the declared shape is not inference's: the run may well be right
        same = "another rank" if len(got) != len(want) else f"the same {math.prod(got)} elements"
        return (
            f"output {name} came back in shape {shape_text(got)}, not the {shape_text(want)} {INFERRED} "
            f"({same})"
        )
    return None


def _shape_of(value: Any) -> Shape | None:
    """A tensor value's shape (an OrtValue's or a numpy array's), None for another value."""
    if isinstance(value, OrtValue):
        return tuple(value.shape())
    shape = getattr(value, "shape", None)
    return tuple(shape) if isinstance(shape, tuple) else None
