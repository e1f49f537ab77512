"""Input shapes against a model: a copy with some inputs declared in other shapes (``hetero compile -shape``
fixes dynamic dimensions so), and shapes that give a named dimension two sizes no node can take."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import onnx

from .model import Model, TensorInfo

Shapes = Mapping[str, Sequence[int]]


def disagreement(
    inputs: Iterable[TensorInfo], shapes: Shapes
) -> tuple[str, dict[str, tuple[int, ...]]] | None:
    """Where two of ``inputs`` at ``shapes`` give one named dimension (a symbol the model declares for both,
    as ``N`` in x [N,S,8] and m [N,S]) two sizes: what to tell the caller, and every input's shape with each
    named dimension at the first size given for it; None where they agree. Inputs without a shape in
    ``shapes``, or of another rank than declared, are left out."""
    seen: dict[str, tuple[str, int]] = {}
    message = None
    agreeing: dict[str, tuple[int, ...]] = {}
    for info in inputs:
        given = shapes.get(info.name)
        if info.shape is None or given is None or len(given) != len(info.shape):
            continue
        shape = list(given)
        for k, (dim, size) in enumerate(zip(info.shape, given, strict=True)):
            if not isinstance(dim, str) or not dim:
                continue
            first = seen.setdefault(dim, (info.name, size))
            shape[k] = first[1]
            if first[1] != size and message is None:
                message = (
                    f"inputs {first[0]!r} and {info.name!r} give dimension {dim!r} the sizes {first[1]} and "
                    f"{size}: the model declares it one size in both; give them agreeing shapes"
                )
        agreeing[info.name] = tuple(shape)
    return None if message is None else (message, agreeing)


def refused_shapes(model: Model, shapes: Shapes) -> str | None:
    """Why no node can take ``model``'s inputs at ``shapes``: a named dimension given two sizes
    (disagreement) where onnx's strict shape inference fails at these shapes but passes with the sizes
    made to agree; None otherwise (models that name dimensions loosely pass: their shapes infer). One onnx
    inference or two, where the sizes disagree."""
    found = disagreement(model.inputs, shapes)
    if found is None:
        return None
    message, agreeing = found
    types = model.types
    return message if types.conflicts_at(shapes) and not types.conflicts_at(agreeing) else None


def with_input_shapes(model: Model, shapes: Mapping[str, Sequence[int | str | None]]) -> Model:
    """A copy of ``model`` whose inputs named in ``shapes`` are declared with those dimensions (an int
    fixed, a str a named dynamic one, None an unnamed dynamic one); nodes, names and weights as they are
    (read into memory). KeyError for a name that is not an input;
    ModelError if the model's file changed since it was read."""
    unknown = set(shapes) - set(model.input_names)
    if unknown:
        raise KeyError(f"not inputs of the model: {', '.join(sorted(unknown))}")
    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)  # weights in memory: an export of it holds them inline, as of any model
    for graph_input in proto.graph.input:
        if graph_input.name in shapes:
            shape = graph_input.type.tensor_type.shape
            shape.ClearField("dim")
            for value in shapes[graph_input.name]:
                dim = shape.dim.add()
                if isinstance(value, int):
                    dim.dim_value = value
                elif isinstance(value, str):
                    dim.dim_param = value
    # made from the file's model: never load that file
    return Model(proto, model.path, own_file=False, data_files=model.data_files)
