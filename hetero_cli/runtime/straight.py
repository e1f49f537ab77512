"""The straight path: the serving case cut to the bone, where every subgraph is pre-bound, the caller
gives a dict of exactly the static inputs' arrays and every model output is copied out of a buffer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ort.session import ORT_RUN_ERRORS
from ..ort.values import CPU, RUN_OPTIONS, Shape, from_numpy
from .failures import StepFailure
from .results import Results
from .steps import Step


@dataclass(frozen=True)
class Straight:
    """The serving case cut to the bone: InferRequest.infer given a dict of exactly the static inputs'
    arrays, every subgraph pre-bound, every model output copied out of a buffer. ``run(feeds)`` checks the
    arrays, binds one not bound already, runs the sessions and copies the outputs out; None when ``feeds``
    is not such a dict (the general path takes it). Raises StepFailure when a session fails.

    Every statement here runs on caches the EPs' kernels have just swept, so it costs several times what it
    does alone: on a small split the Python around the runs is a visible share of the latency, and
    ``run`` touches as few objects as it can.
    """

    # every model input: (name, the bindings that take it per run, dtype, shape, C strides)
    inputs: tuple[tuple[str, tuple[Any, ...], np.dtype, Shape, Shape], ...]
    runs: tuple[tuple[Callable[..., Any], Any], ...]  # (a session's run_with_iobinding, its binding)
    copies: tuple[tuple[str, np.ndarray], ...]  # model output -> the buffer it is copied from
    steps: tuple[Step, ...]  # the runs' steps, to name the one that fails
    run: Callable[[dict[str, Any]], dict[str, np.ndarray] | None]


def straight(
    inputs: tuple[tuple[str, tuple[Any, ...], np.dtype, Shape, Shape], ...],
    runs: tuple[tuple[Callable[..., Any], Any], ...],
    copies: tuple[tuple[str, np.ndarray], ...],
    steps: tuple[Step, ...],
    fed: dict[str, Any],
) -> Straight:
    """The straight path over a buffer set: ``inputs``, ``runs``, ``copies`` and ``steps`` as Straight
    holds them; ``fed``: the buffer set's model input arrays bound now, by name (updated as it binds)."""
    count = len(inputs)
    names = tuple(name for name, _ in copies)  # every model output, in order
    ndarray = np.ndarray
    options = RUN_OPTIONS
    wrap = from_numpy

    def run(feeds: dict[str, Any]) -> dict[str, np.ndarray] | None:
        if len(feeds) != count:
            return None
        for name, ios, dtype, shape, strides in inputs:
            arr = feeds.get(name)
            if type(arr) is not ndarray or arr.dtype != dtype or arr.shape != shape or arr.strides != strides:
                return None
            # the same array object, laid out as the input's own, is already bound: an OrtValue over
            # numpy's memory reads what the array holds now
            if fed.get(name) is not arr:
                value = wrap(arr, CPU)
                for io in ios:
                    io.bind_ortvalue_input(name, value)
                fed[name] = arr
        i = 0
        try:
            for session_run, io in runs:
                session_run(io, options)
                i += 1
        except ORT_RUN_ERRORS as exc:
            raise StepFailure(steps[i], exc, bound=True) from None
        results = Results()
        results._names = names
        for name, view in copies:
            results[name] = view.copy()
        return results

    return Straight(inputs, runs, copies, steps, run)
