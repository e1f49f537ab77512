"""A model with some inputs declared in other shapes: ``hetero compile -shape`` fixes dynamic dimensions so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx

from .model import Model


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
