"""Revisions: a compiled model is a sequence of frozen states, each what one inference runs from its start
to its end.

A Revision holds the model as its sessions were compiled from it (with the type corrections they were
compiled with: a copy of the caller's Model, never the caller's), the plan, the subgraphs' compiled
sessions (CompiledSubgraph, frozen too), what an inference runs of them, the HETERO_FALLBACK moves that
made it, the runs whose outputs are made per inference and the .dot files drawn of its plan. Nothing in
it changes once made. Where a run shows a session wrong (a declared shape relaxed, a HETERO_FALLBACK
move, a session an EP left in a failed run's state, outputs in other shapes than declared), the next
revision is built from the current one off to the side and swapped in whole (Compiled.advance); a request
in flight keeps running the revision it started with, and one that hit the failure starts over on the
new one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import onnx

from ..graph import Model
from ..ort.failures import ep_cause
from ..placement.partition import Plan
from ..placement.schedule import Schedule
from .compiled_subgraph import CompiledSubgraph

COMPILE = "failed to compile"
FIRST_INFERENCE = "failed its first inference"


@dataclass(frozen=True)
class Move:
    """One subgraph HETERO_FALLBACK moved: ``subgraph`` (its name where it failed), its ``nodes``, the
    device it ``left`` and the one it went ``to``, the EP's ``reason`` in one line, the ``quirk`` id of the
    known EP defect behind it (None if none is known), and the ``stage`` it failed at (COMPILE or
    FIRST_INFERENCE)."""

    subgraph: str
    nodes: tuple[str, ...]
    left: str
    to: str
    reason: str
    quirk: str | None
    stage: str

    @property
    def message(self) -> str:
        """The one warning line a user sees for this move."""
        known = f" (known EP defect {self.quirk}, docs/limits.md)" if self.quirk else ""
        return (
            f"HETERO_FALLBACK: {self.subgraph} ({len(self.nodes)} node(s)) {self.stage} on {self.left}"
            f"{known}: {ep_cause(self.reason)}; it runs on {self.to} instead"
        )


@dataclass(frozen=True, eq=False)  # one revision is one object: requests compare them by identity
class Revision:
    """One state of a compiled model, never changed (assigning a field raises FrozenInstanceError).

    ``number``: 0 for the compile's, one more for each revision built from it; ``model``: the model its
    sessions were compiled from, with the type corrections they were compiled with; ``plan``: the Plan
    its subgraphs run (devices as moved by HETERO_FALLBACK); ``subgraphs``: CompiledSubgraph in execution
    order; ``runs``: what an inference runs, in order: the subgraphs, or one entry standing for all of
    them where one ONNX Runtime session runs the whole plan (``one_session``); ``moves``: the
    HETERO_FALLBACK moves made so far (at compile time and at run time), in order; ``unbound``: positions
    of the runs whose outputs are made per inference (their shapes came out other than declared);
    ``dot_files``: the .dot files drawn of ``plan`` (OPENVINO_HETERO_VISUALIZE), if any; ``schedule``: which
    subgraphs run at the same time and the threads their sessions were given (None: one after another).
    """

    number: int
    model: Model
    plan: Plan
    subgraphs: tuple[CompiledSubgraph, ...]
    runs: tuple[CompiledSubgraph, ...]
    moves: tuple[Move, ...] = ()
    unbound: frozenset[int] = frozenset()
    dot_files: tuple[Path, ...] = ()
    schedule: Schedule | None = None

    @property
    def concurrent(self) -> bool:
        """Whether an inference starts every subgraph whose inputs are ready, rather than one after
        another (a schedule of branches that can overlap, each a session of its own)."""
        return self.schedule is not None and self.schedule.concurrent and not self.one_session

    @property
    def one_session(self) -> bool:
        """True when one ONNX Runtime session runs all of several subgraphs (PERFORMANCE_HINT=LATENCY, where
        the query's session of the whole model placed every node as the plan does)."""
        return len(self.runs) < len(self.subgraphs)

    @property
    def types(self) -> Mapping[str, onnx.TypeProto]:
        """{tensor passed between subgraphs: the type its sessions were compiled with, where the model's
        was corrected} (read-only)."""
        return MappingProxyType(
            {
                name: corrected
                for name in sorted(self.plan.passed_tensors())
                if (corrected := self.model.correction(name)) is not None
            }
        )

    def holds(self, compiled: CompiledSubgraph) -> bool:
        """Whether ``compiled`` (that very object) is one of this revision's subgraphs or runs."""
        return any(c is compiled for c in (*self.runs, *self.subgraphs))

    def next(
        self,
        subgraphs: Sequence[CompiledSubgraph],
        *,
        model: Model | None = None,
        plan: Plan | None = None,
        moves: Sequence[Move] = (),
        dot_files: Sequence[Path] | None = None,
        schedule: Schedule | None = None,
    ) -> Revision:
        """The revision after this one: ``subgraphs`` (one session each, so they are also its runs) for
        ``plan`` (this one's by default), compiled from ``model`` (this one's by default), with ``moves``
        made on the way (after this one's), ``dot_files`` (this one's by default: the caller draws the
        new plan where they were drawn) and ``schedule`` (this one's by default). Its outputs are bound
        again (new sessions, new shapes)."""
        return replace(
            self,
            number=self.number + 1,
            model=self.model if model is None else model,
            plan=self.plan if plan is None else plan,
            subgraphs=tuple(subgraphs),
            runs=tuple(subgraphs),
            moves=(*self.moves, *moves),
            unbound=frozenset(),
            dot_files=self.dot_files if dot_files is None else tuple(dot_files),
            schedule=self.schedule if schedule is None else schedule,
        )

    def renewed(self, fresh: Mapping[CompiledSubgraph, CompiledSubgraph]) -> Revision:
        """The revision after this one with each of ``fresh``'s keys (subgraphs or runs of this one) replaced
        by its value, the same subgraph in a session made anew (runtime.renewal); all else stays."""
        return replace(
            self,
            number=self.number + 1,
            subgraphs=tuple(fresh.get(c, c) for c in self.subgraphs),
            runs=tuple(fresh.get(c, c) for c in self.runs),
        )

    def unbinding(self, position: int) -> Revision:
        """The revision after this one whose run at ``position`` has its outputs made per inference (its
        session made them in other shapes than it declares); the same sessions."""
        return replace(self, number=self.number + 1, unbound=self.unbound | {position})
