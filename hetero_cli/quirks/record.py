"""The record of one known defect of ONNX Runtime or one of its execution providers (EPs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quirk:
    """One EP defect hetero-cli works around or documents, with what shows it and when it can go.

    ``id``: the name docs/limits.md gives its section (lower-case words joined by ``-``). ``ep``: the
    execution provider at fault (ORT's name, e.g. ``OpenVINOExecutionProvider``). ``versions_seen``: the
    packages it was seen with. ``upstream``: the issue or pull request upstream, or ``"not reported"``.
    ``summary``: what goes wrong, in a sentence or two (and why no repro, where ``repro`` is empty).
    ``repro``: the pytest node id that shows it in plain ONNX Runtime and fails once the EP is fixed (then
    the workaround can go). ``hook``: where hetero-cli acts on it (``module.function: what it does``), or
    ``none: ...`` where it only documents it. ``ops``: the op types the hook refuses to hand to the EP, for
    a quirk whose hook refuses nodes. ``signature``: words the EP's error carries when the defect strikes, for
    a quirk HETERO_FALLBACK moves subgraphs away from (its warning cites the quirk by them); empty otherwise.
    """

    id: str
    ep: str
    versions_seen: str
    upstream: str
    summary: str
    repro: str
    hook: str
    ops: frozenset[str] = frozenset()
    signature: str = ""


NOT_REPORTED = "not reported"
