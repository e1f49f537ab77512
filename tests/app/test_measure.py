"""The one measuring method (hetero_cli.app.measure, issue 30): a worker process per runtime and round,
the processes taking turns to time blocks, comparisons block by block with their noise; the rule by which
tune keeps a split; and that tune and bench both time through the same function. No speed is asserted: timers answer from tables, and the
worker's round trip checks that samples come back, not what they are."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from support.helpers import needs_openvino

import hetero_cli as hc
from hetero_cli.app.measure import (
    Job,
    MeasureError,
    Measurement,
    RuntimeSpec,
    in_process,
    in_worker,
    measure_runtimes,
    method,
    paired,
)
from hetero_cli.app.measure.builders import HETERO
from hetero_cli.app.measure.paired import median_interval
from hetero_cli.app.tune import decide, tune_model
from hetero_cli.app.tune.measure import Clock
from hetero_cli.app.tune.report import AUTOMATIC, COST_MODEL, SINGLE, Candidate, TuneReport
from hetero_cli.app.tune.runs import MEASURED_CONFIG_KEY
from hetero_cli.cli.setup import DEFAULT_MODEL

ROOT = Path(__file__).resolve().parents[2]
DIGITS_FEEDS = {"image": np.random.default_rng(0).random((1, 1, 32, 32), dtype=np.float32)}
BUILDER = f"{__name__}:build_noop"


def build_noop(feeds, name="x"):
    """A runtime that does nothing (for in_process tests)."""
    del feeds, name
    return lambda: None


def sequence_timer(table):
    """A timer answering, per label, the next value of ``table[label]`` for every run of a call (a block)."""
    left = {label: list(values) for label, values in table.items()}

    def timer(label, run, count):
        run()
        return [left[label].pop(0)] * count

    return timer


def test_a_worker_process_builds_the_default_model_and_times_its_blocks():
    spec = RuntimeSpec(HETERO, {"path": str(DEFAULT_MODEL), "device": "CPU"})
    found = measure_runtimes({"CPU": spec}, DIGITS_FEEDS, rounds=2, blocks=3, warmup=1, runs=7)
    assert found["CPU"].error is None
    assert len(found["CPU"].process_ms) == 2 and found["CPU"].samples == 2 * 3 * 7
    assert [len(row) for row in found["CPU"].block_ms] == [3, 3]
    assert all(ms > 0 for row in found["CPU"].block_ms for ms in row)


def test_what_a_runtime_prints_does_not_reach_the_workers_answers(monkeypatch):
    """The worker answers on its own channel: a builder printing to stdout (Python's and the C library's
    file descriptor 1, as an execution provider does) leaves its answers whole."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))  # the worker imports the builder as we would
    spec = RuntimeSpec("support.measure_builders:noisy", {})
    found = measure_runtimes({"noisy": spec}, {}, rounds=1, blocks=2, warmup=1, runs=3)
    assert found["noisy"].error is None and found["noisy"].samples == 6


def test_a_runtime_failing_in_its_worker_is_recorded_by_name_and_not_launched_again(tmp_path):
    spec = RuntimeSpec(HETERO, {"path": str(tmp_path / "none.onnx"), "device": "CPU"})
    launched = []

    def counting(job):
        launched.append(job.label)
        return in_worker(job)

    found = measure_runtimes({"missing": spec}, DIGITS_FEEDS, rounds=3, blocks=2, launch=counting)
    assert launched == ["missing"]
    assert found["missing"].median_ms is None
    assert found["missing"].error.startswith("missing: ModelError: ")


def test_a_runtime_failing_in_a_block_keeps_its_error_and_the_others_go_on():
    def timer(label, run, count):
        if label == "b":
            raise RuntimeError("device lost\nmore")
        return [1.0] * count

    spec = RuntimeSpec(BUILDER)
    found = measure_runtimes({"a": spec, "b": spec}, {}, rounds=2, blocks=3, launch=in_process(timer))
    assert found["b"].error == "b: RuntimeError: device lost" and found["b"].process_ms == []
    assert found["b"].block_ms == [[None] * 3, [None] * 3]
    assert found["a"].process_ms == [1.0, 1.0] and found["a"].block_ms == [[1.0] * 3, [1.0] * 3]


