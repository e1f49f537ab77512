"""What a tune found: every candidate tried with its measured median, the winner, its validation, time per
subgraph of the winner and of the automatic plan, and the machine and seed it was measured on."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ...graph import Model
from ...placement.config import CONCURRENCY
from ..measure import Measurement, Paired, paired

AUTOMATIC = "automatic"
SINGLE = "single"
COST_MODEL = "cost-model"
#: a candidate's placement run with its branches at once (HETERO_CONCURRENCY=CONCURRENT: those that fork
#: cut apart, even on one device) or in turn, where that differs from how it runs by default
BRANCHES = "branches"


@dataclass
class Candidate:
    """One placement tried: ``name`` ("automatic", a device name such as "CPU", "cost-model-1"...),
    ``kind`` ("automatic" | "single" | "cost-model" | "branches"), ``affinities`` {node: device},
    ``concurrency``: the HETERO_CONCURRENCY it is compiled with (None: the tune's config), its ``subgraphs``
    count and ``devices`` (execution order), ``predicted_ms`` (the cost model's, None for the others),
    ``median_ms`` of its latencies measured by the in-process search (None if not measured or it failed),
    ``samples`` measured, ``error``: why it was dropped (a compile or run failure, a failed validation),
    None otherwise; for the finalists (the best split, the automatic plan, each single device) the final
    measurement, each alone in its own process (app.measure): ``process_ms`` (one median per process),
    ``final_ms`` (their median), ``noise`` (their relative spread) and ``block_ms`` (each block's median,
    a list per round, aligned with the other finalists' blocks: what the decision compares)."""

    name: str
    kind: str
    affinities: dict[str, str]
    subgraphs: int = 0
    devices: list[str] = field(default_factory=list)
    predicted_ms: float | None = None
    median_ms: float | None = None
    samples: int = 0
    error: str | None = None
    process_ms: list[float] = field(default_factory=list)
    final_ms: float | None = None
    noise: float | None = None
    block_ms: list[list[float | None]] = field(default_factory=list)
    concurrency: str | None = None

    def config(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """``base`` (the tune's config) with this candidate's HETERO_CONCURRENCY over it, where it has one."""
        return {**base, CONCURRENCY: self.concurrency} if self.concurrency else dict(base)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the affinities included)."""
        return asdict(self)

    def measurement(self) -> Measurement:
        """The final measurement as app.measure holds it: what a block-by-block comparison reads."""
        return Measurement(self.name, list(self.process_ms), block_ms=[list(row) for row in self.block_ms])


@dataclass(frozen=True)
class OutputCheck:
    """One output of one input set against the reference: ``passed`` within the tolerances, its largest
    absolute and relative errors (None where none is a number), and ``reason`` (why it failed, else "")."""

    name: str
    passed: bool
    max_abs: float | None
    max_rel: float | None
    reason: str


@dataclass(frozen=True)
class Validation:
    """The validation of one candidate (``candidate``, a name) against the whole model on CPU: ``passed``
    where every output of every input set is within tolerance; ``outputs`` in order (set by set)."""

    candidate: str
    passed: bool
    outputs: tuple[OutputCheck, ...]

    @property
    def first_failure(self) -> str:
        """Why the first failing output failed ("" where every one passed)."""
        return next((o.reason for o in self.outputs if not o.passed), "")


@dataclass
class TuneReport:
    """A tune's record: ``device`` (the HETERO string), ``budget_s``, ``elapsed_s``, ``seed``, ``machine``
    (platform, processor, cores, onnxruntime version and EPs, python), ``candidates`` (in the order they
    were tried), ``winner`` (a candidate's name), ``validation`` (the last candidate validated, the
    winner where one passed; None before any), ``per_subgraph`` ({"winner": [...], "automatic": [...]},
    each entry {"subgraph", "device", "nodes", "ms"}), ``notes`` (what the search measured or skipped),
    ``regions`` (the cost model's regions: {"region", "nodes", "first", "last", "devices", "ms": {device:
    ms}, "estimated"}) and ``boundary`` (its measured cost per subgraph and per MB, and the probe's medians);
    ``decision``: why the winner won (the finalists compared block by block), ``noise``: the margin a
    split had to beat (the largest noise of the comparisons made, at least decide.MIN_NOISE; None where
    the final measurement could not run), ``config``: the configuration every candidate was
    compiled and measured with (threads included); ``best_single``: the fastest single device, found
    block by block ("" where the finalists were not timed per process)."""

    device: str
    budget_s: float
    seed: int
    machine: dict[str, Any]
    elapsed_s: float = 0.0
    candidates: list[Candidate] = field(default_factory=list)
    winner: str = ""
    validation: Validation | None = None
    per_subgraph: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    regions: list[dict[str, Any]] = field(default_factory=list)
    boundary: dict[str, float] = field(default_factory=dict)
    decision: str = ""
    noise: float | None = None
    config: dict[str, Any] = field(default_factory=dict)
    best_single: str = ""

    def candidate(self, name: str) -> Candidate:
        """The candidate called ``name``; KeyError if none was tried."""
        for c in self.candidates:
            if c.name == name:
                return c
        raise KeyError(f"no candidate {name!r}: tried {', '.join(c.name for c in self.candidates)}")

    def baseline(self, name: str) -> float | None:
        """The measured median (ms) of candidate ``name`` ("automatic", "CPU", "OPENVINO"...), None if it
        was not measured; KeyError if it was not tried."""
        return self.candidate(name).median_ms

    def versus(self, name: str, other: str) -> Paired | None:
        """Candidate ``name`` against candidate ``other``, block by block as the decision compared them
        (app.measure.paired: the ratio and its noise); None where they share no block timed per process.
        KeyError if either was not tried.

            vs = report.versus(report.winner, report.best_single)
            print(f"{vs.ratio:.3f}x, noise {vs.noise:.1%}")
        """
        return paired(self.candidate(name).measurement(), self.candidate(other).measurement())

    @property
    def measured(self) -> list[Candidate]:
        """The candidates with a median and no error, fastest first."""
        ok = [c for c in self.candidates if c.median_ms is not None and c.error is None]
        return sorted(ok, key=lambda c: c.median_ms or 0.0)

    def ranked(self, margin: float) -> list[Candidate]:
        """The measured candidates in the order the tuner tries them: at each step, of those within
        ``margin`` (a fraction) of the fastest left, the simplest (simpler: fewer subgraphs, then the
        automatic plan, then a single device, then the faster). A split must win by more than the medians
        wander between runs on a shared machine, or the simpler placement is kept."""
        left = self.measured
        out: list[Candidate] = []
        while left:
            bound = (left[0].median_ms or 0.0) * (1.0 + margin)
            near = [c for c in left if (c.median_ms or 0.0) <= bound]
            pick = min(near, key=_simplicity)
            out.append(pick)
            left.remove(pick)
        return out

    def simpler_note(self, kept: Candidate, margin: float) -> str:
        """The note saying why ``kept`` (first of ``ranked(margin)``) won over the fastest candidate."""
        fastest = self.measured[0]
        return (
            f"{kept.name} ({kept.subgraphs} subgraph(s)) is kept over {fastest.name} ({fastest.subgraphs}): "
            f"{fastest.name} is faster by less than {margin:.1%}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready dicts and lists (the candidates as Candidate.to_dict gives them)."""
        return asdict(self)


_KIND_ORDER = {AUTOMATIC: 0, SINGLE: 1, COST_MODEL: 2, BRANCHES: 3}


def _simplicity(c: Candidate) -> tuple[int, int, int, float]:
    """Sort key, simplest first: subgraphs, the automatic plan itself, the kind, the median."""
    return (c.subgraphs, c.name != AUTOMATIC, _KIND_ORDER.get(c.kind, 3), c.median_ms or 0.0)


@dataclass
class TuneResult:
    """What tune_model returns: ``model`` with every node's affinity set to the winner's, and the
    ``report``."""

    model: Model
    report: TuneReport


def machine_info(devices: dict[str, str]) -> dict[str, Any]:
    """This machine as a report records it: platform, processor, cores, python, the installed onnxruntime
    distribution and its version, and ``devices`` ({device: execution provider})."""
    runtime, version = "", ""
    for dist in ("onnxruntime-openvino", "onnxruntime-gpu", "onnxruntime"):
        try:
            runtime, version = dist, importlib.metadata.version(dist)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "onnxruntime": f"{runtime} {version}".strip(),
        "execution_providers": devices,
    }
