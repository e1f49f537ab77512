"""Tune: the placement of a model's nodes that runs fastest on this machine, by measurement (issue 21).
Regions of a topological order timed on each device, a boundary cost measured here, a dynamic-programming
choice, and the best few candidates measured end to end beside the automatic plan and each single device."""

from .report import Candidate, OutputCheck, TuneReport, TuneResult, Validation
from .tune import DEFAULT_TOLERANCES, tune_model

__all__ = [
    "DEFAULT_TOLERANCES",
    "Candidate",
    "OutputCheck",
    "TuneReport",
    "TuneResult",
    "Validation",
    "tune_model",
]