def test_the_figure_is_the_median_of_per_round_medians_and_the_noise_their_spread():
    timer = sequence_timer({"a": [1.0, 1.0, 1.2, 1.2, 1.1, 1.1], "b": [2.0] * 6})
    spec = RuntimeSpec(BUILDER)
    found = measure_runtimes({"a": spec, "b": spec}, {}, rounds=3, blocks=2, launch=in_process(timer))
    assert found["a"].process_ms == [1.0, 1.2, 1.1]
    assert found["a"].block_ms == [[1.0, 1.0], [1.2, 1.2], [1.1, 1.1]]
    assert found["a"].median_ms == 1.1
    assert found["a"].noise == pytest.approx(0.2 / 1.1)
    assert found["b"].noise == 0.0


def test_rounds_launch_every_runtime_and_turns_alternate_them_in_a_seeded_order():
    def order_of(seed):
        launched, turns = [], []

        class Recorder:
            def __init__(self, label):
                self.label = label

            def ready(self):
                pass

            def block(self):
                turns.append(self.label)
                return [1.0]

            def close(self):
                pass

        def launch(job):
            launched.append(job.label)
            return Recorder(job.label)

        specs = {label: RuntimeSpec(BUILDER) for label in "abcd"}
        measure_runtimes(specs, {}, rounds=2, blocks=3, seed=seed, launch=launch)
        return [launched[i : i + 4] for i in (0, 4)], [turns[i : i + 4] for i in range(0, 24, 4)]

    launched, turns = order_of(5)
    assert all(sorted(r) == list("abcd") for r in launched + turns)
    assert (launched, turns) == order_of(5)
    assert len({tuple(t) for t in turns}) > 1


def test_in_process_reports_a_failing_builder_as_a_measure_error():
    with pytest.raises(MeasureError, match=r"^x: no builder"):
        in_process(lambda *_: [1.0])(Job("x", RuntimeSpec("no.such.module:build"), {}, {}, 0, 1))


def _measured(label, rounds):
    return Measurement(label, [float(np.median(r)) for r in rounds], block_ms=[list(r) for r in rounds])


def test_paired_compares_the_blocks_of_one_turn_and_says_its_noise():
    """The machine's speed moving between turns moves both runtimes' blocks: the ratio stays, the
    medians of each would not tell it."""
    drift = [1.0, 1.6, 0.8, 1.3, 1.1, 0.9, 1.5, 1.2, 1.0]
    a = _measured("a", [[x for x in drift]])
    b = _measured("b", [[x * 1.25 for x in drift]])
    vs = paired(a, b)
    assert vs.ratio == pytest.approx(0.8) and vs.blocks == 9 and vs.noise == pytest.approx(0.0)
    assert paired(b, [a, a]).ratio == pytest.approx(1.25)


def test_paired_noise_is_the_interval_of_the_median_or_half_the_rounds_spread():
    a = _measured("a", [[1.0] * 9, [1.0] * 9])
    b = _measured("b", [[1.0] * 9, [1.1] * 9])
    vs = paired(a, b)
    assert vs.rounds == (1.0, pytest.approx(1 / 1.1))
    assert vs.noise == pytest.approx((1.0 - 1 / 1.1) / 2 / vs.ratio)
    ratios = sorted([0.9, 0.95, 1.0, 1.0, 1.0, 1.0, 1.0, 1.05, 1.1, 1.2])
    assert median_interval(ratios) == pytest.approx(1.1 - 0.9)


def test_paired_skips_turns_a_runtime_missed_and_answers_none_without_any():
    a = _measured("a", [[1.0, 2.0, 3.0]])
    b = Measurement("b", [2.0], block_ms=[[None, 4.0, None]])
    assert paired(a, b).ratio == 0.5 and paired(a, b).blocks == 1
    assert paired(a, Measurement("c", block_ms=[[None] * 3])) is None


