"""placement.forks: a group's parallel branches cut into pieces of their own (HETERO_CONCURRENCY=CONCURRENT),
the pieces always in an order every edge follows, and a fork inside a model run side by side on one device."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from onnx import helper as h
from support.helpers import assert_same, make_model, ort_run, seeded, vi

import hetero_cli as hc
from hetero_cli.placement.forks import MIN_SHARE, split_forks


def pieces(preds, weight=lambda k: 1.0, recurrent=lambda k: False):
    """The pieces of one group of all the nodes, as lists of nodes in order of their ids."""
    cut = split_forks([0] * len(preds), preds, weight, recurrent)
    by_id: dict[int, list[int]] = {}
    for k, g in enumerate(cut):
        by_id.setdefault(g, []).append(k)
    return sorted(by_id.values())


def test_a_diamond_two_towers_and_two_heads_are_cut_at_their_forks_and_a_residual_chain_is_not():
    assert pieces([[], [0], [0], [1, 2]]) == [[0], [1], [2], [3]]
    assert pieces([[], [0], [], [2], [1, 3]]) == [[0, 1], [2, 3], [4]]  # two towers joined at the end
    assert pieces([[], [0], [1], [0], [3]]) == [[0], [1, 2], [3, 4]]  # a trunk and two heads
    assert pieces([[], [0], [0, 1]]) == [[0, 1, 2]]  # a skip connection: nothing runs beside anything


def test_a_branch_too_light_to_pay_for_a_session_stays_with_the_rest():
    heavy = 1.0 / MIN_SHARE * 10
    assert pieces([[], [0], [0], [1, 2]], lambda k: heavy if k == 1 else 1.0) == [[0, 1, 2, 3]]


#: madmom's beat tracker's bidirectional layers as they are exported: forward: Unsqueeze of the sequence
#: (0), of a state (1), LSTM (2), its final state (3, a side output), its sequence (4); backward: Slice (5),
#: Unsqueeze (6), a state (7, a side input: its LSTM reads the sequence too), LSTM (8), final state (9),
#: sequence (10), Slice (11); Concat (12). The next layer reads the Concat: its states are side inputs.
LAYER = [[], [], [0, 1], [2], [2], [], [5], [], [6, 7], [8], [8], [10], [4, 11]]


def layer_after(concat: int) -> list[list[int]]:
    """LAYER again, reading node ``concat``: its sequence's Unsqueeze and Slice read that node."""
    shift = concat + 1
    shifted = [[p + shift for p in sources] for sources in LAYER]
    shifted[0], shifted[5] = [concat], [concat]
    return shifted


def test_side_inputs_and_outputs_stay_with_their_branch_and_do_not_hide_the_fork():
    assert pieces(LAYER) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11], [12]]
    two = pieces(LAYER + layer_after(12))
    assert two == [
        [0, 1, 2, 3, 4],
        [5, 6, 7, 8, 9, 10, 11],
        [12],
        [13, 14, 15, 16, 17],
        list(range(18, 25)),
        [25],
    ]
    # a light node from a model input beside a branch is still a branch where its reader reads no other
    # (two toy branches joined), and a heavy one always is
    assert pieces([[], [], [0, 1]]) == [[0], [1], [2]]
    assert pieces([[], [0], [], [1, 2]], lambda k: 50.0 if k in (1, 2) else 1.0) == [[0, 1], [2], [3]]


def test_two_recurrent_branches_are_cut_however_little_they_weigh():
    """LSTMs' steps run one after another: two beside each other are cut even where the group's weight
    lies elsewhere (a heavy head after them), one beside a light branch is not."""
    heavy = lambda k: 1000.0 if k == 12 else 1.0  # noqa: E731
    lstm = lambda k: k in (2, 8)  # noqa: E731
    assert pieces(LAYER, heavy) == [list(range(13))]
    assert pieces(LAYER, heavy, lstm) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10, 11], [12]]
    assert pieces(LAYER, heavy, lambda k: k == 2) == [list(range(13))]


@st.composite
def dags(draw):
    count = draw(st.integers(1, 14))
    return [sorted(draw(st.sets(st.integers(0, k - 1), max_size=3))) if k else [] for k in range(count)]


@given(dags(), st.lists(st.floats(0.5, 20.0), min_size=14, max_size=14), st.sets(st.integers(0, 13)))
def test_the_pieces_cover_the_group_and_every_edge_runs_forward(preds, weights, recurrent):
    cut = split_forks([0] * len(preds), preds, lambda k: weights[k], recurrent.__contains__)
    first = {}
    for k, g in enumerate(cut):
        first.setdefault(g, k)
    order = sorted(first, key=first.get)
    rank = {g: i for i, g in enumerate(order)}
    for k, sources in enumerate(preds):
        for p in sources:
            assert rank[cut[p]] <= rank[cut[k]], (preds, cut)
    # pieces are whole runs of what they hold: no piece needs a later piece's node
    for g in order:
        members = [k for k, c in enumerate(cut) if c == g]
        assert members


def fork_inside():
    """x -> Relu -> (Abs -> Sin) and (Neg -> Exp) -> Add -> y: a fork and a join inside the model."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Abs", ["r"], ["a"], name="abs"),
        h.make_node("Sin", ["a"], ["s"], name="sin"),
        h.make_node("Neg", ["r"], ["m"], name="neg"),
        h.make_node("Exp", ["m"], ["e"], name="exp"),
        h.make_node("Add", ["s", "e"], ["y"], name="add"),
    ]
    return make_model(nodes, [vi("x", [3, 4])], [vi("y", [3, 4])], name="fork_inside")


def test_concurrent_runs_a_fork_inside_the_model_on_one_device_side_by_side():
    core = hc.Core()
    x = {"x": seeded((3, 4))}
    whole = core.compile_model(fork_inside(), "HETERO:CPU")
    assert len(whole.subgraphs) == 1
    compiled = core.compile_model(fork_inside(), "HETERO:CPU", {"HETERO_CONCURRENCY": "CONCURRENT"})
    nodes = [s.nodes for s in compiled.subgraphs]
    assert nodes == [("relu",), ("abs", "sin"), ("neg", "exp"), ("add",)]
    assert compiled.schedule.together() == [(1, 2)] and compiled.schedule.concurrent
    assert_same(compiled(x), ort_run(fork_inside(), x))
    np.testing.assert_array_equal(compiled(x)["y"], whole(x)["y"])
