"""The known defects of ONNX Runtime and its execution providers, one record each, and where each acts.

Each record (a Quirk) says which EP is at fault, on which versions it was seen and from which release it is
fixed, where it is reported upstream, the test that reproduces it in plain ONNX Runtime (it asserts the
defect on an affected release and the fixed behaviour on a fixed one), and the code that acts on it; that
code reads its data from here and acts only where the installed release is affected (``in_force``).
docs/limits.md has one section per record.
"""

from __future__ import annotations

from ..ort.failures import cited
from ..ort.versions import installed_release
from . import cpu, gpu, openvino
from .record import NOT_REPORTED, Quirk

__all__ = [
    "NOT_REPORTED",
    "Quirk",
    "all_quirks",
    "folds_initializers",
    "in_force",
    "known_defect",
    "node_refusals",
    "quirk",
    "quirks_in_force",
]


def all_quirks() -> tuple[Quirk, ...]:
    """Every known quirk, by EP module (OpenVINO, CPU, NVIDIA), in the order docs/limits.md lists them."""
    return (*openvino.QUIRKS, *cpu.QUIRKS, *gpu.QUIRKS)


def in_force(record: Quirk) -> bool:
    """Whether the installed ONNX Runtime is a release ``record`` affects: its workaround acts only then."""
    return record.affects(installed_release())


def quirks_in_force() -> tuple[Quirk, ...]:
    """The known quirks the installed ONNX Runtime release has, in ``all_quirks``' order."""
    return tuple(q for q in all_quirks() if in_force(q))


def known_defect(ep: str, reason: str) -> str | None:
    """The id of the known defect of execution provider ``ep`` (on the installed release) whose words
    ``reason`` (an EP's error in one line) holds, else None: what a warning or an error cites."""
    return cited(reason, {q.id: q.signature for q in quirks_in_force() if q.ep == ep and q.signature})


def quirk(quirk_id: str) -> Quirk:
    """The quirk named ``quirk_id``; KeyError if none is."""
    for q in all_quirks():
        if q.id == quirk_id:
            return q
    raise KeyError(quirk_id)


def node_refusals(ep: str) -> tuple[Quirk, ...]:
    """The quirks in force whose hooks refuse nodes of their ``ops`` on ``ep`` (Quirk.refuses), in
    ``all_quirks``' order; empty where none does."""
    return tuple(q for q in quirks_in_force() if q.ep == ep and q.ops)


def folds_initializers(ep: str) -> bool:
    """Whether ``ep`` builds overridable initializers into what it compiles, ignoring a value fed for one:
    such initializers must be inputs of its sessions (the *-folds-overridable-initializers quirks)."""
    return any(
        q.ep == ep and in_force(q)
        for q in (openvino.FOLDS_OVERRIDABLE_INITIALIZERS, gpu.TENSORRT_FOLDS_OVERRIDABLE_INITIALIZERS)
    )