def _finalist(name, kind, blocks, subgraphs=1, rounds=2):
    c = Candidate(name, kind, {}, subgraphs=subgraphs)
    c.block_ms = [list(blocks) for _ in range(rounds)]
    c.process_ms = [float(np.median(blocks))] * rounds
    c.final_ms = c.process_ms[0]
    return c


DRIFT = [1.0, 1.3, 0.9, 1.1, 1.2, 0.95, 1.05, 1.15, 1.0, 0.9, 1.25, 1.1]


def _blocks(ms, wobble=0.0):
    """Blocks of a runtime of ``ms`` on a machine drifting as DRIFT, each block off by up to ``wobble``."""
    return [ms * d * (1 + wobble * ((-1) ** k) * (k % 3) / 2) for k, d in enumerate(DRIFT)]


def test_a_split_within_the_noise_of_a_single_device_saves_the_single_device():
    split = _finalist("cost-model-1", COST_MODEL, _blocks(9.9, 0.04), 2)
    single = _finalist("OPENVINO", SINGLE, _blocks(10.0))
    auto = _finalist(AUTOMATIC, AUTOMATIC, _blocks(12.0), 2)
    winner, why, noise, best = decide.decide([split, auto, single, _finalist("CPU", SINGLE, _blocks(20.0))])
    assert winner is single and best == "OPENVINO"
    assert noise > 0.01
    assert "cost-model-1" in why and "does not beat" in why


def test_a_split_beyond_the_noise_of_every_single_device_and_the_automatic_plan_is_kept():
    split = _finalist("cost-model-1", COST_MODEL, _blocks(8.0, 0.01), 2)
    single = _finalist("OPENVINO", SINGLE, _blocks(10.0))
    auto = _finalist(AUTOMATIC, AUTOMATIC, _blocks(9.5), 2)
    winner, why, _, _ = decide.decide([split, auto, single])
    assert winner is split and why.startswith("the split cost-model-1")


def test_a_split_that_does_not_beat_the_automatic_plan_saves_the_automatic_plan_where_it_beats_the_singles():
    split = _finalist("cost-model-1", COST_MODEL, _blocks(8.0, 0.01), 2)
    auto = _finalist(AUTOMATIC, AUTOMATIC, _blocks(8.0), 2)
    single = _finalist("CPU", SINGLE, _blocks(10.0))
    winner, why, _, _ = decide.decide([split, auto, single])
    assert winner is auto and "the automatic plan" in why


def test_a_split_timed_in_one_round_only_is_not_kept():
    """One round's blocks cannot show a process's own luck: the split that wins by far is not kept."""
    split = _finalist("cost-model-1", COST_MODEL, _blocks(8.0, 0.01), 2, rounds=1)
    single = _finalist("OPENVINO", SINGLE, _blocks(10.0), rounds=1)
    winner, why, _, _ = decide.decide([split, single])
    assert winner is single and "in one round only" in why


def test_the_fastest_single_device_is_found_block_by_block_not_by_medians_of_other_turns():
    """Two singles whose medians mislead (one timed its blocks while the machine was slow): block by block
    the other is slower."""
    one = _finalist("CPU", SINGLE, _blocks(10.0))
    other = _finalist("OPENVINO", SINGLE, _blocks(10.5, 0.04))
    other.final_ms = 9.0
    winner, why, noise, _ = decide.decide([other, one])
    assert winner is one and why.startswith("CPU is the fastest single device")
    assert noise > decide.MIN_NOISE  # the singles' own comparison: its noise is part of the one reported


def test_the_noise_has_a_floor():
    split = _finalist("cost-model-1", COST_MODEL, _blocks(9.95), 2)
    single = _finalist("CPU", SINGLE, _blocks(10.0))
    winner, _, noise, _ = decide.decide([split, single])
    assert noise == decide.MIN_NOISE and winner is single


def _slow_finalists(ms=80.0):
    return [
        _finalist(name, kind, [ms] * 12)
        for name, kind in ((AUTOMATIC, AUTOMATIC), ("CPU", SINGLE), ("OPENVINO", SINGLE))
    ]


