"""Asynchronous inference (issue 6): InferRequest.start_async / wait / callbacks, AsyncInferQueue, and the
device pipeline that overlaps requests across devices.

Overlap is checked with events, never timings: the pipeline's observer holds request A's last subgraph
(on the CPU lane) until request B's first subgraph (on the OPENVINO lane) has started, which only a
pipeline with one lane per device can do.
"""

from __future__ import annotations

import collections
import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import helper as h
from support.helpers import (
    ACCELERATOR,
    SPLIT,
    assert_same,
    const,
    cpu_split,
    hardmax_model,
    make_model,
    needs_openvino,
    ort_run,
    run_threads,
    seeded,
    vi,
)

import hetero_cli as hc
from hetero_cli import cli
from hetero_cli.app import benchmark as bench
from hetero_cli.runtime.pipeline import in_flight

TIMEOUT_S = 30


def chain(ops=("Relu", "Neg", "Abs", "Sigmoid", "Relu", "Neg"), shape=(8, 16)) -> onnx.ModelProto:
    names = ["x", *[f"t{i}" for i in range(len(ops) - 1)], "y"]
    nodes = [h.make_node(op, [names[i]], [names[i + 1]], name=f"n{i}") for i, op in enumerate(ops)]
    return make_model(nodes, [vi("x", shape)], [vi("y", shape)], name="chain")


