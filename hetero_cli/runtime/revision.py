"""Revisions: a compiled model is a sequence of frozen states, each what one inference runs from its start
to its end.

A Revision holds the plan, the subgraphs' compiled sessions (CompiledSubgraph, frozen too), what an
inference runs of them, the boundary type corrections its sessions were compiled with and the .dot files
drawn of its plan. Nothing in it changes once made. Where a run shows a session wrong (a declared shape
relaxed, a HETERO_FALLBACK move, a session an EP left in a failed run's state), the compiled model builds
the next revision from the current one and swaps it in (CompiledModel.current() then answers it); a request in flight keeps running the revision it
started with, and one that hit the failure starts over on the new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import onnx

from ..graph import Model
from ..placement.partition import Plan

if TYPE_CHECKING:
    from .compiled_model import CompiledSubgraph


@dataclass(frozen=True, eq=False)  # one revision is one object: requests compare them by identity
class Revision:
    """One state of a compiled model, never changed (assigning a field raises FrozenInstanceError).

    ``number``: 0 for the compile's, one more for each revision built from it; ``plan``: the Plan its
    subgraphs run (devices as moved by HETERO_FALLBACK); ``subgraphs``: CompiledSubgraph in execution
    order; ``runs``: what an inference runs, in order: the subgraphs, or one entry standing for all of them
    where one ONNX Runtime session runs the whole plan (``one_session``); ``types``: {tensor passed between
    subgraphs: its type correction} as the sessions were compiled with it (Model.correction; a relax adds
    some), read-only; ``dot_files``: the .dot files drawn of ``plan`` (OPENVINO_HETERO_VISUALIZE), if any.
    """

    number: int
    plan: Plan
    subgraphs: tuple[CompiledSubgraph, ...]
    runs: tuple[CompiledSubgraph, ...]
    types: Mapping[str, onnx.TypeProto] = field(default_factory=lambda: MappingProxyType({}))
    dot_files: tuple[Path, ...] = ()

    @property
    def one_session(self) -> bool:
        """True when one ONNX Runtime session runs all of several subgraphs (PERFORMANCE_HINT=LATENCY, where
        the query's session of the whole model placed every node as the plan does)."""
        return len(self.runs) < len(self.subgraphs)

    def holds(self, compiled: CompiledSubgraph) -> bool:
        """Whether ``compiled`` (that very object) is one of this revision's subgraphs or runs."""
        return any(c is compiled for c in (*self.runs, *self.subgraphs))

    def next(
        self,
        model: Model,
        subgraphs: Sequence[CompiledSubgraph],
        *,
        plan: Plan | None = None,
        dot_files: tuple[Path, ...] | None = None,
    ) -> Revision:
        """The revision after this one: ``subgraphs`` (one session each, so they are also its runs) for
        ``plan`` (this one's by default), the types corrected in ``model`` now, and ``dot_files`` (this
        one's by default: the caller draws the new plan where they were drawn)."""
        plan = self.plan if plan is None else plan
        return Revision(
            self.number + 1,
            plan,
            tuple(subgraphs),
            tuple(subgraphs),
            corrections(model, plan),
            self.dot_files if dot_files is None else tuple(dot_files),
        )

    def renewed(self, fresh: Mapping[CompiledSubgraph, CompiledSubgraph]) -> Revision:
        """The revision after this one with each of ``fresh``'s keys (subgraphs or runs of this one) replaced
        by its value, the same subgraph in a session made anew (runtime.renewal); the plan, types and .dot
        files stay this one's."""
        return replace(
            self,
            number=self.number + 1,
            subgraphs=tuple(fresh.get(c, c) for c in self.subgraphs),
            runs=tuple(fresh.get(c, c) for c in self.runs),
        )

    def drawn(self, dot_files: Sequence[Path]) -> Revision:
        """This revision with ``dot_files`` drawn of its plan (the same sessions and number)."""
        return replace(self, dot_files=tuple(dot_files))


def first_revision(
    model: Model, plan: Plan, subgraphs: Sequence[CompiledSubgraph], runs: Sequence[CompiledSubgraph] | None
) -> Revision:
    """A compile's revision 0: ``subgraphs`` for ``plan``, ``runs`` what an inference runs of them (None:
    the subgraphs themselves)."""
    return Revision(
        0,
        plan,
        tuple(subgraphs),
        tuple(subgraphs) if runs is None else tuple(runs),
        corrections(model, plan),
    )


def corrections(model: Model, plan: Plan) -> Mapping[str, onnx.TypeProto]:
    """{tensor ``plan`` passes between subgraphs: the type ``model`` corrected it to}, read-only; each a copy
    (a later correction of the Model leaves it as it is)."""
    found = {}
    for name in sorted(plan.passed_tensors()):
        corrected = model.correction(name)
        if corrected is not None:
            copy = onnx.TypeProto()
            copy.CopyFrom(corrected)
            found[name] = copy
    return MappingProxyType(found)
