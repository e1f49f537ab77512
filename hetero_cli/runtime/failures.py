"""How a subgraph's run failed: StepFailure, the signal a run raises for the request's recovery to read,
and ``failure``, the InferenceError the caller gets, citing the known EP defect behind it
(known_defect)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InferenceError
from ..ort.failures import failure_reason
from ..quirks import known_defect
from .steps import Step


class StepFailure(Exception):
    """A subgraph's run failed: ``step``, ORT's error (``cause``: one of ORT_RUN_ERRORS) or the first-run
    shape check's (an InferenceError), whether it ran pre-bound (``bound``: its outputs in buffers
    allocated from the shapes its session declares) and ``refused``: {tensor from an earlier subgraph:
    the dimensions its session refused (None: the rank)}. The request's recovery (runtime.recovery)
    reads it; it never reaches the caller."""

    def __init__(
        self,
        step: Step,
        cause: BaseException,
        *,
        bound: bool,
        refused: Mapping[str, tuple[int, ...] | None] | None = None,
    ):
        super().__init__(str(cause))
        self.step = step
        self.cause = cause
        self.bound = bound
        self.refused = dict(refused or {})
        # the inference's tensors when it failed (the failed step's inputs among them), where its walk
        # had them: what the recovery runs the step on again
        self.values: dict[str, Any] | None = None


def failure(step: Step, exc: BaseException) -> InferenceError:
    """The caller's error for ``step``'s failure ``exc``: where it ran, ORT's reason in one line, and the
    known defect of its EP behind it, where the quirks record has one."""
    reason = failure_reason(exc)
    known = known_defect(step.compiled.target.ep, reason)
    cite = f" (known EP defect {known}, docs/limits.md)" if known else ""
    return InferenceError(f"{step.compiled.where} failed: {reason}{cite}")