def two_device_split(proto: onnx.ModelProto) -> hc.CompiledModel:
    """First half of the nodes on OPENVINO, second half on CPU: two subgraphs, two lanes."""
    model = hc.Core().read_model(proto)
    ops = [n.get_friendly_name() for n in model.get_ops()]
    model.set_affinities({name: "OPENVINO" if i < len(ops) // 2 else "CPU" for i, name in enumerate(ops)})
    compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU"]
    return compiled


def failing_model() -> onnx.ModelProto:
    """x[n] -> Relu -> Reshape to [2, 2]: fails in its second subgraph unless n = 4."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Reshape", ["r", "shape"], ["y"], name="reshape"),
    ]
    return make_model(nodes, [vi("x", ["n"])], [vi("y", [2, 2])], [const("shape", [2, 2], np.int64)])


@pytest.fixture(scope="module")
def cpu_compiled():
    return cpu_split(chain())


@pytest.fixture(scope="module")
def split_compiled():
    """The samples' model under automatic HETERO:OPENVINO,CPU or HETERO:GPU,CPU (accelerator -> CPU ->
    accelerator: neither EP has Hardmax) where one is installed, a session per subgraph (THROUGHPUT: the
    pipeline stages; test_one_session covers LATENCY's one session); a CPU-only three-way split elsewhere."""
    if ACCELERATOR:
        return hc.Core().compile_model(hardmax_model(), SPLIT, {"PERFORMANCE_HINT": "THROUGHPUT"})
    return cpu_split(hardmax_model())


def inputs(count: int, shape=(8, 16)) -> list[np.ndarray]:
    return [seeded(shape, seed=s) for s in range(count)]


# --- InferRequest ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["cpu_compiled", "split_compiled"])
def test_async_results_equal_sync_results(which, request):
    compiled = request.getfixturevalue(which)
    shape = tuple(compiled.inputs[0].shape)
    name = compiled.inputs[0].name
    sync = compiled.create_infer_request()
    req = compiled.create_infer_request()
    for x in inputs(5, shape):
        want = sync.infer({name: x})
        req.start_async({name: x})
        req.wait()
        assert_same(req.results, want)
        assert_same({k: req.get_tensor(k) for k in want}, want)
        assert req.latency > 0


def test_callback_gets_its_userdata_once_per_inference(cpu_compiled):
    req = cpu_compiled.create_infer_request()
    calls: list[tuple[object, np.ndarray]] = []
    req.set_callback(lambda userdata: calls.append((userdata, req.results["y"])), "from set_callback")
    xs = inputs(3)
    req.start_async({"x": xs[0]})
    req.wait()
    req.start_async({"x": xs[1]}, userdata=("tag", 1))  # start_async's userdata replaces the callback's
    req.wait()
    assert req.userdata == ("tag", 1)
    assert [c[0] for c in calls] == ["from set_callback", ("tag", 1)]
    for (_, y), x in zip(calls, xs, strict=False):
        assert_same({"y": y}, ort_run(chain(), {"x": x}))


def test_wait_for_returns_whether_done(cpu_compiled):
    req = cpu_compiled.create_infer_request()
    assert not req.wait_for(0)  # as in OpenVINO: no result is ready before a first inference
    req.start_async({"x": inputs(1)[0]})
    assert req.wait_for(TIMEOUT_S * 1000)
    assert_same(req.results, ort_run(chain(), {"x": inputs(1)[0]}))
    assert req.wait_for(0)
    with pytest.raises(hc.InferenceError, match="0 or more milliseconds"):
        req.wait_for(-1)  # OpenVINO raises too; wait() is the call without a limit
    synchronous = cpu_compiled.create_infer_request()
    synchronous.infer({"x": inputs(1)[0]})
    assert synchronous.wait_for(0)  # a synchronous inference's result is ready as well
    failed = cpu_compiled.create_infer_request()
    with pytest.raises(hc.InferenceError):
        failed.infer({"x": np.zeros((2, 2), np.float32)})
    assert failed.wait_for(0)  # done, though it failed: a loop polling wait_for must end


def test_wait_for_times_out_while_a_subgraph_is_held(cpu_compiled):
    pipeline = cpu_compiled.pipeline
    release = threading.Event()
    pipeline.observer = lambda event, request, position, lane: release.wait(TIMEOUT_S)
    try:
        req = cpu_compiled.create_infer_request()
        req.start_async({"x": inputs(1)[0]})
        assert req.wait_for(50) is False
        with pytest.raises(hc.InferenceError, match="wait"):
            req.start_async({"x": inputs(1)[0]})  # one inference at a time per request
    finally:
        release.set()
        pipeline.observer = None
    req.wait()


@pytest.mark.parametrize("share", [False, True])
def test_start_async_copies_its_inputs_unless_shared(cpu_compiled, share):
    """One buffer refilled right after start_async (the usual capture loop): the running inference keeps
    the values it was given, as OpenVINO's start_async copies them; share_inputs=True reads the buffer."""
    pipeline = cpu_compiled.pipeline
    release = threading.Event()
    pipeline.observer = lambda event, request, position, lane: release.wait(TIMEOUT_S)
    buffer = inputs(1)[0].copy()
    given, refill = buffer.copy(), inputs(2)[1]
    req = cpu_compiled.create_infer_request()
    try:
        req.start_async({"x": buffer}, share_inputs=share)
        buffer[:] = refill
        with pytest.raises(hc.InferenceError, match="call wait"):
            req.infer({"x": buffer})  # OpenVINO: "Infer Request is busy"
    finally:
        release.set()
        pipeline.observer = None
    req.wait()
    assert_same(req.results, ort_run(chain(), {"x": refill if share else given}))
    req.infer({"x": buffer})  # idle again


def test_a_relaunch_that_fails_completes_the_request_with_its_error(cpu_compiled, monkeypatch):
    """A subgraph whose bound buffers no longer fit starts the request again; if that start failed, the
    request never completed (wait() hung)."""
    from hetero_cli.runtime import failures, recovery

    req = cpu_compiled.create_infer_request()
    launches = []
    launch = req._launch

    def failing_relaunch(run):
        launches.append(run)
        if len(launches) > 1:
            raise MemoryError("no room for fresh buffers")
        launch(run)

    def bound_failure(step, values, buffers, windows):
        raise failures.StepFailure(step, ValueError("shape changed"), bound=True)

    monkeypatch.setattr(req, "_launch", failing_relaunch)
    monkeypatch.setattr(req._executor.course.walk, "run_step", bound_failure)
    monkeypatch.setattr(recovery, "recover", lambda compiled, walk, failed, feeds: None)
    req.start_async({"x": inputs(1)[0]})
    with pytest.raises(hc.InferenceError, match="no room for fresh buffers"):
        req.wait()


def test_ctrl_c_while_start_async_launches_reaches_the_caller_and_frees_the_request(
    cpu_compiled, monkeypatch
):
    req = cpu_compiled.create_infer_request()

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(req._executor.course.pool, "take", interrupted)
    with pytest.raises(KeyboardInterrupt):  # it was turned into the inference's failure and swallowed
        req.start_async({"x": inputs(1)[0]})
    with pytest.raises(hc.InferenceError, match="KeyboardInterrupt"):
        req.wait()
    monkeypatch.undo()
    req.start_async({"x": inputs(1)[0]})
    req.wait()
    assert in_flight.count == 0


def test_a_forked_child_counts_no_inference_of_its_parent_in_flight(cpu_compiled):
    """The child has none of the parent's lane threads: counting the parent's inferences made its exit
    wait the whole drain (10 s)."""
    pipeline = cpu_compiled.pipeline
    release = threading.Event()
    pipeline.observer = lambda event, request, position, lane: release.wait(TIMEOUT_S)
    req = cpu_compiled.create_infer_request()
    try:
        req.start_async({"x": inputs(1)[0]})
        pid = os.fork()
        if pid == 0:
            os._exit(0 if in_flight.count == 0 else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        pipeline.observer = None
    req.wait()
    assert os.waitstatus_to_exitcode(status) == 0


def test_input_errors_are_raised_by_start_async_itself(cpu_compiled):
    req = cpu_compiled.create_infer_request()
    with pytest.raises(hc.InferenceError, match="float64"):
        req.start_async({"x": np.zeros((8, 16), np.float64)})
    req.wait()  # nothing was started
    req.start_async({"x": inputs(1)[0]})
    req.wait()


def test_failure_in_a_stage_is_reraised_by_wait_and_the_request_recovers():
    proto = failing_model()
    req = cpu_split(proto).create_infer_request()
    calls = []
    req.set_callback(calls.append, "called")
    req.start_async({"x": seeded((3,))})
    with pytest.raises(hc.InferenceError, match="subgraph2 on CPU failed"):
        req.wait()
    with pytest.raises(hc.InferenceError):  # until the next start
        req.wait_for(0)
    assert calls == []  # as in OpenVINO, a failed inference does not call the callback
    x = seeded((4,))
    req.start_async({"x": x})
    req.wait()
    assert_same(req.results, ort_run(proto, {"x": x}))
    assert calls == ["called"]


def test_callback_exception_is_reraised_by_wait(cpu_compiled):
    req = cpu_compiled.create_infer_request()

    def broken(userdata):
        raise RuntimeError("no room for " + userdata)

    req.set_callback(broken, "results")
    req.start_async({"x": inputs(1)[0]})
    with pytest.raises(hc.InferenceError, match="no room for results") as err:
        req.wait()
    assert isinstance(err.value.__cause__, RuntimeError)


def test_callback_raising_system_exit_does_not_hang_its_request_or_queue(cpu_compiled):
    req = cpu_compiled.create_infer_request()
    req.set_callback(lambda userdata: sys.exit(1))
    req.start_async({"x": inputs(1)[0]})
    with pytest.raises(hc.InferenceError, match="SystemExit") as err:
        req.wait()
    assert isinstance(err.value.__cause__, SystemExit)
    req.set_callback(None)
    req.start_async({"x": inputs(1)[0]})
    req.wait()  # the request is usable again
    queue = hc.AsyncInferQueue(cpu_compiled, 2)
    queue.set_callback(lambda request, userdata: sys.exit(2))
    queue.start_async({"x": inputs(1)[0]})
    with pytest.raises(hc.InferenceError, match="SystemExit"):
        queue.wait_all()
    assert queue.is_ready() and len(queue.userdata) == 2


def test_waiting_inside_a_callback_is_refused_not_a_hang(cpu_compiled):
    """wait() on its own request, and the queue's wait_all(), get_idle_request_id() and start_async() with
    every request busy, inside a callback (on the pipeline thread that runs it): an InferenceError, which
    wait() re-raises; before, the request never completed and the device's pipeline stayed stuck. Another
    request runs after it; a wait_for inside a callback still just times out."""
    req = cpu_compiled.create_infer_request()
    req.set_callback(lambda userdata: req.wait())
    req.start_async({"x": inputs(1)[0]})
    with pytest.raises(hc.InferenceError, match=r"wait\(\) inside a callback"):
        req.wait_for(TIMEOUT_S * 1000)  # done, its failure re-raised (a hang would return False)
    timed: list[bool] = []
    req.set_callback(lambda userdata: timed.append(req.wait_for(1)))
    req.start_async({"x": inputs(1)[0]})
    req.wait()
    assert timed == [False]
    other = cpu_compiled.create_infer_request()
    other.start_async({"x": inputs(1)[0]})
    assert other.wait_for(TIMEOUT_S * 1000)
    for call in ("wait_all", "get_idle_request_id", "start_async"):
        queue = _queue_waiting_in_its_callback(cpu_compiled, call)
        failures: list[BaseException] = []
        waiter = threading.Thread(target=_failure_of, args=(queue.wait_all, failures), daemon=True)
        waiter.start()
        waiter.join(TIMEOUT_S)
        assert not waiter.is_alive(), f"{call} in the callback hung the queue"
        assert failures and f"{call}() " in str(failures[0]) and "inside a callback" in str(failures[0])


def _failure_of(call, failures: list[BaseException]) -> None:
    try:
        call()
    except hc.InferenceError as exc:
        failures.append(exc)


def _queue_waiting_in_its_callback(compiled, call: str) -> hc.AsyncInferQueue:
    """A queue of one request whose callback calls ``call`` (with that request busy), one job started."""
    queue = hc.AsyncInferQueue(compiled, 1)
    if call == "start_async":
        queue.set_callback(lambda request, userdata: queue.start_async({"x": inputs(1)[0]}))
    else:
        queue.set_callback(lambda request, userdata: getattr(queue, call)())
    queue.start_async({"x": inputs(1)[0]})
    return queue


def test_callback_may_start_the_request_again(cpu_compiled):
    req = cpu_compiled.create_infer_request()
    xs = inputs(4)
    seen: list[np.ndarray] = []
    done = threading.Event()

    def again(userdata):
        seen.append(req.results["y"])
        if len(seen) < len(xs):
            req.start_async({"x": xs[len(seen)]})
        else:
            done.set()

    req.set_callback(again, None)
    req.start_async({"x": xs[0]})
    assert done.wait(TIMEOUT_S)
    req.wait()
    for y, x in zip(seen, xs, strict=True):
        assert_same({"y": y}, ort_run(chain(), {"x": x}))


def test_requests_driven_from_several_threads(split_compiled):
    name = split_compiled.inputs[0].name
    shape = tuple(split_compiled.inputs[0].shape)
    xs = inputs(4, shape)
    want = [split_compiled.create_infer_request().infer({name: x}) for x in xs]

    def work(i: int) -> None:
        req = split_compiled.create_infer_request()
        for _ in range(10):
            req.start_async({name: xs[i]})
            req.wait()
            assert_same(req.results, want[i])

    run_threads(work, len(xs), TIMEOUT_S)


def test_profiling_counters_of_asynchronous_inferences():
    compiled = hc.Core().compile_model(chain(), "HETERO:CPU", {"PERF_COUNT": "YES"})
    req = compiled.create_infer_request()
    for x in inputs(3):
        req.start_async({"x": x})
        req.wait()
    assert len(req.get_profiling_history()) == 3
    assert {i.subgraph for i in req.get_profiling_info()} == {1}


def test_sync_infer_starts_no_thread(cpu_compiled):
    compiled = cpu_split(chain())
    before = threading.active_count()
    compiled.create_infer_request().infer({"x": inputs(1)[0]})
    assert threading.active_count() == before
    assert "_hetero_pipeline" not in vars(compiled)


def test_model_with_nothing_to_run_completes_at_once():
    nodes = [h.make_node("Constant", [], ["c"], name="cst", value=const("v", [3.0, 4.0]))]
    proto = make_model(nodes, [vi("x")], [vi("x"), vi("c")])
    compiled = hc.Core().compile_model(proto, "HETERO:CPU")
    assert compiled.subgraphs == ()
    req = compiled.create_infer_request()
    calls = []
    req.set_callback(calls.append, 1)
    x = seeded((2,))
    req.start_async({"x": x})
    req.wait()
    assert_same(req.results, ort_run(proto, {"x": x}))
    assert calls == [1]


# --- the pipeline -----------------------------------------------------------------------------------------


@needs_openvino
def test_pipeline_overlaps_requests_across_devices():
    compiled = two_device_split(chain())
    pipeline = compiled.pipeline
    a, b = compiled.create_infer_request(), compiled.create_infer_request()
    tag = {id(a): "A", id(b): "B"}
    events: list[tuple[str, str, int, str]] = []
    a_last_started, b_first_started = threading.Event(), threading.Event()
    overlapped: list[bool] = []

    def observer(event: str, request, position: int, lane: str) -> None:
        who = tag[id(request)]
        events.append((event, who, position, lane))
        if event == "start" and who == "B" and position == 0:
            b_first_started.set()
        if event == "start" and who == "A" and position == 1:
            a_last_started.set()
            # hold A's last subgraph until B's first has started: only a second lane can run it
            overlapped.append(b_first_started.wait(TIMEOUT_S))

    pipeline.observer = observer
    try:
        xa, xb = inputs(2)
        a.start_async({"x": xa})
        assert a_last_started.wait(TIMEOUT_S)
        b.start_async({"x": xb})
        a.wait()
        b.wait()
    finally:
        pipeline.observer = None
    assert overlapped == [True]
    # B's first subgraph started on the OPENVINO lane while A's last held the CPU lane
    a_window = events.index(("start", "A", 1, "CPU")), events.index(("end", "A", 1, "CPU"))
    assert a_window[0] < events.index(("start", "B", 0, "OPENVINO")) < a_window[1]
    assert pipeline.lanes == ["OPENVINO", "CPU"]
    proto = chain()
    assert_same(a.results, ort_run(proto, {"x": xa}), exact=False)
    assert_same(b.results, ort_run(proto, {"x": xb}), exact=False)


@needs_openvino
def test_each_lane_runs_one_subgraph_at_a_time_in_submission_order():
    compiled = two_device_split(chain(shape=(64, 64)))
    pipeline = compiled.pipeline
    queue = hc.AsyncInferQueue(compiled, 4)
    events: list[tuple[str, int, int, str]] = []
    lock = threading.Lock()
    ids = {id(r): k for k, r in enumerate(queue)}

    def observer(event: str, request, position: int, lane: str) -> None:
        with lock:
            events.append((event, ids[id(request)], position, lane))

    pipeline.observer = observer
    try:
        for x in inputs(16, (64, 64)):
            queue.start_async({"x": x})
        queue.wait_all()
    finally:
        pipeline.observer = None
    for lane in ("OPENVINO", "CPU"):
        mine = [(e, k) for e, k, _, name in events if name == lane]
        assert len(mine) == 32
        assert all(mine[i][0] == "start" and mine[i + 1] == ("end", mine[i][1]) for i in range(0, 32, 2))


def test_pipeline_close_stops_its_threads_and_restarts_on_demand(cpu_compiled):
    req = cpu_compiled.create_infer_request()
    req.start_async({"x": inputs(1)[0]})
    req.wait()
    pipeline = cpu_compiled.pipeline
    threads = [lane.thread for lane in pipeline._lanes.values()]
    assert threads and all(t.daemon and t.is_alive() for t in threads)
    pipeline.close()
    assert not any(t.is_alive() for t in threads)
    assert pipeline.lanes == []
    req.start_async({"x": inputs(1)[0]})
    req.wait()
    assert pipeline.lanes == ["CPU"]


def test_pipeline_threads_end_when_the_compiled_model_is_collected():
    compiled = cpu_split(chain())
    req = compiled.create_infer_request()
    req.start_async({"x": inputs(1)[0]})
    req.wait()
    threads = [lane.thread for lane in compiled.pipeline._lanes.values()]
    del req, compiled
    gc.collect()
    for t in threads:
        t.join(TIMEOUT_S)
    assert not any(t.is_alive() for t in threads)


# --- AsyncInferQueue -----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["cpu_compiled", "split_compiled"])
def test_queue_results_callbacks_and_userdata(which, request):
    compiled = request.getfixturevalue(which)
    name = compiled.inputs[0].name
    shape = tuple(compiled.inputs[0].shape)
    xs = inputs(24, shape)
    sync = compiled.create_infer_request()
    want = [sync.infer({name: x}) for x in xs]
    queue = hc.AsyncInferQueue(compiled, jobs=4)
    got: dict[int, dict[str, np.ndarray]] = {}
    calls = collections.Counter()

    def done(req: hc.InferRequest, userdata: int) -> None:
        calls[userdata] += 1
        got[userdata] = dict(req.results)

    queue.set_callback(done)
    for i, x in enumerate(xs):
        queue.start_async({name: x}, userdata=i)
    queue.wait_all()
    assert calls == collections.Counter(range(len(xs)))  # once each
    for i, w in enumerate(want):
        assert_same(got[i], w)
    # reuse: a second round on the same queue
    got.clear()
    calls.clear()
    for i, x in enumerate(reversed(xs)):
        queue.start_async({name: x}, userdata=i)
    queue.wait_all()
    assert calls == collections.Counter(range(len(xs)))
    for i, w in enumerate(reversed(want)):
        assert_same(got[i], w)


def test_queue_protocol(cpu_compiled):
    queue = hc.AsyncInferQueue(cpu_compiled, 3)
    assert len(queue) == 3
    assert all(isinstance(r, hc.InferRequest) for r in queue)
    assert queue[1] is list(queue)[1]
    assert queue.is_ready()
    assert queue.get_idle_request_id() in range(3)
    queue.start_async({"x": inputs(1)[0]}, "u")
    queue.wait_all()
    assert "u" in queue.userdata and len(queue.userdata) == 3
    with pytest.raises(hc.InferenceError):
        hc.AsyncInferQueue(cpu_compiled, -1)


def test_queue_jobs_0_is_the_optimal_number(split_compiled):
    queue = hc.AsyncInferQueue(split_compiled)
    assert len(queue) == split_compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")


def test_queue_is_not_ready_while_every_request_is_busy(cpu_compiled):
    pipeline = cpu_compiled.pipeline
    release = threading.Event()
    pipeline.observer = lambda event, request, position, lane: release.wait(TIMEOUT_S)
    queue = hc.AsyncInferQueue(cpu_compiled, 2)
    try:
        queue.start_async({"x": inputs(1)[0]})
        queue.start_async({"x": inputs(1)[0]})
        assert not queue.is_ready()
    finally:
        release.set()
        pipeline.observer = None
    queue.wait_all()
    assert queue.is_ready()


def test_queue_failure_is_reraised_then_the_queue_is_usable_again():
    proto = failing_model()
    queue = hc.AsyncInferQueue(cpu_split(proto), 2)
    results: dict[int, np.ndarray] = {}
    queue.set_callback(lambda req, userdata: results.__setitem__(userdata, req.results["y"]))
    queue.start_async({"x": seeded((3,))}, 0)
    with pytest.raises(hc.InferenceError, match="subgraph2 on CPU failed"):
        queue.wait_all()
    x = seeded((4,))
    for k in range(4):
        queue.start_async({"x": x}, k)
    queue.wait_all()
    assert sorted(results) == [0, 1, 2, 3]
    for y in results.values():
        assert_same({"y": y}, ort_run(proto, {"x": x}))


def test_queue_callback_exception_is_reraised(cpu_compiled):
    queue = hc.AsyncInferQueue(cpu_compiled, 2)

    def broken(req, userdata):
        raise KeyError(userdata)

    queue.set_callback(broken)
    queue.start_async({"x": inputs(1)[0]}, "lost")
    with pytest.raises(hc.InferenceError, match="callback raised") as err:
        queue.wait_all()
    assert isinstance(err.value.__cause__, KeyError)
    queue.set_callback(None)
    queue.start_async({"x": inputs(1)[0]})
    queue.wait_all()


def test_queue_start_async_input_error_leaves_the_request_idle(cpu_compiled):
    queue = hc.AsyncInferQueue(cpu_compiled, 1)
    with pytest.raises(hc.InferenceError, match="missing"):
        queue.start_async({}, userdata="refused")
    assert queue.is_ready()
    assert queue.userdata == [None]  # the refused job's userdata is not recorded
    queue.start_async({"x": inputs(1)[0]})
    queue.wait_all()


def test_a_dropped_queue_still_calls_back_for_the_jobs_it_started(cpu_compiled):
    called = []
    release = threading.Event()
    pipeline = cpu_compiled.pipeline
    pipeline.observer = lambda event, request, position, lane: release.wait(TIMEOUT_S)
    try:
        queue = hc.AsyncInferQueue(cpu_compiled, 2)
        queue.set_callback(lambda request, userdata: called.append(userdata))
        for k in range(2):
            queue.start_async({"x": inputs(1)[0]}, k)
        requests = list(queue)
        del queue
        gc.collect()
    finally:
        release.set()
        pipeline.observer = None
    for request in requests:
        request.wait()
    assert sorted(called) == [0, 1]


EXIT_IN_FLIGHT = """
import sys, time
import hetero_cli as hc
sys.path[:0] = {tests!r}
from test_async import chain, cpu_split, inputs
compiled = cpu_split(chain())
compiled.pipeline.observer = lambda *event: time.sleep(0.2)  # 2.4 s in all
request = compiled.create_infer_request()
request.set_callback(lambda userdata: print("callback ran", flush=True))
request.start_async({{"x": inputs(1)[0]}})
raise SystemExit(3)
"""


RESTART_AT_EXIT = """
import sys
import hetero_cli as hc
sys.path[:0] = {tests!r}
from test_async import chain, cpu_split, inputs
compiled = cpu_split(chain())
request = compiled.create_infer_request()

def again(userdata):  # OpenVINO's continuous loop: each completion starts the next inference
    try:
        request.start_async({{"x": inputs(1)[0]}})
    except hc.InferenceError as exc:
        print(exc, flush=True)

request.set_callback(again)
request.start_async({{"x": inputs(1)[0]}})
"""


def test_a_callback_restarting_its_request_does_not_hold_the_exit(tmp_path):
    """At exit, inferences in flight finish but no new one starts (the loop above held the exit for the
    whole drain, 10 s, and left lanes running after it)."""
    script = tmp_path / "restart_at_exit.py"
    script.write_text(
        RESTART_AT_EXIT.format(tests=[str(Path(__file__).parent), str(Path(__file__).parents[1])])
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip().splitlines()[-1]
        == "the interpreter is exiting: no new asynchronous inference starts"
    )


def test_the_interpreter_exits_after_the_inferences_in_flight(tmp_path):
    """A script that ends with an inference in flight: it completes (callback included) before the
    interpreter goes, instead of a lane thread being left inside ONNX Runtime's run at teardown (which
    aborted the process now and then: "terminate called without an active exception")."""
    script = tmp_path / "exit_in_flight.py"
    script.write_text(
        EXIT_IN_FLIGHT.format(tests=[str(Path(__file__).parent), str(Path(__file__).parents[1])])
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "callback ran\n"


# --- benchmark ------------------------------------------------------------------------------------------


def test_measure_async_uses_the_queue_and_counts_exactly(cpu_compiled):
    feeds = [{"x": x} for x in inputs(3)]
    result = bench.measure(cpu_compiled, feeds, nireq=3, api="async", niter=11, duration_s=None)
    assert result.count == 11 and result.nireq == 3
    assert all(lat > 0 for lat in result.latencies_ms)


def test_measure_async_raises_a_failed_inference():
    compiled = cpu_split(failing_model())
    with pytest.raises(hc.InferenceError, match="subgraph2"):
        bench.measure(compiled, [{"x": seeded((3,))}], nireq=2, api="async", niter=6, duration_s=None)


def test_cli_benchmark_async_on_a_split_model(tmp_path):
    path = tmp_path / "hardmax.onnx"
    onnx.save(hardmax_model(), path)
    device = SPLIT
    result = CliRunner().invoke(
        cli.benchmark, ["-m", str(path), "-d", device, "-api", "async", "-nireq", "2", "-niter", "9"]
    )
    assert result.exit_code == 0, result.stderr
    assert "AsyncInferQueue" in result.stdout
    assert "thread pool" not in result.stdout
    assert "Count:            10 iterations" in result.stdout  # rounded up to a multiple of -nireq
    assert "Throughput:" in result.stdout
