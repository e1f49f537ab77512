"""The one measuring method (hetero_cli.app.measure, issue 30): a worker process per runtime and round,
medians of per-process medians and their noise; the rule by which tune keeps a split; and that tune and
bench both time through the same function. No speed is asserted: timers answer from tables, and the
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
    RuntimeSpec,
    in_process,
    in_worker,
    measure_runtimes,
    method,
)
from hetero_cli.app.measure.builders import HETERO
from hetero_cli.app.tune import decide, tune_model
from hetero_cli.app.tune.report import AUTOMATIC, COST_MODEL, SINGLE, Candidate
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
    """A timer answering, per label, the next value of ``table[label]`` for every run of a call."""
    left = {label: list(values) for label, values in table.items()}

    def timer(label, run, count):
        run()
        return [left[label].pop(0)] * count

    return timer


def test_a_worker_process_builds_the_default_model_and_returns_its_samples():
    spec = RuntimeSpec(HETERO, {"path": str(DEFAULT_MODEL), "device": "CPU"})
    found = measure_runtimes({"CPU": spec}, DIGITS_FEEDS, rounds=2, warmup=1, runs=7)
    assert found["CPU"].error is None
    assert len(found["CPU"].process_ms) == 2 and found["CPU"].samples == 14
    assert all(ms > 0 for ms in found["CPU"].process_ms)


def test_a_runtime_failing_in_its_worker_is_recorded_by_name_and_not_launched_again(tmp_path):
    spec = RuntimeSpec(HETERO, {"path": str(tmp_path / "none.onnx"), "device": "CPU"})
    launched = []

    def counting(job):
        launched.append(job.label)
        return in_worker(job)

    found = measure_runtimes({"missing": spec}, DIGITS_FEEDS, rounds=3, launch=counting)
    assert launched == ["missing"]
    assert found["missing"].median_ms is None
    assert found["missing"].error.startswith("missing: ModelError: ")


def test_the_figure_is_the_median_of_per_process_medians_and_the_noise_their_spread():
    timer = sequence_timer({"a": [1.0, 1.2, 1.1], "b": [2.0, 2.0, 2.0]})
    spec = RuntimeSpec(BUILDER)
    found = measure_runtimes({"a": spec, "b": spec}, {}, rounds=3, launch=in_process(timer))
    assert found["a"].process_ms == [1.0, 1.2, 1.1]
    assert found["a"].median_ms == 1.1
    assert found["a"].noise == pytest.approx(0.2 / 1.1)
    assert found["b"].noise == 0.0


def test_rounds_alternate_every_runtime_in_a_seeded_order():
    def order_of(seed):
        seen = []
        measure_runtimes(
            {label: RuntimeSpec(BUILDER) for label in "abcd"},
            {},
            rounds=4,
            seed=seed,
            launch=lambda job: seen.append(job.label) or [1.0],
        )
        return [seen[i : i + 4] for i in range(0, 16, 4)]

    rounds = order_of(5)
    assert all(sorted(r) == list("abcd") for r in rounds)
    assert rounds == order_of(5)
    assert len({tuple(r) for r in rounds}) > 1


def test_in_process_reports_a_failing_builder_as_a_measure_error():
    with pytest.raises(MeasureError, match=r"^x: no builder"):
        in_process(lambda *_: [1.0])(Job("x", RuntimeSpec("no.such.module:build"), {}, {}, 0, 1))


def _finalist(name, kind, process_ms, subgraphs=1):
    c = Candidate(name, kind, {}, subgraphs=subgraphs)
    c.process_ms = list(process_ms)
    c.final_ms = float(np.median(process_ms))
    return c


def test_a_split_within_the_noise_of_a_single_device_saves_the_single_device():
    split = _finalist("cost-model-1", COST_MODEL, [9.7, 9.9, 10.1], 2)
    single = _finalist("OPENVINO", SINGLE, [9.8, 10.0, 10.4])
    auto = _finalist(AUTOMATIC, AUTOMATIC, [12.0, 12.1, 12.2], 2)
    winner, why, noise = decide.decide([split, auto, single, _finalist("CPU", SINGLE, [20.0, 20.0])])
    assert winner is single
    assert noise == pytest.approx(0.6 / 10.0)
    assert "cost-model-1" in why and "does not beat" in why


def test_a_split_beyond_the_noise_of_every_single_device_and_the_automatic_plan_is_kept():
    split = _finalist("cost-model-1", COST_MODEL, [8.0, 8.1, 8.05], 2)
    single = _finalist("OPENVINO", SINGLE, [10.0, 10.1, 10.2])
    auto = _finalist(AUTOMATIC, AUTOMATIC, [9.5, 9.6, 9.55], 2)
    winner, why, _ = decide.decide([split, auto, single])
    assert winner is split and why.startswith("the split cost-model-1")


def test_a_split_that_does_not_beat_the_automatic_plan_saves_the_automatic_plan_where_it_beats_the_singles():
    split = _finalist("cost-model-1", COST_MODEL, [8.0, 8.1, 8.05], 2)
    auto = _finalist(AUTOMATIC, AUTOMATIC, [8.1, 8.0, 8.05], 2)
    single = _finalist("CPU", SINGLE, [10.0, 10.1, 10.2])
    winner, why, _ = decide.decide([split, auto, single])
    assert winner is auto and "the automatic plan" in why


def test_the_noise_has_a_floor_where_one_round_measured_it():
    split = _finalist("cost-model-1", COST_MODEL, [9.95], 2)
    single = _finalist("CPU", SINGLE, [10.0])
    winner, _, noise = decide.decide([split, single])
    assert noise == decide.MIN_NOISE and winner is single


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
