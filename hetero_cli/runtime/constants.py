"""The values of a model's outputs that are constants (initializers, or what only constant nodes compute),
computed once at compile time: no session runs for them at inference, and a compiled model hands them
over as numpy arrays."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import CompileError
from ..graph import Model
from ..ort.failures import failure_reason, refused_model
from ..ort.session import CONSTANTS, ORT_ERRORS, create_session, session_options
from ..placement.export import extract
from ..placement.partition import CONSTANT, Plan


def constant_outputs(model: Model, plan: Plan) -> dict[str, np.ndarray]:
    """Values of model outputs that are constants, computed once at compile time."""
    wanted = [name for name, src in plan.output_sources.items() if src == CONSTANT]
    values: dict[str, np.ndarray] = {}
    if not wanted:
        return values
    rest = []
    for name in wanted:
        if name in model.dense_initializer_names:
            values[name] = model.initializer_array(name)  # read alone: the other weights stay in the file
        elif name in model.sparse_initializers:
            values[name] = _dense(model.sparse_initializers[name])
        else:
            rest.append(name)
    if rest:
        proto = extract(model, model.constant_nodes_for(rest), [], rest, name=f"{model.name}_constants")
        what = f"the model's constant output(s) {', '.join(map(repr, rest))}"
        try:
            sess = create_session(
                proto.SerializeToString(),
                session_options(external_dir=model.external_dir),
                ["CPUExecutionProvider"],
                purpose=CONSTANTS,
                subject=proto.graph.name,
            )
            values.update(zip(rest, sess.run(rest, {}), strict=True))
        except RuntimeError as exc:  # an element type ORT's Python API has no numpy type for (bfloat16...)
            raise CompileError(
                f"{what} cannot be handed over as numpy arrays ({failure_reason(exc)}): add a Cast to "
                "float32 after them in the model"
            ) from None
        except ORT_ERRORS as exc:  # ORT's own error classes: the model is refused, or the computation failed
            raise refused_model(what, exc) or CompileError(
                f"{what} could not be computed: {failure_reason(exc)}"
            ) from None
    return values


def _dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A sparse initializer's value as a dense array (hetero-cli hands every output over as numpy)."""
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    dense = np.zeros(tuple(sparse.dims), dtype=values.dtype)
    if indices.ndim == 1:  # linear positions in the flattened tensor
        dense.reshape(-1)[indices] = values
    else:  # one row of coordinates per value
        dense[tuple(indices.T)] = values
    return dense
