"""Tune: the placement of a model's nodes that runs fastest on this machine, by measurement (issue 21).
Regions of a topological order timed on each device, a boundary cost measured here, a dynamic-programming
choice, and the best few candidates measured end to end beside the automatic plan and each single device."""

from .report import Candidate, TuneReport, TuneResult
from .tune import DEFAULT_TOLERANCES, tune_model

__all__ = ["DEFAULT_TOLERANCES", "Candidate", "TuneReport", "TuneResult", "tune_model"]
