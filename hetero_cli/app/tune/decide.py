"""Tune's final decision (issue 30): the best split the search found, the automatic plan and each single
device, each saved as the tuned file would be and timed alone in its own process (app.measure: the
processes take turns timing short blocks), in rounds; the finalists compare block by block (a ratio and
its noise), and the split is kept only where it beats the best single device and the automatic plan by
more than the noise of that comparison, else the best single device or the automatic plan is saved.

The search before it ranks many candidates in one process (app/tune/measure.py: cheap, but the sessions
of one runtime change the speed of the next's); only these finalists are timed the way a user runs them.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...errors import CompileError
from ...graph import Model
from ...placement.affinities import mark_automatic, mark_concurrency
from ..measure import Launch, Measurement, Paired, RuntimeSpec, in_worker, method, paired
from ..measure.builders import HETERO
from . import runs
from .measure import Clock
from .report import AUTOMATIC, BRANCHES, COST_MODEL, SINGLE, Candidate, TuneReport

#: the kinds of candidate the decision treats as a split: kept only where it beats the simpler ones
SPLITS = (COST_MODEL, BRANCHES)
#: the least margin a split must win by, whatever the measured noise (two processes of one runtime, timed
#: in turns, differ by 1-3 % on a shared machine: a process's own luck)
MIN_NOISE = 0.01
#: rounds of the final measurement: at most MAX_ROUNDS, as many as the budget leaves time for (one round
#: gives a comparison's noise from its blocks; a process's luck shows from two)
MIN_ROUNDS, MAX_ROUNDS = 1, 5
#: rounds a split must have been timed in to be kept: one round's blocks cannot show a process's own luck
#: (two processes of one runtime differ by a few percent), and a split kept on it could be slower
SPLIT_ROUNDS = 2
#: inferences dropped at the start of each process, and about how long each timed block lasts (ms)
WARMUP_RUNS = 5
BLOCK_MS = 100.0
#: what starting a worker process costs (seconds: an interpreter importing hetero_cli and onnxruntime),
#: in the estimate of a round's time; no part of it where the finalists are timed in this process
PROCESS_START_S = 1.5
LEAST_RUNS, MOST_RUNS = 2, 100
#: the fewest blocks per runtime a round is cut to where a round of method.BLOCKS does not fit the budget
#: (a slow model in a short budget): a comparison of few blocks has a wide noise, so it keeps the simpler
#: placement unless another wins clearly, which the in-process ranking cannot tell
LEAST_BLOCKS = 4


def finalists(report: TuneReport, margin: float) -> list[Candidate]:
    """The candidates timed per process: the first split (a cost-model candidate, or a placement whose
    branches run otherwise than by default) of the search's ranking (report.ranked(``margin``): the
    fastest, or a simpler one within ``margin`` of it), the automatic plan and each single device, those
    measured without error."""
    ranked = report.ranked(margin)
    splits = [c for c in ranked if c.kind in SPLITS]
    return splits[:1] + [
        c
        for c in report.candidates
        if any(c is r for r in ranked) and (c.name == AUTOMATIC or c.kind == SINGLE)
    ]


def runs_per_block(median_ms: float | None) -> int:
    """Timed inferences per block: about BLOCK_MS of them, LEAST_RUNS to MOST_RUNS."""
    if not median_ms or median_ms <= 0:
        return LEAST_RUNS
    return max(LEAST_RUNS, min(MOST_RUNS, int(BLOCK_MS / median_ms)))


def process_s(median_ms: float | None, settle_s: float, blocks: int = method.BLOCKS) -> float:
    """Seconds one process of a candidate with this search median spends in a round of ``blocks`` blocks
    (its warm-up, its blocks and the settle pause before each), its compile and start aside."""
    runs = WARMUP_RUNS + blocks * runs_per_block(median_ms)
    return runs * (median_ms or 0.0) / 1e3 + blocks * settle_s


def round_s(contenders: Sequence[Candidate], compile_s: float, blocks: int, workers: bool) -> float:
    """The estimated seconds of one round of ``blocks`` blocks per finalist: the processes start and
    build (at once, as many as there are cores, where ``workers``), then time their blocks in turns."""
    start_s, settle_s = (PROCESS_START_S, method.SETTLE_S) if workers else (0.0, 0.0)
    at_once = min(len(contenders), os.cpu_count() or 1) if workers else 1
    building = len(contenders) * (start_s + compile_s) / at_once
    return building + sum(process_s(c.median_ms, settle_s, blocks) for c in contenders)


def blocks_that_fit(contenders: Sequence[Candidate], compile_s: float, left_s: float, workers: bool) -> int:
    """The most blocks per finalist, method.BLOCKS at most, whose round fits in ``left_s`` seconds; 0 where
    not even LEAST_BLOCKS do."""
    for blocks in range(method.BLOCKS, LEAST_BLOCKS - 1, -1):
        if round_s(contenders, compile_s, blocks, workers) <= left_s:
            return blocks
    return 0


def save_candidate(
    model: Model,
    affinities: Mapping[str, str],
    automatic: Mapping[str, str],
    path: Path,
    config: Mapping[str, Any] | None = None,
    concurrency: str | None = None,
) -> None:
    """``model`` saved at ``path`` with ``affinities`` set as tune saves its winner (runs.keep: marked as the
    automatic plan's where they are that plan's, ``concurrency`` and ``config`` recorded), the model as it
    was afterwards."""
    runs.keep(model, affinities, automatic, config, concurrency)
    try:
        model.save(path)
    finally:
        runs.clear_affinities(model)
        mark_automatic(model, False)
        mark_concurrency(model, None)
        model.set_metadata(runs.MEASURED_CONFIG_KEY, None)


@dataclass(frozen=True)
class Finalists:
    """What the finalists are timed on: the ``model`` (saved once per finalist), ``device`` and ``config``
    they are compiled with, the ``feeds``, the ``launch`` (app.measure.Launch; None: a worker process
    each) and the ``seed`` of the rounds' order."""

    model: Model
    device: str
    config: Mapping[str, Any]
    feeds: Mapping[str, np.ndarray]
    launch: Launch | None
    seed: int


