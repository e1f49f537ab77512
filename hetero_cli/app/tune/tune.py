"""tune_model: the placement of a model's nodes that runs fastest on this machine, found by measurement
within a time budget (issue 21), never slower than the automatic plan or the fastest single device
(those are candidates too, measured alike, so the winner is the argmin of measured medians).

    result = tune_model(core, "model.onnx", "HETERO:OPENVINO,CPU", budget_s=60)
    result.model.save("tuned.onnx")            # every node's affinity set: manual mode runs it as is
    print(result.report.winner, result.report.baseline("automatic"))

Phases, each given a share of the budget and checking the clock: the automatic plan compiled and run a few
times (which prices one candidate: a budget under it is refused before anything else is spent); the
single devices; the cost model (regions timed alone on each device, the boundary cost, a DP placement at
a few boundary scales); every candidate measured end to end, interleaved in this process (the search: a
cheap first cut); the finalists (the best split, the automatic plan, each single device) saved as the tuned
file would be and timed each alone in its own process (app.measure, decide.py), the split kept only where
it beats the best single device and the automatic plan by more than the measured noise; the winner
validated against a whole-model CPU session; its time per subgraph and the automatic plan's, from the
performance counters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...core import Core, ModelSource
from ...errors import TuneBudgetError, TuneError
from ...graph import Model
from ...placement import device_string
from ..measure import Launch, in_process, in_worker
from ..validate.reference import NO_DOT_FILES, tapped_model
from ..validate.run import check_tolerances, input_sets_of
from ..validate.tolerances import OutputTolerance, Tolerances
from . import costs, decide, plan_costs, regions, runs, search, twins
from .measure import Clock, Timer, block_size, interleaved, median, wall_timer
from .report import (
    AUTOMATIC,
    COST_MODEL,
    SINGLE,
    Candidate,
    TuneReport,
    TuneResult,
    machine_info,
)

#: tune's default tolerances: OpenVINO's float32 arithmetic differs slightly from the CPU EP's; the check asks
#: whether a placement gives what the whole model gives, so the same infinity or NaN on both sides is equal
DEFAULT_TOLERANCES = Tolerances(
    default=OutputTolerance(atol=1e-3, rtol=1e-3), infinities_compare_equal=True, nans_compare_equal=True
)
#: the budget's shares: the cost model may spend until COST_MODEL_END, the in-process measuring until
#: MEASURE_END, the finalists' per-process measuring until FINAL_END (a round only where its estimate fits;
#: the largest share: a process start and a compile per finalist and round), the rest is left for the
#: validation and the counters per subgraph
COST_MODEL_END = 0.35
MEASURE_END = 0.45
FINAL_END = 0.9
#: cost-model placements measured end to end at most
MAX_COST_MODEL = 6
#: inferences of the first timing of a whole candidate (the automatic plan, each single device)
PROBE_RUNS = 5
#: the automatic plan's affinities set by hand, where the automatic plan ran as one session
MANUAL_TWIN = "automatic (manual)"
#: the part of the budget the single devices' first timing may take
WHOLE_SHARE = 0.05
#: inferences that price one candidate (beside its compile)
RUNS_PER_CANDIDATE = 10
#: a placement with more subgraphs must be faster than a simpler one by more than this fraction to win:
#: medians of a shared machine wander about 1-3 % between runs (bench/results, identical placements)
SIMPLER_MARGIN = 0.015
#: samples per candidate after which its median is settled (the measuring stops before its deadline)
ENOUGH_SAMPLES = 300


def tune_model(
    core: Core,
    model: ModelSource,
    device: str,
    *,
    config: Mapping[str, Any] | None = None,
    inputs: Sequence[Mapping[str, np.ndarray]] | None = None,
    shapes: Mapping[str, Sequence[int]] | str | None = None,
    budget_s: float = 60.0,
    seed: int = 0,
    tolerances: Tolerances | None = None,
    progress: Callable[[str, float], None] | None = None,
    timer: Timer | None = None,
    int_ranges: Mapping[str, tuple[int, int]] | None = None,
    now: Callable[[], float] = time.perf_counter,
    launch: Launch | None = None,
) -> TuneResult:
    """Find the fastest placement of ``model`` over the devices of ``device`` (``"HETERO:OPENVINO,CPU"``)
        within ``budget_s`` seconds (+10 %), and validate it.

        ``config``: as compile_model takes it, for every compile; ``inputs``: input sets (feed dicts), the
        first one timed, all validated; else one seeded (``seed``) random set of ``shapes`` ({input: shape} or
        a -data_shape string, needed for dynamic dimensions), integers within ``int_ranges`` ({input: (low,
        high)}) or what the graph bounds them to. ``tolerances``: the validation's (default DEFAULT_TOLERANCES:
        atol 1e-3, rtol 1e-3, the same infinity or NaN on both sides equal). ``progress(text, fraction)`` is
        called as the search goes. ``timer``: what times inferences (measure.Timer; wall_timer by default; tests
        inject one). ``now``: the clock the budget is kept by, in seconds (time.perf_counter; tests inject one
        that moves the same on any machine). ``launch``: what times a finalist alone (app.measure.Launch; by
    default a worker process each, app.measure.in_worker; with an injected ``timer`` and no ``launch``, that
    timer in this process under the labels "candidate:<name>").

        Returns TuneResult: the model (the one ``core.read_model(model)`` gives, so a Model passed in is the
        one changed) with every node's affinity set to the winner's, and the TuneReport. Raises TuneError for a
        device string that is not HETERO with two devices available, TuneBudgetError (a TuneError) for a budget
        under what the search needs (the message gives the number), CompileError where no candidate could be
        measured at all; ValidationError for inputs that do not fit, a dynamic dimension
        without a shape, or tolerances naming outputs the model lacks; as compile_model for a model no device
        list can compile automatically.
    """
    if not isinstance(core, Core):
        raise TuneError(f"core must be a hetero_cli.Core, not {type(core).__name__}")
    clock = Clock(budget_s, now)
    model = core.read_model(model)
    tolerances = tolerances if tolerances is not None else DEFAULT_TOLERANCES
    check_tolerances(model, tolerances)
    feeds_list = input_sets_of(model, inputs, shapes, seed, int_ranges)
    devices = _devices(core, device)
    if not (isinstance(budget_s, int | float) and math.isfinite(budget_s) and budget_s > 0):
        raise TuneBudgetError(f"the budget must be a positive number of seconds, not {budget_s!r}")
    search_ = _Search(core, model, device, devices, config, feeds_list, clock, seed, timer, progress)
    search_.launch = launch or (in_process(timer, "candidate:") if timer is not None else in_worker)
    with _warnings_as_notes(search_.report.notes, lambda: search_.phase):
        return search_.run(tolerances)


@contextlib.contextmanager
def _warnings_as_notes(notes: list[str], phase: Callable[[], str]) -> Iterator[None]:
    """While the search runs, hetero_cli's log records go to ``notes`` (each text once) instead of the
    log, each prefixed with the ``phase()`` it came in and cut to 240 characters: the compiles of regions
    and candidates warn about what ORT placed elsewhere, dozens of times, which the report keeps and a
    progress bar would be broken by. Those of the regions' compiles are counted in one note instead."""
    seen: set[str] = set()
    regions_ = [0]

    def keep(record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.levelno < logging.WARNING or text in seen:
            return False
        seen.add(text)
        if phase().startswith(costs.REGION_PHASE):
            regions_[0] += 1
        else:
            notes.append(f"{phase()}: {text}"[:240])
        return False

    logger = logging.getLogger("hetero_cli")
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)
        if regions_[0]:
            notes.append(
                f"{regions_[0]} region session(s) ran part of their nodes on another execution provider (ORT's "
                "own placement inside the session): their times include it"
            )