def test_a_round_is_cut_to_the_blocks_the_budget_leaves():
    """blocks_that_fit: the most blocks whose round fits, fewer for less time, none under LEAST_BLOCKS."""
    finalists = _slow_finalists()
    full = decide.round_s(finalists, 1.0, method.BLOCKS, workers=True)
    least = decide.round_s(finalists, 1.0, decide.LEAST_BLOCKS, workers=True)
    assert least < full
    assert decide.blocks_that_fit(finalists, 1.0, full, workers=True) == method.BLOCKS
    middle = decide.blocks_that_fit(finalists, 1.0, (full + least) / 2, workers=True)
    assert decide.LEAST_BLOCKS <= middle < method.BLOCKS
    assert decide.round_s(finalists, 1.0, middle, workers=True) <= (full + least) / 2
    assert decide.round_s(finalists, 1.0, middle + 1, workers=True) > (full + least) / 2
    assert decide.blocks_that_fit(finalists, 1.0, least * 0.99, workers=True) == 0


def test_slow_finalists_in_a_short_budget_are_timed_in_fewer_blocks_not_ranked_in_process(monkeypatch):
    """final(): where a round of method.BLOCKS does not fit before the deadline, the finalists are still
    timed each in its own process, in fewer blocks, and a note says so."""
    report = TuneReport("HETERO:OPENVINO,CPU", 30.0, 0, {})
    report.candidates = _slow_finalists()
    for c in report.candidates:
        c.median_ms, c.samples = 80.0, 12
    asked = {}

    def measured(on, contenders, *, automatic, next_blocks, blocks, on_process=None):
        asked["blocks"] = blocks
        for c in contenders:  # as measure_finalists sets them
            c.block_ms = [[80.0] * blocks]
            c.process_ms, c.final_ms = [80.0], 80.0

    monkeypatch.setattr(decide, "measure_finalists", measured)
    finalists = decide.finalists(report, 0.015)
    full = decide.round_s(finalists, 1.0, method.BLOCKS, workers=True)
    least = decide.round_s(finalists, 1.0, decide.LEAST_BLOCKS, workers=True)
    clock = Clock(30.0, now=lambda: 0.0)
    on = decide.Finalists(None, "HETERO:OPENVINO,CPU", {}, {}, None, 0)
    order = decide.final(
        report, report.ranked(0.015), on, clock, (full + least) / 2, 1.0, lambda _: None, 0.015
    )
    assert decide.LEAST_BLOCKS <= asked["blocks"] < method.BLOCKS
    assert any(f"rounds of {asked['blocks']} blocks" in note for note in report.notes), report.notes
    assert report.decision and "in-process ranking" not in report.decision and order[0].name == "CPU"


