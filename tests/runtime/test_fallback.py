"""HETERO_FALLBACK: a subgraph that fails to compile, or fails its first inference, on its device moves to the
next device of the priority list that supports its nodes; off, the error says the setting would move it.

The two failures are the OpenVINO EP's own (tests/quirks/test_openvino_limits.py reproduces them in plain
ONNX Runtime): openvino-shape-of-output at compile time, openvino-input-order at run time.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from onnx import helper as h
from onnx import numpy_helper
from quirks.test_openvino_limits import _shape_of_output_model, _shape_piece_model
from support.helpers import hardmax_model, make_model, needs_openvino, reference, seeded, vi

import hetero_cli as hc
from hetero_cli.ort.session import SUBGRAPH, SessionRequest, observe_sessions

SPLIT = "HETERO:OPENVINO,CPU"
pytestmark = pytest.mark.openvino


def _manual(proto, affinities, default="OPENVINO") -> hc.Model:
    model = hc.Core().read_model(proto.SerializeToString())
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = affinities.get(node.get_friendly_name(), default)
    return model


def compile_failure_model():
    """Reshape -> Shape -> ConstantOfShape on OPENVINO handing the reshaped and the filled tensor on to
    Neg and Abs on CPU: the OPENVINO subgraph never compiles (openvino-shape-of-output)."""
    p = _shape_of_output_model()
    nodes = [
        *p.graph.node,
        h.make_node("Neg", ["r"], ["r2"], name="neg"),
        h.make_node("Abs", ["z"], ["z2"], name="abs"),
    ]
    proto = make_model(
        nodes, list(p.graph.input), [vi("r2", [6, 40]), vi("z2", [6, 40])], list(p.graph.initializer)
    )
    return proto, {"x": seeded((2, 3, 40))}, {"neg": "CPU", "abs": "CPU"}


def run_failure_model():
    """Shape and Relu on CPU feeding a classifier head on OPENVINO whose inputs are the int64 batch size
    and the float tensor: the OPENVINO subgraph compiles, then fails its first run (openvino-input-order)."""
    p = _shape_piece_model()
    nodes = [
        h.make_node("Shape", ["x_in"], ["n"], name="shape_of_x", start=0, end=1),
        h.make_node("Relu", ["x_in"], ["x"], name="relu"),
        *p.graph.node,
    ]
    proto = make_model(nodes, [vi("x_in", ["N", 200, 1, 1])], list(p.graph.output), list(p.graph.initializer))
    return proto, {"x_in": seeded((2, 200, 1, 1))}, {"shape_of_x": "CPU", "relu": "CPU"}


def fallback_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("HETERO_FALLBACK")]


def assert_outputs(got, want):
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6)


@needs_openvino
def test_manual_mode_keeps_its_affinities_and_says_fallback_would_move_the_subgraph():
    proto, _, affinities = compile_failure_model()
    with pytest.raises(hc.CompileError) as failed:
        hc.Core().compile_model(_manual(proto, affinities), SPLIT)
    message = str(failed.value)
    assert "subgraph1 (3 node(s) on OPENVINO" in message
    assert "z node not found in graph cache" in message
    assert "HETERO_FALLBACK=YES would move it to CPU" in message
    assert (failed.value.subgraph, failed.value.device) == ("subgraph1", "OPENVINO")


@needs_openvino
def test_a_subgraph_that_fails_to_compile_moves_to_the_next_device(caplog, tmp_path):
    proto, feeds, affinities = compile_failure_model()
    config = {"HETERO_FALLBACK": "YES", "HETERO_DUMP_GRAPH_DOT": "YES", "HETERO_DOT_DIR": str(tmp_path)}
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(_manual(proto, affinities), SPLIT, config)
    (warning,) = fallback_warnings(caplog)
    assert "subgraph1 (3 node(s)) failed to compile on OPENVINO" in warning
    assert "openvino-shape-of-output" in warning and "it runs on CPU instead" in warning
    # the moved nodes joined their CPU neighbours: one subgraph, and every report says CPU
    assert [s.device for s in compiled.subgraphs] == ["CPU"]
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU"]
    assert compiled.get_property("HETERO_FALLBACK") is True
    assert set(compiled.plan.affinities.values()) == {"CPU"}
    (move,) = compiled.moves
    assert (move.left, move.to, move.quirk) == ("OPENVINO", "CPU", "openvino-shape-of-output")
    dot = next(tmp_path.glob("hetero_affinity_*.dot")).read_text()
    assert "OPENVINO" not in dot and "CPU" in dot
    assert_outputs(compiled(feeds), reference(proto, feeds))


@needs_openvino
def test_automatic_mode_falls_back_by_default(caplog):
    proto = _shape_of_output_model()
    feeds = {"x": seeded((2, 3, 40))}
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        compiled = hc.Core().compile_model(proto, SPLIT)
    assert len(fallback_warnings(caplog)) == 1
    assert compiled.plan.devices == ["CPU"]
    assert_outputs(compiled(feeds), reference(proto, feeds))
    with pytest.raises(hc.CompileError, match="HETERO_FALLBACK=YES would move it to CPU"):
        hc.Core().compile_model(proto, SPLIT, {"HETERO_FALLBACK": "NO"})


@needs_openvino
def test_a_failure_no_device_can_take_names_every_device_tried():
    proto, _, affinities = compile_failure_model()

    def refuse_on_cpu(request: SessionRequest) -> None:
        if request.purpose == SUBGRAPH and "OpenVINOExecutionProvider" not in str(request.providers):
            raise RuntimeError("refused by the test")

    with observe_sessions(refuse_on_cpu), pytest.raises(hc.CompileError) as failed:
        hc.Core().compile_model(_manual(proto, affinities), SPLIT, {"HETERO_FALLBACK": "YES"})
    message = str(failed.value)
    assert "failed to compile on every device that supports its nodes" in message
    assert "OPENVINO: " in message and "node not found in graph cache" in message
    assert "CPU: refused by the test" in message


@needs_openvino
def test_run_time_failure_in_manual_mode_says_fallback_would_move_the_subgraph():
    proto, feeds, affinities = run_failure_model()
    compiled = hc.Core().compile_model(_manual(proto, affinities), SPLIT)
    with pytest.raises(hc.InferenceError) as failed:
        compiled(feeds)
    message = str(failed.value)
    assert message.startswith("subgraph2 on OPENVINO failed")
    assert "Can't set the input tensor" in message
    # no query ran (manual mode) and an inference makes no probe session: the next device it would try
    assert "HETERO_FALLBACK=YES would try it on CPU next" in message
    assert compiled.plan.devices == ["CPU", "OPENVINO"]


@needs_openvino
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
def test_a_subgraph_that_fails_its_first_inference_moves_within_that_inference(caplog, hint):
    proto, feeds, affinities = run_failure_model()
    config = {"HETERO_FALLBACK": "YES", "PERFORMANCE_HINT": hint, "PERF_COUNT": "YES"}
    compiled = hc.Core().compile_model(_manual(proto, affinities), SPLIT, config)
    assert compiled.plan.devices == ["CPU", "OPENVINO"]
    request = compiled.create_infer_request()
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        got = request.infer(feeds)  # the same call returns the right outputs
        assert_outputs(got, reference(proto, feeds))
        assert_outputs(request.infer(feeds), reference(proto, feeds))
    (warning,) = fallback_warnings(caplog)
    assert "subgraph2 (5 node(s)) failed its first inference on OPENVINO" in warning
    assert "openvino-input-order" in warning
    # the boundaries stay, the device changes: plan, EXECUTION_DEVICES and the counters say CPU
    assert [s.device for s in compiled.plan.subgraphs] == ["CPU", "CPU"]
    assert [s.device for s in compiled.subgraphs] == ["CPU", "CPU"]
    assert compiled.get_property("EXECUTION_DEVICES") == ["CPU"]
    assert all(compiled.plan.affinities[n] == "CPU" for n in compiled.plan.subgraphs[1].nodes)
    counters = [c for c in request.get_profiling_info() if c.subgraph == 2 and c.status == "EXECUTED"]
    assert counters and {c.exec_type for c in counters} == {"CPUExecutionProvider"}


@needs_openvino
def test_requests_in_flight_see_one_move(caplog):
    proto, feeds, affinities = run_failure_model()
    want = reference(proto, feeds)
    compiled = hc.Core().compile_model(
        _manual(proto, affinities), SPLIT, {"HETERO_FALLBACK": "YES", "PERFORMANCE_HINT": "THROUGHPUT"}
    )
    queue = hc.AsyncInferQueue(compiled, jobs=4)
    results = {}
    queue.set_callback(lambda request, k: results.__setitem__(k, dict(request.results)))
    with caplog.at_level(logging.WARNING, logger="hetero_cli"):
        for k in range(8):
            queue.start_async(feeds, userdata=k)
        queue.wait_all()
    assert sorted(results) == list(range(8))
    for got in results.values():
        assert_outputs(got, want)
    assert len(fallback_warnings(caplog)) == 1
    assert len(compiled.moves) == 1


def _reshape_model():
    """x [N, 6] -> Sigmoid -> Reshape to [3, 4] -> Hardmax -> Relu: an x with N other than 2 passes the input
    check and fails on every device; the OpenVINO EP refuses Hardmax (and a subgraph of a Reshape alone),
    so automatic mode gives OPENVINO -> CPU -> OPENVINO (one session under LATENCY)."""
    nodes = [
        h.make_node("Sigmoid", ["x"], ["g"], name="sigmoid"),
        h.make_node("Reshape", ["g", "s"], ["r"], name="reshape"),
        h.make_node("Hardmax", ["r"], ["m"], name="hardmax"),
        h.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    inits = [numpy_helper.from_array(np.array([3, 4], np.int64), "s")]
    return make_model(nodes, [vi("x", ["N", 6])], [vi("y", None)], inits)


def _feeds(n: int) -> dict[str, np.ndarray]:
    return {"x": seeded((n, 6))}


@needs_openvino
@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])
def test_a_first_inference_no_device_runs_is_an_error_and_moves_nothing(caplog, hint):
    proto = _reshape_model()
    compiled = hc.Core().compile_model(proto, SPLIT, {"PERFORMANCE_HINT": hint})
    devices = [s.device for s in compiled.subgraphs]
    assert devices == ["OPENVINO", "CPU", "OPENVINO"]
    one = compiled.one_session
    assert one == (hint == "LATENCY")
    with caplog.at_level(logging.WARNING, logger="hetero_cli"), pytest.raises(hc.InferenceError) as failed:
        compiled(_feeds(3))
    message = str(failed.value)
    assert (
        "subgraph1 (2 node(s)) failed its first inference on every device that supports its nodes" in message
    )
    assert "OPENVINO: " in message and "CPU: " in message
    assert not fallback_warnings(caplog)
    assert [s.device for s in compiled.subgraphs] == devices and compiled.one_session == one
    good = _feeds(2)
    assert_outputs(compiled(good), reference(proto, good))


@needs_openvino
def test_a_subgraph_that_completed_an_inference_never_moves(caplog):
    proto = _reshape_model()
    compiled = hc.Core().compile_model(proto, SPLIT, {"PERFORMANCE_HINT": "THROUGHPUT"})
    request = compiled.create_infer_request()
    request.infer(_feeds(2))
    with caplog.at_level(logging.WARNING, logger="hetero_cli"), pytest.raises(hc.InferenceError) as failed:
        request.infer(_feeds(3))
    assert str(failed.value).startswith("subgraph1 on OPENVINO failed")
    assert "HETERO_FALLBACK" not in str(failed.value) and not fallback_warnings(caplog)
    assert compiled.moves == ()


def test_the_setting_is_checked_and_answered():
    core = hc.Core()
    assert core.get_property("HETERO", "HETERO_FALLBACK") is True
    core.set_property("HETERO", {"HETERO_FALLBACK": "no"})
    assert core.get_property("HETERO", "HETERO_FALLBACK") is False
    with pytest.raises(hc.ConfigError, match="HETERO_FALLBACK"):
        core.set_property("HETERO", {"HETERO_FALLBACK": "sometimes"})
    compiled = core.compile_model(hardmax_model(), "HETERO:CPU")
    assert compiled.get_property("HETERO_FALLBACK") is False  # one device: nowhere to move to
    assert "HETERO_FALLBACK" in compiled.get_property("SUPPORTED_PROPERTIES")
