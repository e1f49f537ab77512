"""The record of one known defect of ONNX Runtime or one of its execution providers (EPs)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Quirk:
    """One EP defect hetero-cli works around or documents, with what shows it and when it can go.

    ``id``: the name docs/limits.md gives its section (lower-case words joined by ``-``). ``ep``: the
    execution provider at fault (ORT's name, e.g. ``OpenVINOExecutionProvider``). ``versions_seen``: the
    packages it was seen with. ``fixed_in``: the first ONNX Runtime release (the ``onnxruntime`` module's
    version, whichever flavour's wheel installs it) without the defect, or ``""`` where no fixed release is
    known: then every release counts as affected. ``upstream``: the issue or pull request upstream, or
    ``"not reported"``. ``summary``: what goes wrong, in a sentence or two (and why no repro, where ``repro``
    is empty). ``repro``: the pytest node id that shows the defect in plain ONNX Runtime where the installed
    release is affected, and the fixed behaviour where it is not (so a release that brings it back fails it).
    ``hook``: where hetero-cli acts on it (``module.function: what it does``), or ``none: ...`` where it only
    documents it. ``ops``: the op types the hook refuses to hand to the EP, for a quirk whose hook refuses
    nodes; ``outer_scope_only``: it refuses them only where their body reads values from outside it;
    ``given_input``: it refuses them only where they are given their input at this position (an LSTM's
    peepholes, P: 7); ``lone_input``: only where they are given one input (a variadic Max of one).
    ``signature``: words the EP's error carries when the defect strikes, for a quirk HETERO_FALLBACK
    moves subgraphs away from (its warning cites the quirk by them); empty otherwise.
    """

    id: str
    ep: str
    versions_seen: str
    fixed_in: str
    upstream: str
    summary: str
    repro: str
    hook: str
    ops: frozenset[str] = frozenset()
    outer_scope_only: bool = False
    signature: str = ""
    given_input: int | None = None
    lone_input: bool = False

    def refuses(self, op_type: str, domain: str, reads_outer: bool, inputs: Sequence[str] = ()) -> bool:
        """Whether the hook refuses a node of ``op_type`` in ``domain`` (ONNX's own ops only) whose body
        reads values from outside it (``reads_outer``) or not, given ``inputs`` (its input names, "" for
        one left out)."""
        given = self.given_input is None or (
            len(inputs) > self.given_input and bool(inputs[self.given_input])
        )
        given = given and (not self.lone_input or sum(1 for i in inputs if i) == 1)
        return (
            op_type in self.ops
            and domain in ("", "ai.onnx")
            and (reads_outer or not self.outer_scope_only)
            and given
        )

    def affects(self, version: str) -> bool:
        """Whether ONNX Runtime ``version`` (e.g. "1.24.1", "1.27.0.dev20260501") has the defect: True
        before ``fixed_in``, and for every version where no fixed release is known."""
        return not self.fixed_in or release(version) < release(self.fixed_in)

    @property
    def affected(self) -> str:
        """The affected releases in words, as docs/limits.md gives them: "onnxruntime before 1.27.0 (fixed
        in 1.27.0)" or "every onnxruntime release seen; no fixed release known"."""
        if self.fixed_in:
            return f"onnxruntime before {self.fixed_in} (fixed in {self.fixed_in})"
        return "every onnxruntime release seen; no fixed release known"


def unfixed(**fields: Any) -> Quirk:
    """The Quirk of ``fields`` (its fields by name), with no fixed release known (``fixed_in=""``) and not
    reported upstream unless they say otherwise: what most records are, so each gives only what sets it apart.
    TypeError where a field is missing or unknown."""
    return Quirk(**{"fixed_in": "", "upstream": NOT_REPORTED, **fields})


def release(version: str) -> tuple[int, ...]:
    """The numeric release of a version string: "1.27.0" -> (1, 27, 0); a pre-release or build suffix
    ("1.27.0.dev20260501", "1.27.0rc1", "1.27.0+cu12") counts as its release. ValueError without one."""
    found = re.match(r"\d+(?:\.\d+)*", version.strip())
    if found is None:
        raise ValueError(f"not a release version: {version!r}")
    numbers = [int(part) for part in found.group(0).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


NOT_REPORTED = "not reported"
