"""Tap a split: every subgraph's outputs, the tensors that cross its boundaries included, as numpy arrays,
for one inference. What ``hetero validate`` compares with a whole-model session's values of the same
tensors to find the first subgraph that differs (Polygraphy's ``--onnx-outputs mark all``, per subgraph).

    values = tap(compiled, {"x": x})      # {tensor: array} for every subgraph output
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InferenceError
from ..ort.session import ORT_RUN_ERRORS
from ..ort.values import CPU, OrtValue, from_numpy, to_numpy
from .failures import failure
from .inputs import Inputs
from .steps import plan_steps, step_feeds
from .walk import run_session

if TYPE_CHECKING:
    from .compiled_model import CompiledModel


def tap(compiled: CompiledModel, feeds: Any) -> dict[str, Any]:
    """Run ``compiled``'s subgraph sessions once, in execution order, on ``feeds`` (as ``infer`` takes
    them), and return {tensor: value} for every output of every subgraph: numpy arrays (values no OrtValue
    holds, such as sequences, as ORT's run gives them).

    The subgraphs' own sessions run, with what ``infer`` feeds them (steps.plan_steps / step_feeds:
    overridable initializers, non-tensor values), nothing pre-bound and every output copied to host memory,
    so no tensor is released before it is read. Why not ``infer``: it hands over only the model's outputs.

    Raises InferenceError for inputs the model does not take or a subgraph that fails (naming it), and for
    a compile whose subgraphs run in one ONNX Runtime session (``compiled.one_session``, under
    PERFORMANCE_HINT=LATENCY), which has no boundary to tap: compile with PERFORMANCE_HINT=THROUGHPUT.
    """
    revision = compiled.current()  # the one this tap runs to its end
    if revision.one_session:
        raise InferenceError(
            f"the {len(revision.subgraphs)} subgraphs of this compile run in one ONNX Runtime session, which "
            "hands over no tensor between them: compile with PERFORMANCE_HINT=THROUGHPUT to tap them"
        )
    model = revision.model
    inputs = Inputs(model.inputs, model)
    checked = inputs.check(inputs.as_dict(feeds))
    values: dict[str, Any] = {
        name: value if name in inputs.unwrapped else from_numpy(value, CPU) for name, value in checked.items()
    }
    produced_by_steps: list[str] = []
    for step in plan_steps(revision):
        # outputs to host memory: a CUDA subgraph's tensor kept on its device could not be read here
        host = dataclasses.replace(step, on_device=False) if step.on_device else step
        try:
            produced = run_session(host, step.compiled.session, step_feeds(step, values))
        except ORT_RUN_ERRORS as exc:
            raise failure(step, exc) from None
        values.update(zip(step.outputs, produced, strict=True))
        produced_by_steps.extend(step.outputs)
    return {
        name: to_numpy(name, values[name]) if isinstance(values[name], OrtValue) else _plain(values[name])
        for name in dict.fromkeys(produced_by_steps)
    }


def _plain(value: Any) -> Any:
    """A value a plain step made (numpy array, list, dict), as it is; numpy scalars as 0-d arrays."""
    return np.asarray(value) if isinstance(value, np.generic) else value
