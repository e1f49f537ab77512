"""tune_model on small generated models with real ONNX Runtime sessions on the CPU and OpenVINO EPs: the
returned affinities compile in manual mode and give the whole model's outputs, the winner is the first of
the ranking (report.ranked) among the baselines and the cost model's candidates, the budget holds, the refusals,
and a deterministic choice given injected measurements (a timer that answers from a table: no speed is
asserted anywhere; the budget is kept by a clock that moves with the work done: WorkClock)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as h
from support.helpers import WorkClock, const, make_model, needs_openvino, vi

import hetero_cli as hc
from hetero_cli.app.tune import runs, tune_model
from hetero_cli.app.tune.measure import wall_timer
from hetero_cli.app.tune.tune import SIMPLER_MARGIN
from hetero_cli.app.validate import Tolerances
from hetero_cli.errors import TuneError, ValidationError
from hetero_cli.ort.session import SessionRequest, observe_sessions

DEVICE = "HETERO:OPENVINO,CPU"
# a validation (one more compile and run) and the counters may finish after the budget
SLACK_S = 5.0


def mlp_model(batch: int | str = 4, width: int = 32):
    """x[batch, width] -> (MatMul -> Relu) x3 -> MatMul -> Softmax -> y, seeded weights."""
    rng = np.random.default_rng(0)
    nodes, weights, last = [], [], "x"
    for k in range(4):
        weights.append(const(f"w{k}", rng.standard_normal((width, width)) / np.sqrt(width)))
        nodes.append(h.make_node("MatMul", [last, f"w{k}"], [f"m{k}"], name=f"mm{k}"))
        last = f"m{k}"
        if k < 3:
            nodes.append(h.make_node("Relu", [last], [f"r{k}"], name=f"relu{k}"))
            last = f"r{k}"
    nodes.append(h.make_node("Softmax", [last], ["y"], name="softmax", axis=-1))
    return make_model(nodes, [vi("x", [batch, width])], [vi("y", [batch, width])], weights, name="mlp")


def table_timer(table: dict[str, float]):
    """A timer answering ``table[label]`` (else by label's prefix, else 1.0 ms) for every run, never
    running anything: the search's choices then follow the table alone."""

    def timer(label, run, count):
        for key in (label, label.split(":")[0] + ":" + label.split(":")[1] if ":" in label else label):
            if key in table:
                return [table[key]] * count
        return [1.0] * count

    return timer


def _feeds():
    return {"x": np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)}


