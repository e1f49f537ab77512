"""A compiled model is a sequence of frozen revisions: a request runs the revision it started with to its
end; a fallback or a relax builds the next one and swaps it in; the current one is what runs (and what an
export writes)."""

from __future__ import annotations

import dataclasses
import logging
import threading

import numpy as np
import pytest
from runtime.test_declared_types import reshape_neg
from runtime.test_fallback import SPLIT, _manual, assert_outputs, fallback_warnings, run_failure_model
from support.helpers import assert_same, cpu_split, needs_openvino, ort_run, reference, seeded, vi

import hetero_cli as hc

HANG_GUARD_S = 60


def _moving_split(config=None) -> tuple[hc.CompiledModel, dict, dict]:
    """subgraph1 on CPU, subgraph2 on OPENVINO, which fails its first inference (openvino-input-order) and
    moves to CPU; THROUGHPUT: a session per subgraph, one pipeline lane per device."""
    proto, feeds, affinities = run_failure_model()
    settings = {"HETERO_FALLBACK": "YES", "PERFORMANCE_HINT": "THROUGHPUT", **(config or {})}
    compiled = hc.Core().compile_model(_manual(proto, affinities), SPLIT, settings)
    return compiled, feeds, reference(proto, feeds)


@needs_openvino
def test_a_request_in_flight_keeps_its_revision_while_another_requests_fallback_swaps_in_the_next(caplog):
    compiled, feeds, want = _moving_split()
    first = compiled.current()
    slow, fast = compiled.create_infer_request(), compiled.create_infer_request()
    paused, resume = threading.Event(), threading.Event()
    seen: list[tuple[int, str, int]] = []  # slow's subgraph starts: (position, lane, current revision)

    def observer(event, request, position, lane):
        if request is not slow:
            return
        if event == "start":
            seen.append((position, lane, compiled.current().number))
        elif not paused.is_set():  # slow has run subgraph1 of its revision: hold it there
            paused.set()
            resume.wait(HANG_GUARD_S)

    pipeline = compiled.pipeline
    pipeline.observer = observer
    try:
        with caplog.at_level(logging.WARNING, logger="hetero_cli"):
            slow.start_async(feeds)
            assert paused.wait(HANG_GUARD_S)
            assert_outputs(fast.infer(feeds), want)  # its fallback swaps in revision 1
            assert compiled.current().number == first.number + 1
            resume.set()
            slow.wait()
    finally:
        resume.set()
        pipeline.observer = None
    assert_outputs(slow.results, want)
    # slow ran revision 0's OPENVINO subgraph though revision 1 was current, failed on it as fast did, and
    # started over on revision 1 without building another
    assert seen == [(0, "CPU", 0), (1, "OPENVINO", 1), (0, "CPU", 1), (1, "CPU", 1)]
    assert len(fallback_warnings(caplog)) == 1 and len(compiled.moves) == 1
    assert [s.device for s in first.subgraphs] == ["CPU", "OPENVINO"]


@needs_openvino
def test_the_current_revision_after_a_fallback_holds_the_moved_placement(tmp_path):
    compiled, feeds, want = _moving_split({"HETERO_DUMP_GRAPH_DOT": "YES", "HETERO_DOT_DIR": str(tmp_path)})
    first, held = compiled.current(), compiled.subgraphs
    assert first.dot_files and first.dot_files == compiled.dot_files
    assert_outputs(compiled(feeds), want)
    current = compiled.current()
    assert current.number == 1 and compiled.revision == 1
    assert [s.device for s in current.plan.subgraphs] == ["CPU", "CPU"]
    assert [s.device for s in current.subgraphs] == ["CPU", "CPU"] and current.runs == current.subgraphs
    assert current.subgraphs[1].session.get_providers()[0] == "CPUExecutionProvider"
    assert all(current.plan.affinities[n] == "CPU" for n in current.plan.subgraphs[1].nodes)
    # the compiled model's names read the current revision
    assert compiled.plan is current.plan and compiled.subgraphs is current.subgraphs
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU"]
    # the .dot files were drawn again with the revision, of its plan
    assert current.dot_files == compiled.dot_files
    affinity = next(p for p in current.dot_files if p.name.startswith("hetero_affinity_"))
    assert "OPENVINO" not in affinity.read_text()
    # the compile's revision, and what was read of it, are as they were
    assert [s.device for s in first.plan.subgraphs] == ["CPU", "OPENVINO"]
    assert [s.device for s in held] == ["CPU", "OPENVINO"]


def test_a_revision_and_its_subgraphs_are_frozen():
    compiled = cpu_split(reshape_neg())
    current = compiled.current()
    assert len(current.subgraphs) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        current.plan = current.plan  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        current.number = 7  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        current.subgraphs[0].session = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        current.types["b"] = None  # type: ignore[index]
    assert isinstance(current.subgraphs, tuple) and isinstance(current.runs, tuple)
    assert isinstance(current.subgraphs[0].placement, tuple)
    with pytest.raises(AttributeError):  # the compiled model's names are read-only views
        compiled.plan = current.plan  # type: ignore[misc]
    with pytest.raises(AttributeError):
        compiled.subgraphs = ()  # type: ignore[misc]


def test_a_relax_builds_the_next_revision_with_its_types_and_leaves_the_first():
    """b's value_info [2,3] holds for a batch of one only: a batch of two makes the second subgraph refuse
    b, and relax compiles both again with b's first dimension dynamic, as a later revision (the outputs
    made per inference where their shapes came out other than declared are revisions too)."""
    proto = reshape_neg(vi("b", [2, 3]))
    compiled = cpu_split(proto)
    first = compiled.current()
    assert first.number == 0 and dict(first.types) == {}
    x = seeded((2, 6))
    assert_same(compiled({"x": x}), ort_run(proto, {"x": x}))
    current = compiled.current()
    assert current.number >= 1 and current.plan is first.plan
    assert all(a is not b for a, b in zip(current.subgraphs, first.subgraphs, strict=True))
    dims = current.types["b"].tensor_type.shape.dim
    assert not dims[0].HasField("dim_value") and dims[1].dim_value == 3
    assert dict(first.types) == {}  # revision 0 keeps the types it was compiled with
    assert [i.shape for i in first.subgraphs[1].session.get_inputs()] == [[2, 3]]


def test_a_request_made_before_a_relax_runs_the_new_revision_from_its_next_inference():
    proto = reshape_neg(vi("b", [2, 3]))
    compiled = cpu_split(proto)
    before = compiled.create_infer_request()
    x1 = seeded((1, 6))
    assert_same(before.infer({"x": x1}), ort_run(proto, {"x": x1}))
    x2 = seeded((2, 6), seed=2)
    assert_same(compiled({"x": x2}), ort_run(proto, {"x": x2}))  # relaxes: a new revision
    relaxed = compiled.current()
    assert relaxed.number >= 1
    got = before.infer({"x": x2})
    np.testing.assert_array_equal(got["y"], ort_run(proto, {"x": x2})["y"])
    assert compiled.current() is relaxed  # it took that revision as it started, nothing was relaxed again
