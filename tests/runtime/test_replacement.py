"""HETERO_FALLBACK and re-placement on the CPU EP alone (issue 44): two made-up devices that the CPU EP
runs, and faults injected through the session factory's seam (tests/support/faults.py), so that every
flavour's CI, the CPU-only one included, covers a move at compile time, a move at the first inference, a
proven subgraph that never moves, and the advice where fallback is off."""

from __future__ import annotations

import logging

import pytest
from onnx import helper as h
from support.faults import cpu_devices, failing_runs, refusing_device
from support.helpers import assert_same, make_model, ort_run, seeded, vi

import hetero_cli as hc
from hetero_cli.ort.session import observe_sessions
from hetero_cli.placement.config import SplitConfig
from hetero_cli.placement.partition import partition
from hetero_cli.runtime import CompiledModel, Fallback, compile_with_fallback

OPS = ("Relu", "Neg", "Abs", "Sigmoid")
ON = {"n0": "A", "n1": "A", "n2": "B", "n3": "B"}


def chain():
    """x [n,4] -> Relu -> Neg -> Abs -> Sigmoid -> y: dynamic shapes, so every run is made unbound."""
    names = ["x", "t0", "t1", "t2", "y"]
    nodes = [h.make_node(op, [names[i]], [names[i + 1]], name=f"n{i}") for i, op in enumerate(OPS)]
    return make_model(nodes, [vi("x", ["n", 4])], [vi("y", ["n", 4])], name="chain")


def compiled_on(proto, fallback_on: bool) -> CompiledModel:
    """``proto`` split A (n0, n1) then B (n2, n3), both made-up devices the CPU EP runs, HETERO_FALLBACK
    on or off, compiled as Core compiles a split by hand."""
    model = hc.Core().read_model(proto)
    devices = cpu_devices("A", "B")
    plan = partition(model, ON)
    fallback = Fallback(fallback_on, True, tuple(devices.values()))
    made = compile_with_fallback(model, plan, devices, SplitConfig(), "HETERO:A,B", None, fallback)
    return CompiledModel(made)


def moves_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("HETERO_FALLBACK:")]


def test_a_subgraph_its_device_refuses_to_compile_moves_to_the_next_one(caplog):
    proto = chain()
    with caplog.at_level(logging.WARNING, logger="hetero_cli"), observe_sessions(*refusing_device("A")):
        compiled = compiled_on(proto, fallback_on=True)
    assert [s.device for s in compiled.subgraphs] == ["B"]
    (move,) = compiled.moves
    assert (move.subgraph, move.left, move.to, move.stage) == ("subgraph1", "A", "B", "failed to compile")
    assert "A refuses this subgraph" in move.reason
    (logged,) = moves_logged(caplog)
    assert "subgraph1 (2 node(s)) failed to compile on A" in logged and "it runs on B instead" in logged
    x = seeded((3, 4))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))


def test_with_fallback_off_a_refused_subgraph_is_a_compile_error_naming_where_it_would_go():
    with observe_sessions(*refusing_device("A")), pytest.raises(hc.CompileError) as failed:
        compiled_on(chain(), fallback_on=False)
    assert (failed.value.subgraph, failed.value.device) == ("subgraph1", "A")
    assert "HETERO_FALLBACK=YES would move it to B" in str(failed.value)


def test_a_subgraph_failing_its_first_inference_moves_within_that_inference(caplog):
    proto = chain()
    seam = failing_runs("A", times=2)  # the inference's run, and the trial's run again
    x = seeded((2, 4))
    with observe_sessions(*seam):
        compiled = compiled_on(proto, fallback_on=True)
        request = compiled.create_infer_request()
        with caplog.at_level(logging.WARNING, logger="hetero_cli"):
            got = request.infer({"x": x})  # the same call gives the right outputs
    assert_same(got, ort_run(proto, {"x": x}))
    assert [s.device for s in compiled.subgraphs] == ["B", "B"] and compiled.revision == 1
    (move,) = compiled.moves
    assert (move.left, move.to, move.stage) == ("A", "B", "failed its first inference")
    (logged,) = moves_logged(caplog)
    assert "subgraph1 (2 node(s)) failed its first inference on A" in logged
    assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}))  # and from then on


def test_a_subgraph_that_completed_an_inference_never_moves_a_later_failure_is_the_inputs():
    proto = chain()
    seam = failing_runs("A", times=0)
    x = seeded((2, 4))
    with observe_sessions(*seam):
        compiled = compiled_on(proto, fallback_on=True)
        request = compiled.create_infer_request()
        assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}))
        seam[1].arm(1)
        with pytest.raises(hc.InferenceError, match=r"^subgraph1 on A failed: .*A failed the run"):
            request.infer({"x": x})
    assert compiled.moves == () and compiled.revision == 0
    assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}))


def test_with_fallback_off_a_failed_run_names_the_next_device_and_makes_no_probe_session():
    proto = chain()
    seam = failing_runs("A", times=1)
    asked = []
    with observe_sessions(*seam):
        compiled = compiled_on(proto, fallback_on=False)
    with observe_sessions(asked.append, seam[1]), pytest.raises(hc.InferenceError) as failed:
        compiled({"x": seeded((2, 4))})
    assert str(failed.value).startswith("subgraph1 on A failed")
    assert "HETERO_FALLBACK=YES would try it on B next" in str(failed.value)
    assert asked == []  # an inference's error asks no device anything


def test_a_request_in_flight_keeps_the_revision_it_started_with():
    """The move swaps in a new revision whole: one revision object per state, never edited."""
    proto = chain()
    seam = failing_runs("A", times=2)
    with observe_sessions(*seam):
        compiled = compiled_on(proto, fallback_on=True)
        first = compiled.current()
        compiled({"x": seeded((2, 4))})
    moved = compiled.current()
    assert moved is not first and moved.number == first.number + 1
    assert [s.device for s in first.subgraphs] == ["A", "B"]  # as it was
    assert first.moves == () and len(moved.moves) == 1
