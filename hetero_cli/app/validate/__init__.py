"""Validate a split against the whole model: the same inputs through the split and one whole-model ONNX
Runtime session, every output compared with Polygraphy's tolerance syntax and semantics, the first subgraph
that differs named; inputs and outputs in Polygraphy's own JSON formats."""

from .compare import OutputComparison, compare_outputs
from .report import BisectStep, Localisation, SubgraphCheck, ValidationReport
from .run import (
    check_inputs,
    check_random_inputs,
    check_reference,
    check_sized,
    input_shapes,
    random_inputs,
    validate_model,
)
from .tolerances import Tolerances

__all__ = [
    "BisectStep",
    "Localisation",
    "OutputComparison",
    "SubgraphCheck",
    "Tolerances",
    "ValidationReport",
    "check_inputs",
    "check_random_inputs",
    "check_reference",
    "check_sized",
    "compare_outputs",
    "input_shapes",
    "random_inputs",
    "validate_model",
]