def _devices(core: Core, device: str) -> list[str]:
    """The available devices of a HETERO device string, priority order; TuneError for anything else or
    fewer than two of them."""
    if not device_string.is_hetero(device):
        raise TuneError(
            f"tune places nodes over several devices: give HETERO:<device>,<device>,... (e.g. "
            f"HETERO:{','.join(core.available_devices)}), not {device!r}"
        )
    priorities = core.get_property("HETERO", "MULTI_DEVICE_PRIORITIES") or None
    request = device_string.parse(device, priorities)
    available = [d.name for d in device_string.available_priorities(request)]
    if len(available) < 2:
        raise TuneError(
            f"tune needs at least two available devices to choose between: {device} gives "
            f"{', '.join(available)}; available here: {', '.join(core.available_devices)}"
        )
    return available


def _on_cpu(core: Core, model: Model, config: Mapping[str, Any]) -> Any:
    """``model`` compiled on the CPU device with the tune's ``config`` and no .dot files: the reference the
    candidates are compared with, and the run that gives the regions' input values."""
    return core.compile_model(model, "CPU", {**config, **NO_DOT_FILES})


def _check_budget(budget_s: float, compile_s: float, run_ms: float) -> None:
    """TuneBudgetError where ``budget_s`` is under three candidates' price (the automatic plan, one other, the
    validation), one candidate being a compile of ``compile_s`` and RUNS_PER_CANDIDATE runs of ``run_ms``
    (the automatic plan's): the message gives the budget to ask for instead."""
    one = compile_s + RUNS_PER_CANDIDATE * run_ms / 1e3
    least = 3 * one
    if budget_s < least:
        raise TuneBudgetError(
            f"a budget of {budget_s:g} s is under what a tune needs here: one candidate takes about {one:.2f} s "
            f"(a compile of {compile_s:.2f} s and {RUNS_PER_CANDIDATE} runs of {run_ms:.1f} ms) and a tune at "
            f"least three; give a budget of at least {math.ceil(least)} s (about {math.ceil(12 * one)} s for "
            "the cost model's search)"
        )


