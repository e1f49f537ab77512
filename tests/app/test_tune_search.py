"""The tuner's search on generated graphs with injected cost tables: the region cut (forced cuts where the
supporting devices change, every non-constant node in one region, in topological order), the dynamic
programming choice (optimal against brute force, a split where it pays, none where boundaries cost more,
never a device that does not support a region), and placements that partition() accepts. Nothing runs:
no session, no clock."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.graphs import PLAN_ONLY, cases, check_plan

from hetero_cli.app.tune import regions, search
from hetero_cli.app.tune.search import Boundary, best_placement, calibrate, placements, predict
from hetero_cli.errors import UnsupportedNodesError
from hetero_cli.graph import Model
from hetero_cli.placement.partition import partition

DEVICES = ("OPENVINO", "CPU")
FREE = Boundary(0.0, 0.0)


def _support(model: Model, refused: set[str]) -> dict[str, frozenset[str]]:
    names = {n.friendly_name for n in model.get_ops()}
    return {"OPENVINO": frozenset(names - refused), "CPU": frozenset(names)}


# --- the DP on injected tables -----------------------------------------------------------------------


def test_a_split_wins_where_regions_are_cheaper_on_different_devices_and_boundaries_are_cheap():
    times = [{"OPENVINO": 1.0, "CPU": 10.0}, {"OPENVINO": 10.0, "CPU": 1.0}]
    assert best_placement(times, [1000], Boundary(0.5, 0.01), DEVICES) == ("OPENVINO", "CPU")
    found = placements(times, [1000], Boundary(0.5, 0.01), DEVICES)
    assert found[0].devices == ("OPENVINO", "CPU")
    assert found[0].predicted_ms == pytest.approx(2.0 + 0.5 + 0.01 * 1000 / 1e6)


def test_no_split_where_the_boundary_costs_more_than_it_saves():
    times = [{"OPENVINO": 1.0, "CPU": 10.0}, {"OPENVINO": 10.0, "CPU": 1.0}]
    assert best_placement(times, [1000], Boundary(50.0, 0.0), DEVICES) == ("OPENVINO", "OPENVINO")
    # per byte alone: 100 MB across the cut at 1 ms/MB
    assert best_placement(times, [100_000_000], Boundary(0.0, 1.0), DEVICES) == ("OPENVINO", "OPENVINO")
    # every scale says the same: no cost-model candidate (single devices are baselines anyway)
    assert placements(times, [1000], Boundary(50.0, 0.0), DEVICES) == []


def test_an_island_too_small_to_pay_for_its_two_boundaries_goes_back_to_its_neighbours():
    times = [{"OPENVINO": 1.0, "CPU": 5.0}, {"OPENVINO": 1.5, "CPU": 1.0}, {"OPENVINO": 1.0, "CPU": 5.0}]
    assert best_placement(times, [10, 10], Boundary(0.3, 0.0), DEVICES) == ("OPENVINO",) * 3
    assert best_placement(times, [10, 10], Boundary(0.25, 0.0), DEVICES) == ("OPENVINO",) * 3  # ties stay
    assert best_placement(times, [10, 10], Boundary(0.1, 0.0), DEVICES) == ("OPENVINO", "CPU", "OPENVINO")


def test_a_device_never_gets_a_region_it_has_no_time_for():
    times = [{"OPENVINO": 1.0, "CPU": 9.0}, {"CPU": 100.0}, {"OPENVINO": 1.0, "CPU": 9.0}]
    got = best_placement(times, [0, 0], FREE, DEVICES)
    assert got == ("OPENVINO", "CPU", "OPENVINO")
    with pytest.raises(ValueError, match="no measured time"):
        best_placement([{"CPU": math.inf}], [], FREE, DEVICES)
    with pytest.raises(ValueError, match="cut sizes"):
        best_placement(times, [0], FREE, DEVICES)


def test_a_limit_on_device_changes_keeps_the_best_two_subgraph_split():
    times = [{"OPENVINO": 1.0, "CPU": 3.0}, {"OPENVINO": 3.0, "CPU": 1.0}, {"OPENVINO": 1.0, "CPU": 3.0}]
    times += [{"OPENVINO": 3.0, "CPU": 1.0}]
    assert best_placement(times, [0, 0, 0], FREE, DEVICES) == ("OPENVINO", "CPU", "OPENVINO", "CPU")
    assert best_placement(times, [0, 0, 0], FREE, DEVICES, max_switches=1) == ("OPENVINO",) * 3 + ("CPU",)
    assert best_placement(times, [0, 0, 0], FREE, DEVICES, max_switches=0) == ("OPENVINO",) * 4
    found = search.proposals(times, times, [0, 0, 0], FREE, DEVICES)
    assert ("OPENVINO", "OPENVINO", "OPENVINO", "CPU") in [p.devices for p in found]
    with pytest.raises(ValueError, match="at most 0 device changes"):
        best_placement([{"CPU": 1.0}, {"OPENVINO": 1.0}], [0], FREE, DEVICES, max_switches=0)


def test_ties_go_to_the_device_of_higher_priority():
    times = [{"OPENVINO": 1.0, "CPU": 1.0}] * 3
    assert best_placement(times, [0, 0], FREE, DEVICES) == ("OPENVINO",) * 3
    assert best_placement(times, [0, 0], FREE, ("CPU", "OPENVINO")) == ("CPU",) * 3


tables = st.integers(1, 6).flatmap(
    lambda n: st.tuples(
        st.lists(
            st.fixed_dictionaries(
                {"CPU": st.floats(0.0, 20.0)},
                optional={"OPENVINO": st.floats(0.0, 20.0), "GPU": st.floats(0.0, 20.0)},
            ),
            min_size=n,
            max_size=n,
        ),
        st.lists(st.integers(0, 10_000_000), min_size=n - 1, max_size=n - 1),
        st.floats(0.0, 5.0),
        st.floats(0.0, 2.0),
    )
)


@settings(PLAN_ONLY, max_examples=300)
@given(tables)
def test_the_dp_is_optimal_against_brute_force(case):
    times, cut_bytes, per_subgraph, per_mb = case
    boundary = Boundary(per_subgraph, per_mb)
    order = ("GPU", "OPENVINO", "CPU")
    got = best_placement(times, cut_bytes, boundary, order)
    assert all(d in times[i] for i, d in enumerate(got))
    best = min(predict(p, times, cut_bytes, boundary) for p in itertools.product(*[sorted(t) for t in times]))
    assert predict(got, times, cut_bytes, boundary) == pytest.approx(best, abs=1e-9)
    # with a limit on device changes: optimal among the placements that keep to it
    for limit in (0, 1, 2):
        got = best_placement(times, cut_bytes, boundary, order, max_switches=limit)
        assert sum(a != b for a, b in itertools.pairwise(got)) <= limit
        best = min(
            predict(p, times, cut_bytes, boundary)
            for p in itertools.product(*[sorted(t) for t in times])
            if sum(a != b for a, b in itertools.pairwise(p)) <= limit
        )
        assert predict(got, times, cut_bytes, boundary) == pytest.approx(best, abs=1e-9)
    # deterministic: the same tables give the same placements, in the same order
    first = placements(times, cut_bytes, boundary, order)
    assert first == placements(times, cut_bytes, boundary, order)
    assert len({p.devices for p in first}) == len(first)
    assert all(not p.uniform for p in first)
    assert [p.predicted_ms for p in first] == sorted(p.predicted_ms for p in first)


def test_calibration_makes_each_device_add_up_to_its_whole_model_time():
    times = [{"OPENVINO": 2.0, "CPU": 1.0}, {"OPENVINO": 6.0, "CPU": 3.0}, {"CPU": 4.0}]
    scaled, factors = calibrate(times, {"OPENVINO": 4.0, "CPU": 16.0})
    assert factors == {"CPU": 2.0}  # OPENVINO does not run region 3: not scaled
    assert sum(t["CPU"] for t in scaled) == pytest.approx(16.0)
    assert scaled[0]["OPENVINO"] == 2.0
    merged = search.merge(
        [[search.Placement(("CPU", "OPENVINO", "CPU"), 0.0, 1.0)]] * 2, scaled, [0, 0], FREE
    )
    assert [p.devices for p in merged] == [("CPU", "OPENVINO", "CPU")]
    assert merged[0].predicted_ms == pytest.approx(2.0 + 6.0 + 8.0)


# --- the region cut and placements on generated graphs ---------------------------------------------------


@settings(PLAN_ONLY, max_examples=120)
@given(cases(refused=True), st.integers(1, 24), st.data())
def test_regions_cover_the_order_and_respect_forced_cuts(case, target, data):
    model = Model(case.model)
    names = [n.friendly_name for n in model.get_ops() if not n.is_constant]
    # constant-only nodes are no region's: they follow their first consumer
    refused = {
        n.friendly_name for n in model.get_ops() if n.proto.op_type in case.refused_ops and not n.is_constant
    }
    supported = _support(model, refused)
    cut = regions.cut_regions(model, supported, DEVICES, target=target)
    assert [n for r in cut for n in r.nodes] == names
    assert [r.index for r in cut] == list(range(len(cut)))
    for r in cut:
        assert r.nodes
        # one supporting set per region, and it is the nodes' own
        assert {tuple(d for d in DEVICES if n in supported[d]) for n in r.nodes} == {r.devices}
    # a cut wherever the supporting devices change (forced), and about ``target`` regions besides
    sets = [tuple(d for d in DEVICES if n in supported[d]) for n in names]
    changes = {i for i in range(1, len(names)) if sets[i] != sets[i - 1]}
    starts = set(itertools.accumulate(len(r.nodes) for r in cut[:-1]))
    assert changes <= starts
    assert len(cut) <= len(changes) + 1 + target
    # a deterministic cut
    assert cut == regions.cut_regions(model, supported, DEVICES, target=target)

    # any placement that gives each region one of its devices: every node placed, partition() accepts it
    placement = [data.draw(st.sampled_from(r.devices)) for r in cut]
    affinities = regions.region_affinities(model, cut, placement)
    assert list(affinities) == [n.friendly_name for n in model.get_ops()]
    assert all(affinities[n] == "CPU" for n in refused)
    check_plan(model, partition(model, affinities), affinities)

    # the DP on injected tables: cheap on OPENVINO where allowed, a free boundary
    times = [{d: (1.0 if d == "OPENVINO" else 5.0) for d in r.devices} for r in cut]
    sizes = [0] * (len(cut) - 1)
    chosen = best_placement(times, sizes, FREE, DEVICES)
    assert all(
        d == ("OPENVINO" if "OPENVINO" in r.devices else "CPU") for r, d in zip(cut, chosen, strict=True)
    )
    affinities = regions.region_affinities(model, cut, chosen)
    check_plan(model, partition(model, affinities), affinities)


@settings(PLAN_ONLY, max_examples=60)
@given(cases(refused=False))
def test_cut_tensors_are_those_live_across_each_cut(case):
    model = Model(case.model)
    cut = regions.cut_regions(model, _support(model, set()), DEVICES, target=4)
    where = {n: r.index for r in cut for n in r.nodes}
    live = regions.cut_tensors(model, cut)
    assert len(live) == max(0, len(cut) - 1)
    consumers = model.consumers()
    for k, tensors in enumerate(live):
        for t in tensors:
            producer = where[model.producer[t].friendly_name]
            readers = [where[c.friendly_name] for c in consumers.get(t, ()) if c.friendly_name in where]
            assert producer <= k
            assert t in model.output_names or any(r > k for r in readers)
    # every region input from an earlier region is live across the cut just before it
    for r in cut[1:]:
        for t in r.inputs:
            if t in model.producer and model.producer[t].friendly_name in where:
                assert t in live[r.index - 1]


def test_a_node_no_device_supports_is_refused():
    case_model = Model(cases_example())
    names = {n.friendly_name for n in case_model.get_ops()}
    with pytest.raises(UnsupportedNodesError, match="no device of OPENVINO, CPU supports"):
        regions.cut_regions(case_model, {"OPENVINO": frozenset(), "CPU": frozenset(names - {"b"})}, DEVICES)


def cases_example():
    from onnx import helper as h
    from support.helpers import make_model, vi

    nodes = [h.make_node("Relu", ["x"], ["a"], name="a"), h.make_node("Neg", ["a"], ["y"], name="b")]
    return make_model(nodes, [vi("x")], [vi("y")])
