"""The known defects of ONNX Runtime and its execution providers, one record each, and where each acts.

Each record (a Quirk) says which EP is at fault, on which versions it was seen, where it is reported
upstream, the test that reproduces it in plain ONNX Runtime (it fails once the EP is fixed: then the
workaround can go), and the code that acts on it; that code reads its data from here. docs/limits.md has
one section per record.
"""

from __future__ import annotations

from . import cpu, gpu, openvino
from .record import NOT_REPORTED, Quirk

__all__ = ["NOT_REPORTED", "Quirk", "all_quirks", "folds_initializers", "node_refusal", "quirk"]


def all_quirks() -> tuple[Quirk, ...]:
    """Every known quirk, by EP module (OpenVINO, CPU, NVIDIA), in the order docs/limits.md lists them."""
    return (*openvino.QUIRKS, *cpu.QUIRKS, *gpu.QUIRKS)


def quirk(quirk_id: str) -> Quirk:
    """The quirk named ``quirk_id``; KeyError if none is."""
    for q in all_quirks():
        if q.id == quirk_id:
            return q
    raise KeyError(quirk_id)


def node_refusal(ep: str) -> Quirk | None:
    """The quirk whose hook refuses nodes of its ``ops`` on ``ep`` (one at most per EP), or None."""
    return next((q for q in all_quirks() if q.ep == ep and q.ops), None)


def folds_initializers(ep: str) -> bool:
    """Whether ``ep`` builds overridable initializers into what it compiles, ignoring a value fed for one:
    such initializers must be inputs of its sessions (the *-folds-overridable-initializers quirks)."""
    return any(
        q.ep == ep
        for q in (openvino.FOLDS_OVERRIDABLE_INITIALIZERS, gpu.TENSORRT_FOLDS_OVERRIDABLE_INITIALIZERS)
    )