def final(
    report: TuneReport,
    ranked: list[Candidate],
    on: Finalists,
    clock: Clock,
    until: float,
    compile_s: float,
    tell: Callable[[str], None],
    margin: float,
) -> list[Candidate]:
    """Time ``report``'s finalists (finalists()) each alone in its own process (measure_finalists) in
    rounds while ``clock`` leaves a round's time before ``until`` (each of method.BLOCKS blocks per
    finalist, or as many as fit, LEAST_BLOCKS at least: blocks_that_fit; after the first, at the pace the
    rounds so far took), and decide (decide()): the decision and
    the noise set on ``report``. Returns the candidates in the order they are to be validated: the
    decision's winner, the other finalists by their final medians, then the search's ranking
    (``ranked``: report.ranked(``margin``)). Where no round fits the budget, or no finalist could be timed,
    the search's ranking, said in a note. Raises CompileError where no candidate was measured at all."""
    if not ranked:
        raise CompileError(
            "no candidate could be measured: every one failed to compile or run (see the notes)"
        )
    contenders = finalists(report, margin)
    workers = on.launch in (None, in_worker)
    blocks = blocks_that_fit(contenders, compile_s, clock.left(until), workers)
    if not blocks:
        one_round = round_s(contenders, compile_s, LEAST_BLOCKS, workers)
        report.notes.append(
            f"no time left to time the finalists alone, each in its own process (one round of "
            f"{LEAST_BLOCKS} blocks takes about {one_round:.1f} s): the search's in-process ranking decides"
        )
        return searched(report, ranked, margin)
    if blocks < method.BLOCKS:
        report.notes.append(
            f"the finalists were timed in rounds of {blocks} blocks each rather than {method.BLOCKS}: the "
            "budget left no more (a larger -t narrows the noise)"
        )
    started = clock.elapsed()
    sizes = [blocks]  # the blocks of each round started

    def next_blocks(done: int) -> int:
        """Another round of as many blocks as fit before until, at the pace of the rounds so far (their
        seconds over their estimates): a shorter last round rather than none, as decide() keeps a split
        only where SPLIT_ROUNDS rounds timed it."""
        estimated = sum(round_s(contenders, compile_s, b, workers) for b in sizes)
        pace = max(clock.elapsed() - started, 1e-9) / estimated
        fit = blocks_that_fit(contenders, compile_s, clock.left(until) / pace, workers)
        sizes.append(fit)
        return fit

    measure_finalists(
        on,
        contenders,
        automatic=report.candidate(AUTOMATIC).affinities,
        blocks=blocks,
        next_blocks=next_blocks,
        on_process=lambda name, round_: tell(f"timing {name} alone, round {round_ + 1}"),
    )
    if any(0 < b < blocks for b in sizes[1:]):
        report.notes.append(
            f"the last round timed the finalists in {min(b for b in sizes[1:] if b)} blocks each rather than "
            f"{blocks}: the budget left no more"
        )
    try:
        decision = decide(contenders)
    except ValueError:
        return searched(report, ranked, margin)
    winner = decision.winner
    report.decision, report.noise, report.best_single = decision.why, decision.noise, decision.best_single
    timed = sorted((c for c in contenders if c.final_ms is not None), key=_final)
    order = [winner, *(c for c in timed if c is not winner)]
    return order + [c for c in ranked if all(c is not o for o in order)]


