"""What a validation finds, as plain data: the comparison of every output per iteration, and on a failure
where the split starts to differ (the first subgraph, and with bisect the node or group inside it).

The records hold no session or model, only names, arrays and comparisons (compare.OutputComparison), so a
report can be printed, saved or kept after its sessions are gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .compare import OutputComparison


@dataclass
class SubgraphCheck:
    """One subgraph's outputs (the tensors it hands on, the model's outputs among them) compared with the
    reference's values of the same tensors. ``comparisons``: one per output compared (values that are no
    tensor, such as sequences, are left out)."""

    name: str
    device: str
    nodes: tuple[str, ...]
    comparisons: list[OutputComparison]

    @property
    def passed(self) -> bool:
        """Whether every output is within its tolerance."""
        return all(c.passed for c in self.comparisons)

    @property
    def differing(self) -> list[OutputComparison]:
        """The outputs over their tolerance."""
        return [c for c in self.comparisons if not c.passed]


@dataclass
class BisectStep:
    """One round of the bisection: ``nodes`` (a run of the subgraph's nodes in topological order) run on
    ``device`` as a model of their own, fed the reference's values; their outputs compared with the
    reference's (``comparisons``)."""

    nodes: tuple[str, ...]
    device: str
    comparisons: list[OutputComparison]

    @property
    def passed(self) -> bool:
        """Whether every output of these nodes is within its tolerance."""
        return all(c.passed for c in self.comparisons)


@dataclass
class Localisation:
    """Where a failed split starts to differ from the reference.

    ``checked``: the subgraphs compared, in execution order, up to and including the first that differs;
    ``first``: that subgraph (None when every boundary tensor is within tolerance: the outputs then differ
    only beyond what a boundary shows); ``bisect``: the rounds of ``--bisect``; ``culprit``: the node (or
    the smallest group neither half of which differs alone) the bisection ended on, empty without it;
    ``notes``: how the localisation ran (a compile of its own, a step that could not be run).
    """

    checked: list[SubgraphCheck]
    first: SubgraphCheck | None
    bisect: list[BisectStep] = field(default_factory=list)
    culprit: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)


@dataclass
class ValidationReport:
    """The outcome of validate_model: the split on ``device`` against one whole-model session on
    ``reference``.

    ``iterations``: per input set, every output's comparison (compare.OutputComparison); ``passed``: all
    within tolerance; ``inputs``: the feeds used (given, or the seeded random ones); ``outputs`` /
    ``reference_outputs``: per input set, {output: value} of the split and of the reference (what
    ``--save-outputs`` writes); ``localisation``: where it starts to differ, on a failure (None on a pass,
    and where only the same infinities or NaNs on both sides failed: ``only_matching``);
    ``dot_files``: the .dot files the split's compile wrote (HETERO_DUMP_GRAPH_DOT), as CompiledModel's.
    """

    device: str
    reference: str
    iterations: list[list[OutputComparison]]
    passed: bool
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    reference_outputs: list[dict[str, Any]]
    localisation: Localisation | None = None
    dot_files: tuple[Path, ...] = ()

    @property
    def failing(self) -> list[OutputComparison]:
        """The comparisons over their tolerance, of every input set, in order."""
        return [c for comparisons in self.iterations for c in comparisons if not c.passed]

    @property
    def only_matching(self) -> bool:
        """Whether it failed only because of the same infinities or NaNs on both sides (the split gives
        what the reference gives: OutputComparison.only_matching)."""
        failing = self.failing
        return bool(failing) and all(c.only_matching for c in failing)

    @property
    def failed_iteration(self) -> int | None:
        """The index of the first input set whose outputs differ, None on a pass."""
        return next((k for k, c in enumerate(self.iterations) if not all(o.passed for o in c)), None)
