"""How a subgraph's run failed, as the inference paths tell it: BoundFailure, the signal that a pre-bound
subgraph failed or that a session refused a tensor's shape (Executor.recheck tells which and recovers);
refused_inputs, which tensors' shapes were refused; failure, the InferenceError the caller gets, citing the
known EP defect behind it (known_defect)."""

from __future__ import annotations

from collections.abc import Set

from ..errors import InferenceError
from ..ort import failures as ort_failures
from ..ort.failures import cited, failure_reason
from ..quirks import quirks_in_force
from .steps import Step


class BoundFailure(Exception):
    """A subgraph failed with its outputs pre-bound, or refused a tensor's shape; Executor.recheck tells
    why. ``refused``: what refused_inputs found in ``cause``, where already looked for. Never reaches the
    caller (an internal signal, not an error of the API)."""

    def __init__(
        self, step: Step, cause: BaseException, refused: dict[str, tuple[int, ...] | None] | None = None
    ):
        super().__init__(str(cause))
        self.step = step
        self.cause = cause
        self.refused = refused


def refused_inputs(step: Step, exc: BaseException, given: Set[str]) -> dict[str, tuple[int, ...] | None]:
    """{tensor: the dimensions ORT refused (None: its rank)} for the tensors from earlier subgraphs whose
    shape ``step``'s session refused (the model declared another); empty for any other failure. ``given``:
    what the caller feeds (checked before the run)."""
    return ort_failures.refused_inputs(exc, (name for name in step.inputs if name not in given))


def failure(step: Step, exc: BaseException) -> InferenceError:
    """The caller's error for ``step``'s failure ``exc``: where it ran, ORT's reason in one line, and the
    known defect of its EP behind it, where the quirks record has one."""
    reason = failure_reason(exc)
    known = known_defect(step.compiled.target.ep, reason)
    cite = f" (known EP defect {known}, docs/limits.md)" if known else ""
    return InferenceError(f"{step.compiled.where} failed: {reason}{cite}")


def known_defect(ep: str, reason: str) -> str | None:
    """The id of the known defect of execution provider ``ep`` (quirks record, on the installed release)
    whose words ``reason`` (an EP's error in one line) holds, else None."""
    return cited(reason, {q.id: q.signature for q in quirks_in_force() if q.ep == ep and q.signature})