def searched(report: TuneReport, ranked: list[Candidate], margin: float) -> list[Candidate]:
    """The search's ranking as the decision, where the finalists could not be timed per process."""
    if ranked[0] is not report.measured[0]:
        report.notes.append(report.simpler_note(ranked[0], margin))
    report.decision = (
        f"{ranked[0].name} is first in the search's in-process ranking: no finalist was timed in a process "
        "of its own"
    )
    return ranked


def measure_finalists(
    on: Finalists,
    contenders: Sequence[Candidate],
    *,
    automatic: Mapping[str, str],
    next_blocks: Callable[[int], int],
    blocks: int = method.BLOCKS,
    on_process: Callable[[str, int], None] | None = None,
) -> dict[str, Measurement]:
    """Each of ``contenders`` saved as the tuned file would be (save_candidate, ``automatic``: the
    automatic plan's affinities) and measured by app.measure's measure_runtimes on ``on``'s device, config
    and feeds, ``blocks`` blocks each in the first round, ``next_blocks(rounds_done)`` in each further one (0
    ends them); its per-round and block medians, median and noise set on the candidate (an error where its
    processes failed). Returns {name: Measurement}."""
    with tempfile.TemporaryDirectory(prefix="hetero-tune-") as folder:
        specs = {}
        for i, c in enumerate(contenders):
            path = Path(folder) / f"candidate{i}.onnx"
            save_candidate(on.model, c.affinities, automatic, path, on.config, c.concurrency)
            args = {"path": str(path), "device": on.device, "config": dict(on.config)}  # mode: the file's
            specs[c.name] = RuntimeSpec(HETERO, args)
        found = method.measure_runtimes(  # through the module: the one function tune and bench call
            specs,
            on.feeds,
            rounds=MAX_ROUNDS,
            min_rounds=MIN_ROUNDS,
            blocks=blocks,
            warmup=WARMUP_RUNS,
            runs={c.name: runs_per_block(c.median_ms) for c in contenders},
            seed=on.seed,
            launch=on.launch,
            next_blocks=next_blocks,
            on_process=on_process,
        )
    for c in contenders:
        m = found[c.name]
        c.process_ms, c.final_ms, c.noise = list(m.process_ms), m.median_ms, m.noise
        c.block_ms = [list(row) for row in m.block_ms]
        if m.error is not None and not m.process_ms:
            c.error = f"per-process measurement failed: {m.error}"
    return found


class Decision(NamedTuple):
    """decide's verdict: the finalist to save (``winner``), ``why``, the ``noise`` it was judged with and
    the fastest single device's name (``best_single``, "" where none was timed)."""

    winner: Candidate
    why: str
    noise: float
    best_single: str


