"""Builders of runtimes for measure_runtimes (RuntimeSpec.builder): what ``hetero tune`` measures."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ...core import Core

#: the builder of a hetero-cli compile of a model file
HETERO = "hetero_cli.app.measure.builders:hetero"


def hetero(
    feeds: Mapping[str, np.ndarray], path: str, device: str, config: Mapping[str, Any] | None = None
) -> Callable[[], object]:
    """The model file ``path`` compiled by hetero-cli on ``device`` with ``config`` (its affinities in
    its nodes: manual mode, as a user runs a tuned file), and one infer request: the callable runs one
    inference on ``feeds``. Raises as Core.compile_model and infer do."""
    compiled = Core().compile_model(path, device, dict(config) if config else None)
    request = compiled.create_infer_request()
    feeds = dict(feeds)

    def run() -> object:
        return request.infer(feeds)

    run.compiled = compiled  # type: ignore[attr-defined]  # kept alive with the request
    return run