@needs_openvino
def test_tune_returns_affinities_that_run_in_manual_mode_and_a_winner_that_is_the_argmin():
    core = hc.Core()
    budget = 12.0
    seen = []
    clock = WorkClock(session_s=0.05)
    with clock.counting_sessions():
        result = tune_model(
            core,
            mlp_model(),
            DEVICE,
            budget_s=budget,
            inputs=[_feeds()],
            progress=lambda t, f: seen.append((t, f)),
            timer=clock.timing(wall_timer),
            now=clock,
        )
    report = result.report
    assert report.elapsed_s <= budget * 1.1 + SLACK_S
    model = result.model
    affinities = model.affinities()
    assert set(affinities) == {n.friendly_name for n in model.get_ops()}
    assert set(affinities.values()) <= {"OPENVINO", "CPU"}
    # manual mode runs the winner as saved, and its outputs are the whole model's
    compiled = core.compile_model(model, DEVICE)
    assert compiled.plan.affinities == affinities
    got = compiled(_feeds())["y"]
    want = core.compile_model(mlp_model(), "CPU")(_feeds())["y"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    # baselines are candidates, and the winner is the first of the ranking (the fastest measured, or a
    # simpler one within the margin) that passed validation
    names = [c.name for c in report.candidates]
    assert names[:3] == ["automatic", "OPENVINO", "CPU"]
    ranked = report.ranked(SIMPLER_MARGIN)
    assert ranked and report.winner == ranked[0].name
    assert all(report.baseline(n) is not None for n in ("automatic", "OPENVINO", "CPU"))
    assert report.validation.passed is True and report.validation.candidate == report.winner
    assert report.candidate(report.winner).affinities == affinities
    assert {"winner", "automatic"} <= set(report.per_subgraph)
    assert all(e["ms"] >= 0 and e["device"] in ("OPENVINO", "CPU") for e in report.per_subgraph["winner"])
    data = report.to_dict()
    assert data["winner"] == report.winner and data["machine"]["cores"] >= 1
    assert data["machine"]["execution_providers"]["OPENVINO"] == "OpenVINOExecutionProvider"
    # the progress goes forward from 0 to 1
    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[0] >= 0 and fractions[-1] <= 1
    assert seen[-1][0] == "done"


@needs_openvino
def test_the_choice_is_deterministic_given_the_measurements():
    """Injected timings: the first matmul is cheap on OPENVINO, the rest on CPU, boundaries free: the
    cost model must propose a split; and the injected end-to-end medians make cost-model-1 the winner."""
    table = {
        "probe:automatic": 1.0,
        "region:0:OPENVINO": 0.1,
        "region:0:CPU": 5.0,
        "candidate:cost-model-1": 0.2,
        "candidate:automatic": 1.0,
        "candidate:OPENVINO": 0.9,
        "candidate:CPU": 0.8,
    }
    for k in range(1, 8):
        table[f"region:{k}:OPENVINO"] = 5.0
        table[f"region:{k}:CPU"] = 0.1
    results = [
        tune_model(hc.Core(), mlp_model(), DEVICE, budget_s=30.0, seed=3, timer=table_timer(table))
        for _ in range(2)
    ]
    first, second = (r.report for r in results)
    assert [(c.name, c.affinities, c.predicted_ms) for c in first.candidates] == [
        (c.name, c.affinities, c.predicted_ms) for c in second.candidates
    ]
    split = first.candidate("cost-model-1")
    assert split.predicted_ms is not None and split.kind == "cost-model"
    assert split.affinities["mm0"] == "OPENVINO" and split.affinities["softmax"] == "CPU"
    assert first.winner == second.winner == "cost-model-1"
    assert first.candidate("CPU").median_ms == 0.8
    assert results[0].model.affinities() == split.affinities


def _phases(events: list[SessionRequest | str]) -> list[tuple[str, list[SessionRequest]]]:
    """Progress texts and session requests in the order they came: each text with the sessions made after it."""
    phases: list[tuple[str, list[SessionRequest]]] = [("", [])]
    for event in events:
        if isinstance(event, str):
            phases.append((event, []))
        else:
            phases[-1][1].append(event)
    return phases


@needs_openvino
def test_the_reference_is_the_whole_model_on_cpu_compiled_with_the_tunes_config():
    """The reference the candidates are validated against, and the cost model's tapped run, are compiled
    with the tune's config: a dynamically quantized model's outputs can depend on the CPU EP's thread
    count (tests/integration/test_tune_real.py), so a reference on the default threads failed the CPU
    candidate itself there. Checked on the sessions' options, which does not depend on this CPU."""
    one_thread = {"CPU": {"INFERENCE_NUM_THREADS": 1}, "OPENVINO": {"INFERENCE_NUM_THREADS": 1}}
    table = {"region:0:OPENVINO": 0.1, "region:0:CPU": 5.0}  # the cost model's split runs
    for k in range(1, 8):
        table[f"region:{k}:OPENVINO"], table[f"region:{k}:CPU"] = 5.0, 0.1
    events: list[SessionRequest | str] = []
    with observe_sessions(events.append):
        tune_model(
            hc.Core(),
            mlp_model(),
            DEVICE,
            config=one_thread,
            budget_s=30.0,
            timer=table_timer(table),
            progress=lambda text, _: events.append(text),
        )
    phases = _phases(events)
    tapped = next(made for text, made in phases if text == "the reference run")
    validating = next(k for k, (text, _) in enumerate(phases) if text.startswith("validating "))
    references = [*tapped, *phases[validating - 1][1]]
    assert len(tapped) == 1 and len(references) == 2, phases
    for request in references:
        assert [p[0] if isinstance(p, tuple) else p for p in request.providers] == ["CPUExecutionProvider"]
        assert request.options.intra_op_num_threads == 1


@needs_openvino
@pytest.mark.parametrize("device", ["CPU", "OPENVINO", "HETERO:CPU", "MULTI:CPU"])
def test_a_device_string_without_two_devices_is_refused(device):
    with pytest.raises((TuneError, hc.DeviceError), match=r"HETERO|two available devices|device"):
        tune_model(hc.Core(), mlp_model(), device, budget_s=10)


@needs_openvino
def test_refusals_before_the_search():
    core = hc.Core()
    with pytest.raises(TuneError, match="at least two available devices"):
        tune_model(core, mlp_model(), "HETERO:CPU", budget_s=10)
    with pytest.raises(ValidationError, match=r"dynamic|give its size"):
        tune_model(core, mlp_model(batch="n"), DEVICE, budget_s=10)
    with pytest.raises(ValidationError, match="'nope'"):
        tune_model(core, mlp_model(), DEVICE, budget_s=10, tolerances=Tolerances.parse(["nope:1e-3"]))
    with pytest.raises(TuneError, match="positive"):
        tune_model(core, mlp_model(), DEVICE, budget_s=0)
    # a budget under one candidate's price: the message gives the budget to ask for
    with pytest.raises(TuneError, match=r"give a budget of at least \d+ s"):
        tune_model(core, mlp_model(), DEVICE, budget_s=0.01)
    # shapes make a dynamic model tunable
    injected = table_timer({})
    result = tune_model(
        core, mlp_model(batch="n"), DEVICE, shapes={"x": (4, 32)}, budget_s=20, timer=injected
    )
    assert result.report.winner


@needs_openvino
def test_a_tight_budget_cuts_the_phases_short_and_still_returns_a_validated_winner():
    budget = 3.0
    clock = WorkClock(session_s=0.25)  # the region timing and the measuring run out of time
    with clock.counting_sessions():
        result = tune_model(
            hc.Core(), mlp_model(256, 512), DEVICE, budget_s=budget, timer=clock.timing(wall_timer), now=clock
        )
    report = result.report
    assert report.elapsed_s <= budget * 1.1 + SLACK_S
    assert any(note.startswith("no time") for note in report.notes), report.notes
    assert report.winner == report.ranked(SIMPLER_MARGIN)[0].name
    assert report.validation.passed is True
    assert set(result.model.affinities()) == {n.friendly_name for n in result.model.get_ops()}


@needs_openvino
def test_a_winner_with_the_automatic_plans_affinities_is_saved_marked_as_that_plan(tmp_path):
    """OPENVINO takes every node of the MLP, so the automatic plan is "all on OPENVINO": whether the
    automatic candidate or the OPENVINO one wins, the saved model carries the mark that lets a manual
    compile run it in the automatic plan's session; a CPU winner does not."""
    from hetero_cli.placement.affinities import marked_automatic

    for fastest, marked in (("OPENVINO", True), ("automatic", True), ("CPU", False)):
        table = {"probe:automatic": 1.0, "candidate:automatic": 1.0, "candidate:OPENVINO": 1.0}
        table["candidate:CPU"] = 1.0
        table[f"candidate:{fastest}"] = 0.1
        result = tune_model(hc.Core(), mlp_model(), DEVICE, budget_s=20.0, timer=table_timer(table))
        assert result.report.winner == fastest
        path = tmp_path / f"{fastest}.onnx"
        result.model.save(path)
        saved = hc.Core().read_model(path)
        assert marked_automatic(saved) == marked
        assert set(saved.affinities().values()) == {"CPU" if fastest == "CPU" else "OPENVINO"}


def two_branch_model():
    """x -> Relu -> Abs -> ra and x -> Neg -> Exp -> me: two branches that meet only at the input."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Abs", ["r"], ["ra"], name="abs"),
        h.make_node("Neg", ["x"], ["m"], name="neg"),
        h.make_node("Exp", ["m"], ["me"], name="exp"),
    ]
    return make_model(nodes, [vi("x", [4, 32])], [vi("ra", [4, 32]), vi("me", [4, 32])], name="branches")


@needs_openvino
def test_tune_tries_a_placements_branches_at_once_and_saves_the_mode_it_won_with(tmp_path):
    """Injected timings make the CPU's two branches side by side (CONCURRENT: cut into two CPU subgraphs)
    the fastest: it wins, and the saved model compiles so without being told."""
    from hetero_cli.placement.affinities import marked_concurrency

    table = {"probe:automatic": 1.0, "candidate:CPU, branches at once": 0.1}
    result = tune_model(hc.Core(), two_branch_model(), DEVICE, budget_s=30.0, timer=table_timer(table))
    report = result.report
    twin = report.candidate("CPU, branches at once")
    assert twin.kind == "branches" and twin.concurrency == "CONCURRENT" and twin.subgraphs == 2
    if report.regions:  # the cost model ran: the twin has its prediction (the critical path)
        assert twin.predicted_ms is not None
    assert report.winner == twin.name
    path = tmp_path / "tuned.onnx"
    result.model.save(path)
    saved = hc.Core().read_model(path)
    assert marked_concurrency(saved) == "CONCURRENT" and set(saved.affinities().values()) == {"CPU"}
    compiled = hc.Core().compile_model(path, DEVICE)
    assert [s.device for s in compiled.subgraphs] == ["CPU", "CPU"] and compiled.schedule.concurrent
    # the user's own mode wins over the saved one
    in_turn = hc.Core().compile_model(path, DEVICE, {"HETERO_CONCURRENCY": "SEQUENTIAL"})
    assert len(in_turn.subgraphs) == 1


@needs_openvino
def test_a_mode_in_the_tunes_config_is_kept_for_every_candidate():
    table = {"probe:automatic": 1.0}
    config = {"HETERO_CONCURRENCY": "SEQUENTIAL"}
    report = tune_model(
        hc.Core(), two_branch_model(), DEVICE, config=config, budget_s=20.0, timer=table_timer(table)
    ).report
    assert not [c for c in report.candidates if c.kind == "branches"]
    assert any("HETERO_CONCURRENCY is set" in n for n in report.notes)


def test_a_model_whose_saved_mode_is_no_mode_is_refused_with_one_message():
    from hetero_cli.placement.affinities import CONCURRENCY_KEY

    model = hc.Core().read_model(two_branch_model())
    model.set_metadata(CONCURRENCY_KEY, "SOMETIMES")
    with pytest.raises(hc.ConfigError, match=f"metadata {CONCURRENCY_KEY} says 'SOMETIMES'"):
        hc.Core().compile_model(model, DEVICE)


def test_a_twins_prediction_is_the_critical_path_at_once_and_the_sum_in_turn():
    """Regions timed 4 ms (relu, abs) and 6 ms (neg, exp) on CPU, a subgraph costing 0.5 ms: run at once the
    two branches take the slower one's time, in turn their sum."""
    from hetero_cli.app.tune.plan_costs import RegionCosts
    from hetero_cli.app.tune.regions import Region
    from hetero_cli.app.tune.search import Boundary

    core = hc.Core()
    regions = [
        Region(0, ("relu", "abs"), ("CPU",), (), ("x",), ("ra",)),
        Region(1, ("neg", "exp"), ("CPU",), (), ("x",), ("me",)),
    ]
    costs = RegionCosts(regions, [{"CPU": 4.0}, {"CPU": 6.0}], Boundary(subgraph_ms=0.5, ms_per_mb=0.0))
    model = two_branch_model()
    at_once = core.plan(model, "HETERO:CPU", {"HETERO_CONCURRENCY": "CONCURRENT"})
    schedule = core.schedule(at_once, "HETERO:CPU", {"HETERO_CONCURRENCY": "CONCURRENT"})
    assert len(at_once.subgraphs) == 2 and schedule.concurrent
    assert costs.predict(at_once, schedule) == 6.5
    assert costs.predict(at_once, schedule.in_turn("SEQUENTIAL")) == 11.0
    whole = core.plan(model, "HETERO:CPU")
    assert costs.predict(whole, core.schedule(whole, "HETERO:CPU")) == 10.5
    assert (
        RegionCosts(regions, [{"OPENVINO": 1.0}, {"CPU": 1.0}], costs.boundary).predict(whole, schedule)
        is None
    )


@needs_openvino
def test_the_cost_models_placements_rank_by_their_critical_path_where_their_branches_overlap():
    """Two branches (4 ms and 6 ms on either device): placed on OPENVINO and CPU they run at once and
    cost the slower branch plus a subgraph (6.5 ms), less than the all-CPU placement's 10.5 ms though the
    search's sums said otherwise; a tensor read from another subgraph costs its megabytes, a model input
    nothing."""
    from hetero_cli.app.tune.plan_costs import RegionCosts, ranked
    from hetero_cli.app.tune.regions import Region
    from hetero_cli.app.tune.search import Boundary

    regions = [
        Region(0, ("relu", "abs"), ("OPENVINO", "CPU"), (), ("x",), ("ra",)),
        Region(1, ("neg", "exp"), ("OPENVINO", "CPU"), (), ("x",), ("me",)),
    ]
    both = [{"OPENVINO": 4.0, "CPU": 4.0}, {"OPENVINO": 6.0, "CPU": 6.0}]
    costs = RegionCosts(regions, both, Boundary(subgraph_ms=0.5, ms_per_mb=1.0), {"x": 10**6, "r": 2 * 10**6})
    split = {"relu": "OPENVINO", "abs": "OPENVINO", "neg": "CPU", "exp": "CPU"}
    on_cpu = dict.fromkeys(split, "CPU")
    core, model = hc.Core(), hc.Core().read_model(two_branch_model())
    found = [(on_cpu, 10.0), (split, 11.0)]
    assert ranked(core, model, DEVICE, {}, found, costs, keep=2) == [(split, 6.5), (on_cpu, 10.5)]
    assert ranked(core, model, DEVICE, {}, found, costs, keep=1) == [(split, 6.5)]
    in_turn = {"HETERO_CONCURRENCY": "SEQUENTIAL"}
    assert ranked(core, model, DEVICE, in_turn, found, costs, keep=2) == [(on_cpu, 10.5), (split, 11.0)]
    # relu on OPENVINO, abs on CPU: abs's subgraph reads r (2 MB) from relu's
    cut = {**on_cpu, "relu": "OPENVINO"}
    plan, schedule = runs.planned(core, model, DEVICE, in_turn, cut)
    assert costs.predict(plan, schedule) == 4.0 + 6.0 + 3 * 0.5 + 2.0