class _Search:
    """One tune's state: the model, devices, inputs, clock, candidates and their compiled models."""

    def __init__(
        self,
        core: Core,
        model: Model,
        device: str,
        devices: list[str],
        config: Mapping[str, Any] | None,
        feeds_list: list[dict[str, np.ndarray]],
        clock: Clock,
        seed: int,
        timer: Timer | None,
        progress: Callable[[str, float], None] | None,
    ) -> None:
        self.core, self.model, self.device, self.devices = core, model, device, devices
        self.config = dict(config or {})
        self.feeds_list, self.feeds = feeds_list, feeds_list[0]
        self.clock, self.seed = clock, seed
        self.rng = random.Random(seed)
        self.timer: Timer = timer or wall_timer
        self._progress = progress
        machine = machine_info({d: core.get_property(d, "EXECUTION_PROVIDER") for d in devices})
        self.report = TuneReport(device, clock.budget_s, seed, machine, config=dict(self.config))
        self.compiled: dict[str, Any] = {}
        self.compile_s, self.run_ms, self.phase = 0.0, 0.0, "starting"
        self.twin: Candidate | None = None
        self.costs: plan_costs.RegionCosts | None = None  # the cost model's tables, where it ran
        self.launch: Launch = in_worker

    def tell(self, text: str) -> None:
        """Report progress: ``text`` and the part of the budget spent."""
        self.phase = text
        if self._progress is not None:
            self._progress(text, self.clock.fraction())

    def note(self, text: str) -> None:
        self.report.notes.append(text)

    # --- the phases ------------------------------------------------------------------------------------

    def run(self, tolerances: Tolerances) -> TuneResult:
        """Every phase in turn; returns the result with the winner's affinities set on the model."""
        given = self.model.affinities()
        if given:
            self.note(
                f"the model's own affinities ({len(given)} nodes) were cleared: the automatic plan is the baseline"
            )
            runs.clear_affinities(self.model)
        try:
            self.automatic()
        except BaseException:
            self.model.set_affinities(given)  # a refused tune leaves the model as it was given
            raise
        self.singles()
        self.cost_model()
        self.measure()
        winner = self.choose(tolerances)
        self.per_subgraph(winner)
        automatic = self.report.candidate(AUTOMATIC).affinities
        runs.keep(self.model, self.all_nodes(winner.affinities), automatic, self.config, winner.concurrency)
        self.report.winner = winner.name
        self.report.elapsed_s = self.clock.elapsed()
        self.tell("done")
        return TuneResult(self.model, self.report)

    def automatic(self) -> None:
        """Compile the automatic plan and time a few runs: the price of one candidate, against which the
        budget is checked (TuneBudgetError, before anything else is spent)."""
        self.tell("compiling the automatic plan")
        began = self.clock.elapsed()
        compiled = self.core.compile_model(self.model, self.device, self.config)
        request = compiled.create_infer_request()
        request.infer(self.feeds)
        self.compile_s = self.clock.elapsed() - began
        self.run_ms = (
            median(self.timer("probe:automatic", lambda: request.infer(self.feeds), PROBE_RUNS)) or 0.0
        )
        _check_budget(self.clock.budget_s, self.compile_s, self.run_ms)
        plan = compiled.plan
        auto = Candidate(
            AUTOMATIC, AUTOMATIC, self.all_nodes(dict(plan.affinities)), len(plan.subgraphs), plan.devices
        )
        self.report.candidates.append(auto)
        self.compiled[AUTOMATIC] = (compiled, request)
        if compiled.one_session:
            self.note(
                f"the automatic plan ({len(plan.subgraphs)} subgraphs) runs as one ONNX Runtime session; its "
                f"affinities as the tuned model keeps them are measured too, as {MANUAL_TWIN!r}"
            )
            self.twin = Candidate(MANUAL_TWIN, AUTOMATIC, dict(auto.affinities))

    def singles(self) -> None:
        """A candidate per device that supports every node (CPU always)."""
        self.supported: dict[str, frozenset[str]] = {}
        self.whole_ms: dict[str, float] = {}
        names = [n.friendly_name for n in self.model.get_ops()]
        for d in self.devices:
            self.tell(f"querying {d}")
            self.supported[d] = frozenset(self.core.query_model(self.model, d, self.config))
            if d == "CPU" or self.supported[d].issuperset(names):
                c = Candidate(d, SINGLE, dict.fromkeys(names, d), 1, [d])
                self.report.candidates.append(c)
                self.prepare(c, COST_MODEL_END * self.clock.budget_s)
        if self.twin is not None:
            self.report.candidates.append(self.twin)
        self.whole_times()

    def whole_times(self) -> None:
        """A first end-to-end median of each single device, interleaved in blocks for up to WHOLE_SHARE
        of the budget: what calibrates the regions' times (search.calibrate)."""
        timed = {
            name: (lambda r=request: r.infer(self.feeds))
            for name, (_, request) in self.compiled.items()
            if self.report.candidate(name).kind == SINGLE
        }
        if not timed:
            return
        self.tell("timing the single devices")
        samples, _ = interleaved(
            lambda label, run, count: self.timer(f"probe:{label}", run, count),
            timed,
            block=block_size(self.run_ms, target_ms=20.0),
            clock=self.clock,
            until=self.clock.elapsed() + WHOLE_SHARE * self.clock.budget_s,
            rng=self.rng,
            min_rounds=3,
            max_rounds=30,
            enough=30,
        )
        self.whole_ms = {name: m for name, got in samples.items() if (m := median(got)) is not None}

    def cost_model(self) -> None:
        """Regions timed on each device, the boundary cost, and the DP's placements as candidates."""
        until = COST_MODEL_END * self.clock.budget_s
        if self.clock.left(until) < 3 * self.compile_s:
            self.note(
                f"no time for the cost model in {self.clock.budget_s:g} s: only the baselines were measured"
            )
            return
        try:
            cut = regions.cut_regions(self.model, self.supported, self.devices)
        except Exception as exc:  # a shortcut only: the tune goes on without it, noted
            self.note(f"no cost model: {costs.one_line(exc)}")
            return
        if len(cut) < 2 and all(len(r.devices) < 2 for r in cut):
            self.note("one region on one device: nothing for the cost model to choose")
            return
        tensors = list(dict.fromkeys(t for r in cut for t in (*r.inputs, *r.outputs)))
        self.tell("the reference run")
        tapped = _on_cpu(self.core, tapped_model(self.model, tensors), self.config)
        values = {**self.feeds, **tapped(self.feeds)}
        self.tell("the boundary cost")
        boundary, medians = costs.measure_boundary(
            self.core,
            self.device,
            self.devices,
            timer=self.timer,
            clock=self.clock,
            until=self.clock.elapsed() + 0.1 * self.clock.left(until),
            rng=self.rng,
        )
        self.report.boundary = {**dataclasses.asdict(boundary), **medians}  # subgraph_ms, ms_per_mb
        table = costs.time_regions(
            self.core,
            self.model,
            cut,
            values,
            config=self.config,
            timer=self.timer,
            clock=self.clock,
            until=until,
            rng=self.rng,
            progress=self.tell,
        )
        self.report.notes += table.failures
        scaled, factors = search.calibrate(table.times, self.whole_ms)
        if factors:
            self.note(
                "region times scaled to the whole model's measured time: "
                + ", ".join(f"{d} x{f:.2f}" for d, f in factors.items())
            )
        self.report.regions = costs.region_rows(cut, table, scaled)
        nbytes = {t: int(getattr(v, "nbytes", 0)) for t, v in values.items()}
        self.costs = plan_costs.RegionCosts(cut, scaled, boundary, nbytes)  # plans' predictions read it
        if table.estimated:
            self.note(
                f"{len(table.estimated)} of {len(cut)} regions were estimated per node: the budget ran out"
            )
        sizes = costs.cut_bytes(regions.cut_tensors(self.model, cut), values)
        found = search.proposals(table.times, scaled, sizes, boundary, self.devices)
        if not found:
            self.note("the cost model prefers a single device at every boundary scale")
        placed = [(regions.region_affinities(self.model, cut, p.devices), p.predicted_ms) for p in found]
        best = plan_costs.ranked(
            self.core, self.model, self.device, self.config, placed, self.costs, MAX_COST_MODEL
        )
        for k, (affinities, predicted) in enumerate(best, 1):
            self.report.candidates.append(
                Candidate(f"{COST_MODEL}-{k}", COST_MODEL, affinities, predicted_ms=predicted)
            )

    def measure(self) -> None:
        """Compile every candidate not compiled yet (failures recorded, dropped) and measure them all end
        to end, interleaved, until MEASURE_END of the budget."""
        until = MEASURE_END * self.clock.budget_s
        self.report.candidates += twins.branch_twins(
            self.core, self.model, self.device, self.config, self.report.candidates, self.note, self.costs
        )
        for c in self.report.candidates:
            if c.name not in self.compiled and c.error is None:
                self.prepare(c, until)
        timed = {
            name: (lambda r=request: r.infer(self.feeds)) for name, (_, request) in self.compiled.items()
        }
        self.tell("measuring the candidates")
        samples, errors = interleaved(
            lambda label, run, count: self.timer(f"candidate:{label}", run, count),
            timed,
            block=block_size(self.run_ms),
            clock=self.clock,
            until=until,
            rng=self.rng,
            min_rounds=3,
            enough=ENOUGH_SAMPLES,
            on_round=lambda _: self.tell("measuring the candidates"),
        )
        for c in self.report.candidates:
            if c.name in errors:
                c.error = errors[c.name]
            elif c.name in samples:
                c.median_ms, c.samples = median(samples[c.name]), len(samples[c.name])

    def prepare(self, c: Candidate, until: float) -> None:
        """Compile candidate ``c`` (runs.compile_with) and run it once (kept in ``compiled``), if the clock
        leaves time before ``until``; a failure or no time is recorded as its error."""
        if self.clock.left(until) < self.compile_s + 2 * self.run_ms / 1e3:
            c.error = "not measured: the budget ran out"
            return
        self.tell(f"compiling {c.name}")
        try:
            config = c.config(self.config)  # its HETERO_CONCURRENCY where it has one (twins.branch_twins)
            compiled = runs.compile_with(
                self.core, self.model, self.device, config, c.affinities, automatic=c.kind == AUTOMATIC
            )
            request = compiled.create_infer_request()
            request.infer(dict(self.feeds))
        except Exception as exc:  # a candidate that fails is recorded and dropped, not the tune
            c.error = costs.one_line(exc)
            return
        c.subgraphs, c.devices = len(compiled.plan.subgraphs), compiled.plan.devices
        self.compiled[c.name] = (compiled, request)

    def choose(self, tolerances: Tolerances) -> Candidate:
        """decide.final's order (the finalists timed each alone in its own process until FINAL_END of the
        budget), then the first candidate in that order whose outputs pass against the whole-model CPU
        session on every input set; one that fails is marked and the next tried. None passing: the first."""
        on = decide.Finalists(self.model, self.device, self.config, self.feeds, self.launch, self.seed)
        until, ranked = FINAL_END * self.clock.budget_s, self.report.ranked(SIMPLER_MARGIN)
        ranked = decide.final(
            self.report, ranked, on, self.clock, until, self.compile_s, self.tell, SIMPLER_MARGIN
        )
        # the whole model with the candidates' config: a dynamically quantized model's outputs depend on the
        # thread count (ddddocr's common_old: 1.12 on 2 elements between 1 and 2 threads)
        self.tell("the whole model on CPU (the validation's reference)")
        reference = _on_cpu(self.core, self.model, self.config)
        want = [{n: reference(f)[n] for n in (o.name for o in self.model.outputs)} for f in self.feeds_list]
        for c in ranked:
            self.tell(f"validating {c.name}")
            compiled, _ = self.compiled[c.name]
            self.report.validation = runs.validate(c.name, compiled, self.feeds_list, want, tolerances)
            if self.report.validation.passed:
                return c
            self.note(f"{c.name} failed validation: {self.report.validation.first_failure}")
        self.note("no candidate passed validation: the fastest is kept")
        return ranked[0]

    def per_subgraph(self, winner: Candidate) -> None:
        """The winner's and the automatic plan's time per subgraph from the performance counters (a
        profiled compile each, THROUGHPUT so that every subgraph is a session of its own), if time is left."""
        for key, c in (("winner", winner), ("automatic", self.report.candidate(AUTOMATIC))):
            if self.clock.left() < self.compile_s + runs.PROFILED_RUNS * self.run_ms / 1e3:
                self.note(f"no time left for the counters per subgraph of the {key}")
                continue
            self.tell(f"counters of the {key}")
            try:
                affinities = None if c.name == AUTOMATIC else c.affinities
                self.report.per_subgraph[key] = runs.subgraph_times(
                    self.core, self.model, self.device, c.config(self.config), affinities, self.feeds
                )
            except Exception as exc:  # counters only explain the winner: the tune stands, the note says why
                self.note(f"the counters of the {key} failed: {costs.one_line(exc)}")

    # --- helpers ---------------------------------------------------------------------------------------

    def all_nodes(self, affinities: Mapping[str, str]) -> dict[str, str]:
        """``affinities`` completed to every node (regions.complete_affinities)."""
        return regions.complete_affinities(self.model, affinities, self.devices[-1])
