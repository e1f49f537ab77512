"""TuneReport.ranked: a placement with more subgraphs must beat a simpler one by more than the margin, or the
simpler one is tried first; the order is otherwise by median. Pure data: nothing is compiled or timed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetero_cli.app.tune.report import AUTOMATIC, COST_MODEL, SINGLE, Candidate, TuneReport

MARGIN = 0.015


def report(*candidates: Candidate) -> TuneReport:
    return TuneReport(
        device="HETERO:OPENVINO,CPU", budget_s=10.0, seed=0, machine={}, candidates=list(candidates)
    )


def cand(name: str, kind: str, subgraphs: int, ms: float | None, error: str | None = None) -> Candidate:
    return Candidate(name, kind, {}, subgraphs=subgraphs, median_ms=ms, error=error)


def test_a_split_faster_by_less_than_the_margin_loses_to_the_single_device():
    r = report(
        cand("automatic", AUTOMATIC, 1, 10.2), cand("CPU", SINGLE, 1, 10.1), cand("cm", COST_MODEL, 2, 10.0)
    )
    assert [c.name for c in r.ranked(MARGIN)] == ["CPU", "cm", "automatic"]
    assert "CPU (1 subgraph(s)) is kept over cm (2)" in r.simpler_note(r.ranked(MARGIN)[0], MARGIN)


def test_a_split_faster_by_more_than_the_margin_wins():
    r = report(
        cand("automatic", AUTOMATIC, 1, 10.2), cand("CPU", SINGLE, 1, 10.1), cand("cm", COST_MODEL, 2, 9.5)
    )
    assert r.ranked(MARGIN)[0].name == "cm"
    assert r.ranked(0.0)[0].name == r.measured[0].name == "cm"


def test_the_automatic_plan_is_kept_over_an_equal_single_device_and_failures_are_left_out():
    r = report(
        cand("OPENVINO", SINGLE, 1, 5.0),
        cand("automatic", AUTOMATIC, 1, 5.05),
        cand("broken", COST_MODEL, 2, 1.0, error="failed validation"),
        cand("unmeasured", COST_MODEL, 3, None),
    )
    assert [c.name for c in r.ranked(MARGIN)] == ["automatic", "OPENVINO"]


@given(
    st.lists(
        st.tuples(st.integers(1, 6), st.floats(0.5, 50.0), st.sampled_from([AUTOMATIC, SINGLE, COST_MODEL])),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([0.0, 0.015, 0.05]),
)
def test_the_first_ranked_is_within_the_margin_of_the_fastest_and_no_slower_one_is_simpler(rows, margin):
    r = report(*(cand(f"c{i}", kind, sg, ms) for i, (sg, ms, kind) in enumerate(rows)))
    ranked = r.ranked(margin)
    assert sorted(c.name for c in ranked) == sorted(c.name for c in r.measured)
    fastest = r.measured[0].median_ms
    first = ranked[0]
    assert first.median_ms <= fastest * (1 + margin)
    near = [c for c in r.measured if c.median_ms <= fastest * (1 + margin)]
    assert first.subgraphs == min(c.subgraphs for c in near)


@pytest.mark.parametrize("margin", [0.0, MARGIN])
def test_with_distinct_subgraph_counts_and_far_apart_medians_the_order_is_the_medians(margin):
    r = report(cand("a", COST_MODEL, 3, 1.0), cand("b", SINGLE, 1, 2.0), cand("c", COST_MODEL, 2, 3.0))
    assert [c.name for c in r.ranked(margin)] == ["a", "b", "c"]
