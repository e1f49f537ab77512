"""The whole-model path: a plan of one host session, fed the model's inputs and making its outputs, runs as
ONNX Runtime's own ``InferenceSession.run`` does: the caller's arrays in, ORT's fresh arrays out.

Binding buffers pays where tensors pass between subgraphs; with one subgraph there are none, and a large
output bound to a fresh ORT allocation each run, then wrapped for the caller, measured about 1 % slower than
the session's own ``run`` on a 1 MiB output (bench/instances.py). The straight path stays first where every
output is small enough to be copied out of a buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ort.values import ELEMENT_TYPES, RUN_OPTIONS, c_session
from .results import Results
from .steps import Step


@dataclass(frozen=True)
class Whole:
    """One session runs the whole model: ``run(feeds)`` takes the checked feeds (every model input, as
    numpy arrays) and returns the outputs, or None for feeds it does not take (another count of them:
    overridable initializers given too). Raises what ORT raises: the caller treats it as an unbound
    run's failure (nothing was bound, so there is nothing to run again unbound)."""

    step: Step
    run: Callable[[dict[str, Any]], Results | None]


def whole(steps: list[Step], model_inputs: Collection[str], outputs: tuple[str, ...]) -> Whole | None:
    """The whole-model path over ``steps`` when it is one host session whose inputs are exactly
    ``model_inputs`` and whose outputs include every model output (``outputs``, in order), numeric
    tensors of numpy's types, with nothing profiled or overridable; else None."""
    if len(steps) != 1:
        return None
    [step] = steps
    s = step.compiled
    if (
        not s.on_host
        or s.profiler is not None
        or step.plain
        or step.overridable
        or set(step.inputs) != set(model_inputs)
        or not set(outputs) <= set(step.outputs)
    ):
        return None
    types = {o.name: o.type for o in s.session.get_outputs()}
    if not all(types.get(name) in ELEMENT_TYPES for name in outputs):
        return None  # bfloat16 and the like: ORT's run cannot hand them over, the general path says so
    session_run = c_session(s.session).run
    names = list(outputs)
    count = len(step.inputs)
    options = RUN_OPTIONS
    ndarray = np.ndarray

    def run(feeds: dict[str, Any]) -> Results | None:
        if len(feeds) != count:
            return None
        for value in feeds.values():
            if type(value) is not ndarray:
                return None
        produced = session_run(names, feeds, options)
        results = Results(zip(outputs, produced, strict=True))
        results._names = outputs
        return results

    return Whole(step, run)
