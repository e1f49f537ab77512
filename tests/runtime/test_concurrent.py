"""All devices at once inside one inference (issue 45): subgraphs whose inputs are ready run at the same
time, each on a worker thread of the request's; the results are bit-identical to running the same
sessions in order; a failing branch is one clear error with nothing left running; HETERO_CONCURRENCY
chooses. On the CPU EP alone (made-up devices A, B, C), so every flavour's CI runs them."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.faults import counting_runs, failing_runs, meeting_runs
from support.graphs import WITH_SESSIONS, Case, cases
from support.helpers import (
    assert_same,
    cpu_split,
    make_model,
    needs_openvino,
    ort_run,
    queued_results,
    reference,
    run_threads,
    seeded,
    vi,
)

import hetero_cli as hc
from hetero_cli.graph import Model
from hetero_cli.ort.session import observe_sessions
from hetero_cli.placement import devices as registry
from hetero_cli.placement.config import CONCURRENCY, NUM_THREADS, SplitConfig
from hetero_cli.placement.schedule import Schedule, parse_mode, schedule_of
from hetero_cli.quirks import in_force
from hetero_cli.quirks.openvino import ONE_THREAD_EMPTY_OUTPUTS
from hetero_cli.runtime.inputs import Inputs

ONE_THREAD = {"CPU": {NUM_THREADS: 1}}  # the made-up devices' sessions: the same threads in both modes


def config(mode: str) -> SplitConfig:
    return SplitConfig({CONCURRENCY: mode}, ONE_THREAD)


def fork(rows: object = "n") -> object:
    """x [rows,4] -> Relu (A) and Neg (B), side by side -> Add (C) -> y: two branches and a join."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Neg", ["x"], ["m"], name="neg"),
        h.make_node("Add", ["r", "m"], ["y"], name="add"),
    ]
    return make_model(nodes, [vi("x", [rows, 4])], [vi("y", [rows, 4])], name="fork")