def decide(contenders: Sequence[Candidate], floor: float = MIN_NOISE) -> Decision:
    """The finalist to save, why, the noise it was judged with and the best single device (Decision).
    ``contenders``: finalists with their
    final measurement (block medians); two of them compare block by block (app.measure.paired), each
    comparison with its own noise, at least ``floor``. The baseline is the best single device (each single
    against the others), or the automatic plan where it beats that by more than the noise; a split is kept
    only where it beats both the best single device and the automatic plan by more than the noise, all
    three timed in SPLIT_ROUNDS rounds at least. The noise returned is the largest of the comparisons
    made, the singles' among themselves included. Raises ValueError where no contender has a
    final median."""
    timed = [c for c in contenders if c.final_ms is not None and c.error is None]
    if not timed:
        raise ValueError("no finalist was measured")
    judge = _Judge(floor)
    singles = [c for c in timed if c.kind == SINGLE]
    auto = next((c for c in timed if c.name == AUTOMATIC), None)
    best = singles[0] if singles else auto
    assert best is not None  # timed holds a single device or the automatic plan at least
    for other in singles[1:]:
        if judge.faster(other, best):
            best = other
    base, why = best, f"{best.name} is the fastest single device ({_ms(best)})"
    if auto is not None and auto is not best:
        vs = judge.vs(auto, best)
        if judge.beats(auto, best):
            base = auto
            why = f"the automatic plan beats the best single device {best.name}: {_ratio(vs)}"
        else:
            slower = vs is not None and vs.ratio >= 1.0
            why += f"; the automatic plan is {'slower' if slower else 'not faster by more than the noise'}: {_ratio(vs)}"
    single = best.name if best.kind == SINGLE else ""
    split = next((c for c in timed if c.kind in SPLITS), None)
    if split is None:
        return Decision(base, why, judge.noise, single)
    others = [c for c in (best, auto) if c is not None]
    if not all(judge.beats(split, c) for c in others):
        against = "; ".join(f"against {c.name} {_ratio(judge.vs(split, c))}" for c in others)
        why += f"; the best split {split.name} does not beat it by more than the noise ({against})"
    else:
        against = " and ".join(f"{c.name} ({_ratio(judge.vs(split, c))})" for c in others)
        if min(len(c.process_ms) for c in (split, *others)) < SPLIT_ROUNDS:
            why += (
                f"; the best split {split.name} beats {against}, but in one round only: a process's own luck "
                f"(a few percent) shows from {SPLIT_ROUNDS} rounds, so it is not kept (a larger -t leaves "
                "time for them)"
            )
        else:
            base, why = split, f"the split {split.name} beats {against} by more than the noise"
    return Decision(base, why, judge.noise, single)


class _Judge:
    """Comparisons of finalists, block by block, each remembered with the noise it was judged with."""

    def __init__(self, floor: float) -> None:
        self.floor = floor
        self.noise = floor  # the largest noise of the comparisons made

    def vs(self, a: Candidate, b: Candidate) -> Paired | None:
        """``a`` against ``b`` (app.measure.paired); None where they share no block."""
        return paired(a.measurement(), b.measurement())

    def beats(self, a: Candidate, b: Candidate) -> bool:
        """Whether ``a`` is faster than ``b`` by more than the noise of their comparison (at least the
        floor): its block ratio under 1 - noise. Without a shared block, by their final medians."""
        vs = self.vs(a, b)
        if vs is None:
            return _final(a) < _final(b) * (1.0 - self.floor)
        noise = max(self.floor, vs.noise)
        self.noise = max(self.noise, noise)
        return vs.ratio < 1.0 - noise

    def faster(self, a: Candidate, b: Candidate) -> bool:
        """Whether ``a`` is the faster of the two at all (its block ratio under 1; else its final median).
        The comparison's noise counts in the noise reported: the choice between them is as firm as that."""
        vs = self.vs(a, b)
        if vs is None:
            return _final(a) < _final(b)
        self.noise = max(self.noise, vs.noise)
        return vs.ratio < 1.0


def _ratio(vs: Paired | None) -> str:
    if vs is None:
        return "no block timed by both"
    return f"{vs.ratio:.3f}x block by block, noise {max(vs.noise, 0):.1%}"


def _final(c: Candidate) -> float:
    return c.final_ms if c.final_ms is not None else math.inf


def _ms(c: Candidate) -> str:
    return f"{_final(c):.3f} ms" if _final(c) < 10 else f"{_final(c):.2f} ms"