def _bench_measure():
    """bench/measure.py, imported as bench/run.py imports it."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("measure")
    finally:
        sys.path.remove(str(ROOT / "bench"))


@needs_openvino
def test_tune_and_bench_both_time_through_the_one_measuring_function(monkeypatch):
    original = method.measure_runtimes
    callers = []

    def spy(specs, feeds, **kwargs):
        callers.append(sorted(specs))
        kwargs["launch"] = kwargs.get("launch") or in_process(lambda label, run, count: [1.0] * count)
        return original(specs, feeds, **kwargs)

    monkeypatch.setattr(method, "measure_runtimes", spy)
    table = {"candidate:CPU": 0.5}
    tune_model(
        hc.Core(),
        str(DEFAULT_MODEL),
        "HETERO:OPENVINO,CPU",
        shapes={"image": (1, 1, 32, 32)},
        budget_s=30.0,
        timer=lambda label, run, count: [table.get(label, 1.0)] * count,
    )
    assert callers and "CPU" in callers[0] and AUTOMATIC in callers[0]
    bench_measure = _bench_measure()
    # in this process the builder imports as in bench/run.py's
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    found, _ = bench_measure.per_process(
        {"ort_cpu": bench_measure.spec("ort_cpu", DEFAULT_MODEL)}, DIGITS_FEEDS, rounds=1, guesses={}
    )
    assert callers[-1] == ["ort_cpu"] and found["ort_cpu"].process_ms == [1.0]


@needs_openvino
def test_the_saved_model_records_the_configuration_it_was_measured_with(tmp_path):
    config = {"CPU": {"INFERENCE_NUM_THREADS": 1}}
    result = tune_model(
        hc.Core(),
        str(DEFAULT_MODEL),
        "HETERO:OPENVINO,CPU",
        config=config,
        shapes={"image": (1, 1, 32, 32)},
        budget_s=30.0,
        timer=lambda label, run, count: [1.0] * count,
    )
    assert result.report.config == config
    result.model.save(tmp_path / "tuned.onnx")
    saved = hc.Core().read_model(tmp_path / "tuned.onnx")
    assert json.loads(saved.metadata_props[MEASURED_CONFIG_KEY]) == config


def test_rounds_after_the_least_time_the_blocks_next_blocks_gives_and_0_ends_them():
    asked = []

    def next_blocks(done):
        asked.append(done)
        return {1: 2, 2: 0}[done]

    timer = sequence_timer({"a": [1.0] * 5, "b": [2.0] * 5})
    spec = RuntimeSpec(BUILDER)
    found = measure_runtimes(
        {"a": spec, "b": spec},
        {},
        rounds=4,
        min_rounds=1,
        blocks=3,
        next_blocks=next_blocks,
        launch=in_process(timer),
    )
    assert asked == [1, 2]
    assert [len(row) for row in found["a"].block_ms] == [3, 2] and len(found["b"].process_ms) == 2


@pytest.mark.parametrize(("pace", "second"), [(1.0, "fewer"), (3.0, "none")])
def test_the_round_after_the_first_gets_the_blocks_left_at_the_first_rounds_pace(monkeypatch, pace, second):
    """final(): where the time left after the first round holds no full round but a shorter one (at the
    pace the first took against its estimate), the finalists get that shorter round, which a split needs
    (decide keeps one timed in SPLIT_ROUNDS rounds only); where not even LEAST_BLOCKS fit, none."""
    report = TuneReport("HETERO:OPENVINO,CPU", 30.0, 0, {})
    report.candidates = _slow_finalists()
    for c in report.candidates:
        c.median_ms, c.samples = 80.0, 12
    finalists = decide.finalists(report, 0.015)
    full = decide.round_s(finalists, 1.0, method.BLOCKS, workers=True)
    least = decide.round_s(finalists, 1.0, decide.LEAST_BLOCKS, workers=True)
    now = [0.0]
    clock = Clock(30.0, now=lambda: now[0])
    rounds = []

    def measured(on, contenders, *, automatic, next_blocks, blocks, on_process=None):
        sizes = [blocks]
        now[0] += pace * decide.round_s(contenders, 1.0, blocks, workers=True)  # the first round
        more = next_blocks(1)
        if more:
            sizes.append(more)
        rounds.append(sizes)
        for c in contenders:
            c.block_ms = [[80.0] * b for b in sizes]
            c.process_ms, c.final_ms = [80.0] * len(sizes), 80.0

    monkeypatch.setattr(decide, "measure_finalists", measured)
    until = (
        pace * full + (full + least) / 2
    )  # after a first round at this pace: room for a shorter one at 1.0
    on = decide.Finalists(None, "HETERO:OPENVINO,CPU", {}, {}, None, 0)
    decide.final(report, report.ranked(0.015), on, clock, until, 1.0, lambda _: None, 0.015)
    (sizes,) = rounds
    if second == "fewer":
        assert sizes[0] == method.BLOCKS and decide.LEAST_BLOCKS <= sizes[1] < method.BLOCKS
        assert any(f"the last round timed the finalists in {sizes[1]} blocks" in n for n in report.notes)
    else:
        assert sizes == [method.BLOCKS]
        assert not any("the last round" in n for n in report.notes)