def chain(rows: object = "n") -> object:
    """x [rows,4] -> Relu -> Neg -> Abs -> y: nothing to run side by side."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Neg", ["r"], ["m"], name="neg"),
        h.make_node("Abs", ["m"], ["y"], name="abs"),
    ]
    return make_model(nodes, [vi("x", [rows, 4])], [vi("y", [rows, 4])], name="chain")


# --- the schedule: plain data ---------------------------------------------------------------------------


def test_a_fork_can_run_two_subgraphs_at_once_and_a_chain_none():
    forked = cpu_split(fork(), ["A", "B", "C"], config("AUTO")).current().schedule
    assert forked.after == ((), (), (0, 1)) and forked.width == 2 and forked.concurrent
    assert forked.together() == [(0, 1)]
    assert forked.threads == max(1, forked.cores // 2)
    assert "subgraph1+subgraph2" in forked.describe()
    in_a_row = cpu_split(chain(), ["A", "A", "A"], config("CONCURRENT")).current().schedule
    assert in_a_row.width == 1 and not in_a_row.concurrent and "one after another" in in_a_row.describe()


def test_sequential_runs_branches_one_after_another():
    compiled = cpu_split(fork(), ["A", "B", "C"], config("SEQUENTIAL"))
    schedule = compiled.current().schedule
    assert schedule.width == 2 and not schedule.concurrent and not compiled.current().concurrent
    assert "HETERO_CONCURRENCY=SEQUENTIAL" in schedule.describe()


def test_the_mode_key_takes_three_values_and_refuses_others():
    assert [parse_mode(v) for v in ("sequential", "Concurrent", "AUTO")] == [
        "SEQUENTIAL",
        "CONCURRENT",
        "AUTO",
    ]
    with pytest.raises(hc.ConfigError, match="HETERO_CONCURRENCY takes SEQUENTIAL, CONCURRENT, AUTO"):
        hc.Core().set_property("HETERO", {CONCURRENCY: "sometimes"})


def test_concurrent_on_a_plain_device_says_it_runs_the_model_whole(caplog):
    with caplog.at_level("WARNING", logger="hetero_cli"):
        plain = hc.Core().compile_model(fork(), "CPU", {CONCURRENCY: "CONCURRENT"})
    assert len(plain.subgraphs) == 1 and plain.get_property(CONCURRENCY) == "SEQUENTIAL"
    assert "CPU runs the model whole, in one session (give HETERO:CPU to cut it)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="hetero_cli"):
        hc.Core().compile_model(fork(), "HETERO:CPU", {CONCURRENCY: "CONCURRENT"})
    assert "runs the model whole" not in caplog.text


def test_the_width_counts_subgraphs_no_path_joins():
    # 0 -> 2, 1 -> 2, 1 -> 3: two at once ({0, 1}, {0, 3}, {2, 3}), never three
    plan_after = ((), (), (0, 1), (1,))
    independent = {(0, 1), (0, 3), (2, 3)}
    groups = Schedule(plan_after, 2, 2, True, 1, 2).together()
    assert groups and all(len(g) == 2 and g in independent for g in groups)
    from hetero_cli.placement.schedule import _width

    assert _width(plan_after, range(4)) == 2 and _width(((), (0,), (1,)), range(3)) == 1


# --- running side by side -------------------------------------------------------------------------------


def test_two_branches_run_at_the_same_time():
    """Each branch's run waits for the other's at a barrier: they pass only if they run at once."""
    proto = fork()
    seam = meeting_runs({"subgraph1", "subgraph2"}, timeout_s=20)
    x = seeded((3, 4))
    with observe_sessions(*seam):
        compiled = cpu_split(proto, ["A", "B", "C"], config("AUTO"))
        assert compiled.current().concurrent
        got = compiled.create_infer_request().infer({"x": x})
    assert not seam[1].barrier.broken
    assert_same(got, ort_run(proto, {"x": x}))


@WITH_SESSIONS
@given(cases(("A", "B", "C"), max_steps=12))
def test_random_branchy_splits_give_the_sequential_results_bit_for_bit(case: Case):
    model = hc.Core().read_model(case.model)
    affinities = case.affinity_map(model)
    ops = [n.get_friendly_name() for n in model.get_ops()]
    devices = [affinities[name] for name in ops]
    side_by_side = cpu_split(model, devices, config("CONCURRENT"))
    in_turn = cpu_split(model, devices, config("SEQUENTIAL"))
    got, want = side_by_side(case.feeds), in_turn(case.feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    for name, value in reference(case.model, case.feeds).items():
        np.testing.assert_allclose(got[name], value, err_msg=name, **case.tolerance(name))


def test_a_failing_branch_is_one_error_nothing_is_left_running_and_the_next_inference_is_right():
    proto = fork()
    seam = failing_runs("CPU", times=0)  # the made-up devices' sessions are the CPU EP's
    x = seeded((3, 4))
    with observe_sessions(*seam):
        compiled = cpu_split(proto, ["A", "B", "C"], config("AUTO"))
        request = compiled.create_infer_request()
        seam[1].arm(1)  # the first run of the next inference fails: one of the two branches
        with pytest.raises(hc.InferenceError, match=r"^subgraph[12] on CPU failed: .*failed the run"):
            request.infer({"x": x})
        assert [t for t in threading.enumerate() if t.name.startswith("hetero-branch")]  # kept, idle
        assert_same(request.infer({"x": x}), ort_run(proto, {"x": x}))


def test_concurrent_requests_on_a_concurrent_plan_each_get_their_own_results():
    proto = fork(rows=8)
    compiled = cpu_split(proto, ["A", "B", "C"], config("AUTO"))
    xs = [seeded((8, 4), seed=s) for s in range(4)]
    want = [ort_run(proto, {"x": x})["y"] for x in xs]

    def work(i: int) -> None:
        request = compiled.create_infer_request()
        for _ in range(10):
            np.testing.assert_array_equal(request.infer({"x": xs[i]})["y"], want[i])

    run_threads(work, len(xs), 120)


@pytest.mark.parametrize("seed", [0, 1])
def test_asynchronous_requests_on_a_concurrent_plan_are_right(seed):
    proto = fork(rows=4)
    compiled = cpu_split(proto, ["A", "B", "C"], config("AUTO"))
    xs = [seeded((4, 4), seed=seed * 10 + k) for k in range(6)]
    for got, x in zip(queued_results(compiled, xs, 2), xs, strict=True):
        np.testing.assert_array_equal(got, ort_run(proto, {"x": x})["y"])


def test_schedule_of_a_plan_gives_host_sessions_a_share_of_the_cores():
    compiled = cpu_split(fork(), ["A", "B", "C"], config("AUTO"))
    schedule = schedule_of(compiled.plan, {"A", "B", "C"}, "AUTO", cores=8)
    assert schedule.threads == 4 and schedule.host_width == 2
    assert schedule_of(compiled.plan, {"C"}, "AUTO", cores=8).threads is None  # one host session at once


def test_the_core_and_the_compiled_model_answer_hetero_concurrency():
    core = hc.Core()
    assert core.get_property("HETERO", CONCURRENCY) == "AUTO"
    core.set_property("HETERO", {CONCURRENCY: "sequential"})
    assert core.get_property("HETERO", CONCURRENCY) == "SEQUENTIAL"
    assert CONCURRENCY in core.get_property("HETERO", "SUPPORTED_PROPERTIES")
    # the compiled model answers what an inference does, whatever was asked
    forked = cpu_split(fork(), ["A", "B", "C"], config("AUTO"))
    assert forked.get_property(CONCURRENCY) == "CONCURRENT" and forked.schedule.concurrent
    in_a_row = cpu_split(chain(), ["A", "A", "A"], config("CONCURRENT"))
    assert in_a_row.get_property(CONCURRENCY) == "SEQUENTIAL"


def test_a_devices_own_threads_win_over_the_schedules_share():
    cpu = registry.lookup("CPU")
    schedule = cpu_split(fork(), ["A", "B", "C"], config("AUTO")).schedule
    shared = schedule.settings(SplitConfig(), cpu).intra_op_num_threads
    assert shared == schedule.threads
    own = SplitConfig({}, {"CPU": {NUM_THREADS: 3}})
    assert schedule.settings(own, cpu).intra_op_num_threads == 3
    assert SplitConfig().settings(cpu).intra_op_num_threads in (None, 0)  # the user's config is not changed


def two_branches(rows: object = "n") -> object:
    """x -> Relu -> Abs and x -> Neg -> Exp: two branches that meet only at the model input."""
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Abs", ["r"], ["ra"], name="abs"),
        h.make_node("Neg", ["x"], ["m"], name="neg"),
        h.make_node("Exp", ["m"], ["me"], name="exp"),
    ]
    outputs = [vi("ra", [rows, 4]), vi("me", [rows, 4])]
    return make_model(nodes, [vi("x", [rows, 4])], outputs, name="two_branches")


def test_concurrent_cuts_branches_of_one_device_apart_and_others_keep_them_whole():
    """OpenVINO's rule (nodes of one affinity joined through a Parameter are one subgraph) holds unless
    HETERO_CONCURRENCY=CONCURRENT, which cuts branches that meet only at a model input so they can overlap."""
    core = hc.Core()
    x = seeded((3, 4))
    want = ort_run(two_branches(), {"x": x})
    for mode, count in (("AUTO", 1), ("SEQUENTIAL", 1), ("CONCURRENT", 2)):
        compiled = core.compile_model(two_branches(), "HETERO:CPU", {CONCURRENCY: mode})
        assert [s.device for s in compiled.subgraphs] == ["CPU"] * count, mode
        assert compiled.plan.branches == (mode == "CONCURRENT")
        assert compiled.schedule.concurrent == (count == 2)
        assert_same(compiled({"x": x}), want)
        assert core.plan(two_branches(), "HETERO:CPU", {CONCURRENCY: mode}).to_dict()["branches"] == (
            count == 2
        )
    # a chain is one subgraph in every mode: nothing would overlap
    in_a_row = core.compile_model(chain(), "HETERO:CPU", {CONCURRENCY: "CONCURRENT"})
    assert len(in_a_row.subgraphs) == 1 and not in_a_row.schedule.concurrent
    # branches that fork and join again inside one device are cut at the fork and the join
    joined = core.compile_model(fork(), "HETERO:CPU", {CONCURRENCY: "CONCURRENT"})
    assert [s.nodes for s in joined.subgraphs] == [("relu",), ("neg",), ("add",)]
    assert joined.schedule.together() == [(0, 1)]
    assert_same(joined({"x": x}), ort_run(fork(), {"x": x}))
    # the plain CPU device is one session whatever HETERO's keys say
    assert len(core.compile_model(two_branches(), "CPU", {CONCURRENCY: "CONCURRENT"}).subgraphs) == 1


def test_two_branches_of_one_device_run_at_once_and_an_import_keeps_them_apart():
    seam = meeting_runs({"subgraph1", "subgraph2"}, timeout_s=20)
    x = seeded((3, 4))
    core = hc.Core()
    with observe_sessions(*seam):
        compiled = core.compile_model(two_branches(), "HETERO:CPU", {CONCURRENCY: "CONCURRENT"})
        got = compiled.create_infer_request().infer({"x": x})
        imported = core.import_model(compiled.export_model())
        again = imported.create_infer_request().infer({"x": x})
    assert not seam[1].barrier.broken
    assert imported.plan.branches and imported.schedule.together() == [(0, 1)]
    want = ort_run(two_branches(), {"x": x})
    assert_same(got, want)
    assert_same(again, want)


def test_the_calling_thread_gets_its_own_cores_back_after_a_concurrent_inference():
    import os

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("this platform cannot pin threads (no sched_getaffinity)")
    compiled = cpu_split(fork(), ["A", "B", "C"], config("AUTO"))
    before = os.sched_getaffinity(0)
    compiled.create_infer_request().infer({"x": seeded((3, 4))})
    assert os.sched_getaffinity(0) == before


@needs_openvino
def test_an_import_runs_its_branches_at_once_as_the_compile_did():
    """x -> Relu on OPENVINO and Neg on CPU, side by side: two subgraphs that run at once."""
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Neg", ["x"], ["m"], name="neg")]
    proto = make_model(nodes, [vi("x", [3, 4])], [vi("r", [3, 4]), vi("m", [3, 4])], name="two_outputs")
    core = hc.Core()
    model = core.read_model(proto)
    for node, device in zip(model.get_ops(), ["OPENVINO", "CPU"], strict=True):
        node.get_rt_info()["affinity"] = device
    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert len(compiled.subgraphs) == 2 and compiled.get_property(CONCURRENCY) == "CONCURRENT"
    imported = core.import_model(compiled.export_model())
    assert imported.get_property(CONCURRENCY) == "CONCURRENT"
    assert imported.schedule.together() == [(0, 1)]
    x = seeded((3, 4))
    want = ort_run(proto, {"x": x})
    for got in (compiled({"x": x}), imported({"x": x})):
        for name in ("r", "m"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6)


def test_empty_outputs_are_explained_by_inputs_that_disagree_on_a_named_dimension():
    """The hook of quirk openvino-one-thread-empty-outputs: inputs that give N two sizes are an error only
    where the outputs came out empty (the EP's answer to what it cannot broadcast); models that reuse a
    name loosely, with outputs that are not empty, pass."""
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Neg", ["m"], ["z"], name="neg")]
    proto = make_model(nodes, [vi("x", ["N", 4]), vi("m", ["N", 2])], [vi("y", ["N", 4]), vi("z", ["N", 2])])
    model = Model(proto)
    inputs = Inputs(model.inputs, model, symbols=True)
    feeds = {"x": seeded((2, 4)), "m": seeded((3, 2))}
    inputs.explain_empty(feeds, {"y": feeds["x"], "z": feeds["m"]})  # loosely named, a real answer
    with pytest.raises(hc.InferenceError, match="'N' the sizes 2 and 3"):
        inputs.explain_empty(feeds, {"y": np.zeros((0, 4), np.float32), "z": feeds["m"]})
    Inputs(model.inputs, model).explain_empty(feeds, {"y": np.zeros((0, 4), np.float32)})  # not asked


def masked_by_m() -> Model:
    """x [N,S,8] masked by m [N,S] unsqueezed: S must agree, which only shape inference can tell."""
    nodes = [
        h.make_node("Unsqueeze", ["m", "axis2"], ["m3"], name="unsqueeze"),
        h.make_node("Mul", ["x", "m3"], ["masked"], name="mask"),
    ]
    axis = [h.make_tensor("axis2", TensorProto.INT64, [1], [2])]
    inputs = [vi("x", ["N", "S", 8]), vi("m", ["N", "S"])]
    return Model(make_model(nodes, inputs, [vi("masked", None)], axis))


def test_inputs_no_node_can_take_are_refused_before_a_run_and_loosely_named_ones_pass():
    """The check before a run of quirk openvino-one-thread-empty-outputs: x [N,S,8] masked by m [N,S],
    with S 3 and 4, is refused (onnx's shape inference fails at those shapes, passes with S agreeing);
    a model that names N for inputs of other sizes, whose shapes infer, is not."""
    masked = masked_by_m()
    bad = {"x": seeded((2, 3, 8)), "m": np.zeros((2, 4), np.float32)}
    with pytest.raises(hc.InferenceError, match="'S' the sizes 3 and 4"):
        Inputs(masked.inputs, masked, symbols=True).check(bad)
    Inputs(masked.inputs, masked).check(bad)  # not asked: the check is the quirk's alone
    Inputs(masked.inputs, masked, symbols=True).check(
        {"x": seeded((2, 3, 8)), "m": np.ones((2, 3), np.float32)}
    )
    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Neg", ["m"], ["z"], name="neg")]
    loose = Model(
        make_model(nodes, [vi("x", ["N", 4]), vi("m", ["N", 2])], [vi("y", ["N", 4]), vi("z", ["N", 2])])
    )
    Inputs(loose.inputs, loose, symbols=True).check({"x": seeded((2, 4)), "m": seeded((3, 2))})


def test_refuse_conflicts_judges_each_set_of_shapes_once_and_keeps_the_latest(monkeypatch):
    """One onnx shape inference per new set of disagreeing input shapes, none for a set seen lately, and
    the oldest set's verdict dropped past runtime.inputs.VERDICTS (2 here), its inputs judged again and
    refused again: a model served at ever-new shapes does not grow the process."""
    from hetero_cli.graph.types import TypeTable
    from hetero_cli.runtime import inputs as inputs_module

    monkeypatch.setattr(inputs_module, "VERDICTS", 2)
    judged: list[dict] = []
    real = TypeTable.conflicts_at
    monkeypatch.setattr(
        TypeTable, "conflicts_at", lambda self, shapes: judged.append(shapes) or real(self, shapes)
    )
    masked = masked_by_m()
    inputs = Inputs(masked.inputs, masked, symbols=True)

    def refused(s: int) -> int:
        """Inferences the check took to refuse x with S 3 beside m with S s."""
        before = len(judged)
        with pytest.raises(hc.InferenceError, match=f"'S' the sizes 3 and {s}"):
            inputs.check({"x": seeded((2, 3, 8)), "m": np.zeros((2, s), np.float32)})
        return len(judged) - before

    assert refused(4) == 2  # at the given shapes, and with S agreeing
    assert refused(4) == 0
    assert (refused(5), refused(6)) == (2, 2)
    assert refused(4) == 2  # S 4's verdict was the oldest of three


@needs_openvino
def test_a_one_thread_openvino_session_never_runs_inputs_no_node_can_take():
    """x -> MatMul -> Relu -> Hardmax (which OpenVINO refuses: CPU) -> Mul, masked by m [N,S] unsqueezed
    on a branch of its own, OpenVINO's sessions on one thread (set so: a concurrent schedule's share of
    two cores gives the same, but not on more cores). Inputs giving S two sizes: one InferenceError, and
    where quirk openvino-one-thread-empty-outputs is in force, no OpenVINO run at all (such a run left
    the process to crash in a later inference, docs/limits.md); right inputs run as one ORT session does."""
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        h.make_node("Relu", ["a"], ["r"], name="relu"),
        h.make_node("Hardmax", ["r"], ["onehot"], name="hardmax", axis=-1),
        h.make_node("Mul", ["r", "onehot"], ["hh"], name="pick"),
        h.make_node("Unsqueeze", ["m", "axis2"], ["m3"], name="unsqueeze"),
        h.make_node("Mul", ["hh", "m3"], ["masked"], name="mask"),
    ]
    inits = [
        h.make_tensor("axis2", TensorProto.INT64, [1], [2]),
        numpy_helper.from_array(seeded((8, 8)), "w"),
    ]
    proto = make_model(nodes, [vi("x", ["N", "S", 8]), vi("m", ["N", "S"])], [vi("masked", None)], inits)
    model = hc.Core().read_model(proto)
    hooks = counting_runs("OPENVINO")
    with observe_sessions(*hooks):
        one_thread = {"PERFORMANCE_HINT": "THROUGHPUT", "OPENVINO": {NUM_THREADS: 1}}
        compiled = hc.Core().compile_model(model, "HETERO:OPENVINO,CPU", one_thread)
    assert "OPENVINO" in {s.device for s in compiled.subgraphs}
    request = compiled.create_infer_request()
    with pytest.raises(hc.InferenceError):
        request.infer({"x": seeded((2, 3, 8)), "m": np.zeros((2, 4), np.float32)})
    if in_force(ONE_THREAD_EMPTY_OUTPUTS):
        assert hooks[1].runs == []
    right = {"x": seeded((2, 3, 8)), "m": np.ones((2, 3), np.float32)}
    np.testing.assert_allclose(request.infer(right)["masked"], ort_run(proto, right)["masked"], rtol=1e-6)
    assert hooks[1].runs


def test_a_schedule_run_in_turn_says_why():
    schedule = cpu_split(fork(), ["A", "B", "C"], config("AUTO")).schedule
    kept = schedule.in_turn("the query's sessions serve")
    assert not kept.concurrent and kept.threads is None and kept.width == 2
    assert "the query's sessions serve" in kept.describe()


def test_the_timeline_shows_branches_that_ran_side_by_side_and_a_sequential_walk_none():
    """-pc's timeline: each subgraph's start and end, the wall time against their sum. The branches meet
    at a barrier, so a concurrent inference's runs overlap whatever the machine's load."""
    seam = meeting_runs({"subgraph1", "subgraph2"}, timeout_s=20)
    x = {"x": seeded((3, 4))}
    with observe_sessions(*seam):
        compiled = hc.Core().compile_model(
            two_branches(), "HETERO:CPU", {CONCURRENCY: "CONCURRENT", "PERF_COUNT": "YES"}
        )
        request = compiled.create_infer_request()
        request.infer(x)
    timeline = request.get_timeline()
    assert sorted(s.subgraph for s in timeline.spans) == [1, 2]
    assert timeline.together() == [(1, 2)] and timeline.busy_us > timeline.wall_us > 0
    tables = hc.runtime.counter_tables(
        request.get_profiling_info(), hc.runtime.subgraph_summaries(compiled.subgraphs), timeline=timeline
    )
    assert "Timeline" in tables and "ran side by side: subgraph1+subgraph2" in tables
    fresh = hc.Core().compile_model(
        two_branches(), "HETERO:CPU", {CONCURRENCY: "CONCURRENT", "PERF_COUNT": "YES"}
    )
    sequential = cpu_split(
        fork(), ["A", "B", "C"], SplitConfig({CONCURRENCY: "SEQUENTIAL", "PERF_COUNT": "YES"}, ONE_THREAD)
    )
    request = sequential.create_infer_request()
    request.infer(x)
    timeline = request.get_timeline()
    assert len(timeline.spans) == 3 and timeline.together() == []
    assert timeline.busy_us <= timeline.wall_us
    assert fresh.create_infer_request().get_timeline().spans == ()  # before any inference


def test_the_dot_file_marks_the_subgraphs_that_run_side_by_side(tmp_path):
    core = hc.Core()
    for mode, marked in (("CONCURRENT", True), ("SEQUENTIAL", False)):
        folder = tmp_path / mode
        config = {CONCURRENCY: mode, "HETERO_DUMP_GRAPH_DOT": "YES", "HETERO_DOT_DIR": str(folder)}
        core.compile_model(two_branches(), "HETERO:CPU", config)
        text = next(folder.glob("hetero_subgraphs_*.dot")).read_text()
        assert ("runs side by side with subgraph2" in text) is marked, mode
        assert ("side by side: subgraph1 + subgraph2" in text) is marked, mode


def _cores() -> int:
    from hetero_cli.placement.schedule import available_cores

    return available_cores()


def test_threads_set_beyond_the_cores_for_side_by_side_sessions_refuse_concurrent_and_auto_runs_in_turn():
    """Each branch's session asks for more than every core (the made-up devices are all the CPU device): at
    once they would take twice the cores."""
    every_core = {"CPU": {NUM_THREADS: _cores() + 1}}
    with pytest.raises(hc.ConfigError, match=r"exceed the \d+ core\(s\).*INFERENCE_NUM_THREADS.*SEQUENTIAL"):
        cpu_split(fork(), ["A", "B", "C"], SplitConfig({CONCURRENCY: "CONCURRENT"}, every_core))
    auto = cpu_split(fork(), ["A", "B", "C"], SplitConfig({CONCURRENCY: "AUTO"}, every_core)).schedule
    assert not auto.concurrent and "exceed the" in auto.describe()
    # one thread each is the least a session takes: never refused, however many run at once
    assert cpu_split(fork(), ["A", "B", "C"], config("CONCURRENT")).schedule.concurrent


def test_the_cli_refuses_a_thread_budget_over_the_cores_with_one_message_and_exit_2(tmp_path):
    import onnx
    from support.robust import invoke, one_error_line

    from hetero_cli import cli

    path = tmp_path / "two_branches.onnx"
    onnx.save(two_branches(rows=3), path)
    args = [
        cli.benchmark,
        "-m",
        path,
        "-d",
        "HETERO:CPU",
        "-niter",
        1,
        "--config",
        f"{CONCURRENCY}=CONCURRENT",
    ]
    result = invoke(*args, "--config", f"CPU:{NUM_THREADS}={_cores() + 1}")
    assert result.exit_code == 2
    assert "exceed the" in one_error_line(result)
    for bad in ("-1", "many"):
        result = invoke(*args, "--config", f"CPU:{NUM_THREADS}={bad}")
        assert result.exit_code == 2 and NUM_THREADS in one_error_line(result)
    result = invoke(cli.benchmark, "-m", path, "-d", "HETERO:CPU", "--config", f"{CONCURRENCY}=SOMETIMES")
    assert result.exit_code == 2 and "HETERO_CONCURRENCY takes" in one_error_line(result)


def test_a_plan_that_passes_strings_runs_in_turn_and_says_why():
    """Strings beside a float branch: x -> Relu, and s (strings) -> Identity, two subgraphs that could
    overlap; run in turn (placement.schedule.strings_in_turn), a numeric fork still at once."""
    from onnx import TensorProto

    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Identity", ["s"], ["t"], name="id")]
    inputs = [vi("x", [2]), h.make_tensor_value_info("s", TensorProto.STRING, [2])]
    outputs = [vi("y", [2]), h.make_tensor_value_info("t", TensorProto.STRING, [2])]
    proto = make_model(nodes, inputs, outputs, name="strings")
    compiled = cpu_split(proto, ["A", "B"], config("CONCURRENT"))
    assert compiled.schedule.width == 2 and not compiled.schedule.concurrent
    assert "strings, sequences or maps" in compiled.schedule.describe()
    got = compiled({"x": np.array([-1, 2], np.float32), "s": np.array(["a", "b"], dtype=object)})
    assert list(got["t"]) == ["a", "b"]
    assert cpu_split(fork(), ["A", "B", "C"], config("CONCURRENT")).schedule.concurrent


@needs_openvino
def test_core_schedule_of_a_plan_that_passes_strings_is_the_compiles():
    """Core.schedule given the model (what hetero query and tune show) runs a plan that passes strings in
    turn, as its compile does."""
    from onnx import TensorProto

    nodes = [h.make_node("Relu", ["x"], ["y"], name="relu"), h.make_node("Identity", ["s"], ["t"], name="id")]
    inputs = [vi("x", [2]), h.make_tensor_value_info("s", TensorProto.STRING, [2])]
    outputs = [vi("y", [2]), h.make_tensor_value_info("t", TensorProto.STRING, [2])]
    model = Model(make_model(nodes, inputs, outputs, name="strings"))
    model.set_affinities({"relu": "OPENVINO", "id": "CPU"})
    core, device, settings = hc.Core(), "HETERO:OPENVINO,CPU", {CONCURRENCY: "CONCURRENT"}
    plan = core.plan(model, device, settings)
    shown = core.schedule(plan, device, settings, model=model)
    compiled = core.compile_model(model, device, settings)
    assert shown.width == 2 and not shown.concurrent
    assert shown.describe() == compiled.schedule.describe()
