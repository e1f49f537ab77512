"""The reference's side of a localisation: models made from the validated one (its nodes with more graph
outputs, or a set of its nodes on their own) whose weights stay the source model's, and the values of any
of its tensors from one whole-model session on the reference device."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ...core import Core
from ...graph import Model
from ...placement.config import DUMP_GRAPH_DOT
from ...placement.export import extract

#: the config of the compiles that only serve the comparison (reference, tapped, bisected): they draw nothing
NO_DOT_FILES = {DUMP_GRAPH_DOT: "NO"}


def standalone(proto: onnx.ModelProto, source: Model) -> Model:
    """``proto`` (extracted from ``source``, its weights referenced in ``source``'s file, as
    placement.export.extract makes it) as a Model a Core compiles: those references resolved against
    ``source``'s folder; its sessions load this graph, never ``source``'s file (Model.session_file)."""
    return Model(proto, source.path, own_file=False)


def tapped_model(model: Model, tensors: Iterable[str]) -> Model:
    """``model`` with ``tensors`` added to its graph outputs (after its own, each once), for a session
    that hands over the values of intermediate tensors (Polygraphy's ``--onnx-outputs``); every node kept,
    weights referenced in the model's file. Raises ModelError where neither onnx nor ONNX Runtime can tell
    a tensor's type."""
    outputs = list(dict.fromkeys([*model.output_names, *tensors]))
    proto = extract(model, model.get_ops(), list(model.input_names), outputs, name=f"{model.name}_reference")
    return standalone(proto, model)


def reference_values(
    core: Core, model: Model, tensors: Sequence[str], feeds: Mapping[str, Any], reference: str
) -> dict[str, Any]:
    """{tensor: value} of ``tensors`` and the model's outputs, from one session of the whole model
    (``tapped_model``) on ``reference`` run on ``feeds``. Raises as compile_model and infer."""
    compiled = core.compile_model(tapped_model(model, tensors), reference, NO_DOT_FILES)
    results = compiled(dict(feeds))
    return {name: results[name] for name in dict.fromkeys([*model.output_names, *tensors])}


def arrays(
    got: Mapping[str, Any], want: Mapping[str, Any], names: Iterable[str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The tensors among ``names`` that both sides have as numpy arrays, as (got, want) for
    compare_outputs (values no tensor holds, such as sequences, are not compared)."""
    keep = [n for n in names if isinstance(got.get(n), np.ndarray) and isinstance(want.get(n), np.ndarray)]
    return {n: got[n] for n in keep}, {n: want[n] for n in keep}
