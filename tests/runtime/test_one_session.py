"""PERFORMANCE_HINT=LATENCY (the default): an automatic split whose plan the query's whole-model session
already placed node for node runs in that one session; THROUGHPUT, profiling, other settings or another
placement keep one session per subgraph."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from support.helpers import (
    ACCELERATOR,
    SPLIT,
    SPLIT_TOLERANCE,
    assert_same,
    hardmax_model,
    needs_accelerator,
    needs_openvino,
    ort_run,
    queued_results,
    seeded,
)

import hetero_cli as hc
import hetero_cli.hint as hints
from hetero_cli import cli
from hetero_cli.ort.session import SUBGRAPH, SessionRequest, observe_sessions
from hetero_cli.placement import query
from hetero_cli.placement.config import SplitConfig
from hetero_cli.placement.devices import lookup
from hetero_cli.placement.partition import partition
from hetero_cli.runtime import compiler as compile

# the accelerator's EP refuses the hardmax model's Hardmax (OpenVINO and CUDA alike): <acc>, CPU, <acc>
THREE = [ACCELERATOR, "CPU", ACCELERATOR]


def ort_split(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One ORT session with providers [<accelerator's EP>, CPU]: ORT's own split of the model."""
    import onnxruntime as ort

    providers = lookup(ACCELERATOR).providers()
    sess = ort.InferenceSession(proto.SerializeToString(), providers=providers)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds), strict=True))


def near_cpu(got: dict[str, np.ndarray], proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """Results within the accelerator's tolerance of one plain CPU session's."""
    want = ort_run(proto, feeds)
    assert list(got) == list(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, **SPLIT_TOLERANCE, err_msg=name)


@pytest.fixture
def no_subgraph_sessions(monkeypatch):
    """Fail the test if the compile creates a session for any subgraph, or prepares one at all (a probe
    session reused through prepare_subgraph counts: the one-session path never goes there)."""

    def refuse(request: SessionRequest) -> None:
        if request.purpose == SUBGRAPH:
            raise AssertionError("a subgraph session was created")

    def refuse_prepare(*args, **kwargs):
        raise AssertionError("a subgraph was prepared")

    monkeypatch.setattr(compile, "prepare_subgraph", refuse_prepare)
    with observe_sessions(refuse):
        yield


@needs_accelerator
def test_latency_runs_an_automatic_split_in_the_query_session(no_subgraph_sessions):
    proto = hardmax_model()
    compiled = hc.Core().compile_model(proto, SPLIT)
    assert [s.device for s in compiled.subgraphs] == THREE
    assert compiled.one_session and len(compiled.runs) == 1
    assert compiled.get_property("NUMBER_OF_SUBGRAPHS") == 3
    assert compiled.get_property("PERFORMANCE_HINT") == "LATENCY"
    assert compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS") == 1
    (session,) = {id(s.session) for s in compiled.subgraphs}
    assert session == id(compiled.runs[0].session)
    assert all(s.from_probe and not s.fallback_nodes for s in compiled.subgraphs)
    x = seeded((2, 4))
    got = compiled.create_infer_request().infer({"x": x})
    assert_same(got, ort_split(proto, {"x": x}), exact=True)  # ORT's own split, bit for bit
    near_cpu(got, proto, {"x": x})


@needs_accelerator
@pytest.mark.parametrize(
    "config",
    [
        {"PERFORMANCE_HINT": "THROUGHPUT"},
        {hints.performance_mode: hints.PerformanceMode.CUMULATIVE_THROUGHPUT},
        {"PERF_COUNT": "YES"},
        {"CPU": {"INFERENCE_NUM_THREADS": 1}},  # the CPU's part would run on the accelerator's threads
    ],
    ids=["throughput", "cumulative", "profiling", "threads_differ"],
)
def test_a_session_per_subgraph_otherwise(config):
    proto = hardmax_model()
    compiled = hc.Core().compile_model(proto, SPLIT, config)
    assert not compiled.one_session
    assert compiled.runs == compiled.subgraphs
    assert not any(s.from_probe for s in compiled.subgraphs)
    assert len({id(s.session) for s in compiled.subgraphs}) == 3
    x = seeded((2, 4))
    near_cpu(compiled({"x": x}), proto, {"x": x})


@needs_openvino  # the CUDA EP takes no INFERENCE_NUM_THREADS
def test_the_same_threads_for_both_devices_keep_one_session(no_subgraph_sessions):
    config = {"OPENVINO": {"INFERENCE_NUM_THREADS": 1}, "CPU": {"INFERENCE_NUM_THREADS": 1}}
    compiled = hc.Core().compile_model(hardmax_model(), SPLIT, config)
    assert compiled.one_session
    assert compiled.runs[0].session.get_session_options().intra_op_num_threads == 1


@needs_accelerator
def test_manual_affinities_keep_a_session_per_subgraph():
    core = hc.Core()
    automatic = core.plan(hardmax_model(), SPLIT).affinities
    model = core.read_model(hardmax_model())
    model.set_affinities(dict(automatic))  # the very placement, but by hand: no query, no probe
    compiled = core.compile_model(model, SPLIT)
    assert not compiled.one_session and len(compiled.runs) == 3


@needs_accelerator
def test_a_plan_the_probe_did_not_place_is_not_run_in_it():
    model = hc.Core().read_model(hardmax_model())
    devices = {ACCELERATOR: lookup(ACCELERATOR), "CPU": lookup("CPU")}
    probes = query.Probes()
    affinities = query.greedy(model, list(devices.values()), probes)
    plan = partition(model, affinities)
    assert len(plan.subgraphs) > 1
    assert compile.whole_plan_probe(model, plan, devices, SplitConfig(), probes) is not None
    moved = dict(affinities, relu="CPU" if affinities["relu"] == ACCELERATOR else ACCELERATOR)
    other = partition(model, moved)
    assert compile.whole_plan_probe(model, other, devices, SplitConfig(), probes) is None


@needs_accelerator
def test_nodes_fused_away_do_not_matter_but_a_cpu_fusion_does():
    """ORT's record names what the session runs: a plan node missing from it was fused into another (a
    quantized model's scale multiplications) and runs there; a fused node of its own name on the EP is the
    EP's business; one on the CPU EP may hold nodes the plan gives the EP, so the plan is not the session."""
    model = hc.Core().read_model(hardmax_model())
    devices = {ACCELERATOR: lookup(ACCELERATOR), "CPU": lookup("CPU")}
    probes = query.Probes()
    plan = partition(model, query.greedy(model, list(devices.values()), probes))
    real = probes[ACCELERATOR].placement
    ep = lookup(ACCELERATOR).ep
    cpu_nodes = {n for s in plan.subgraphs if s.device == "CPU" for n in s.nodes}
    edits = {
        "one CPU node fused away": (
            [(ep, [n for n in ns if n[0] != min(cpu_nodes)]) for ep, ns in real],
            True,
        ),
        "a fusion on the EP": ([*real, (ep, [("a/b_fusion", "Gemm")])], True),
        "a fusion on the CPU EP": ([*real, ("CPUExecutionProvider", [("a/b_fusion", "Gemm")])], False),
    }
    for case, (record, one) in edits.items():
        # the probe as if ORT had placed its nodes as ``record`` says
        edited = {**probes, ACCELERATOR: dataclasses.replace(probes[ACCELERATOR], placement=record)}
        chosen = compile.whole_plan_probe(model, plan, devices, SplitConfig(), edited)
        assert (chosen is not None) == one, case


@needs_accelerator
def test_requests_in_flight_on_one_session_give_each_its_results():
    proto = hardmax_model()
    compiled = hc.Core().compile_model(proto, SPLIT)
    assert compiled.one_session
    xs = [seeded((2, 4), seed=i) for i in range(6)]
    for got, x in zip(queued_results(compiled, xs, 3), xs, strict=True):
        np.testing.assert_array_equal(got, ort_split(proto, {"x": x})["y"])


def test_performance_hint_values():
    core = hc.Core()
    core.set_property("HETERO", {"performance_hint": "throughput"})
    assert core.get_property("HETERO", "PERFORMANCE_HINT") == "THROUGHPUT"  # the mode, as OpenVINO names it
    assert "PERFORMANCE_HINT" in core.get_property("HETERO", "SUPPORTED_PROPERTIES")
    with pytest.raises(hc.ConfigError, match="PERFORMANCE_HINT: use LATENCY, THROUGHPUT"):
        core.set_property("HETERO", {"PERFORMANCE_HINT": "FAST"})
    compiled = hc.Core().compile_model(hardmax_model(), "CPU", {"PERFORMANCE_HINT": "THROUGHPUT"})
    assert compiled.get_property("PERFORMANCE_HINT") == "THROUGHPUT"  # a plain device takes it too


@needs_accelerator
@pytest.mark.parametrize("hint", ["latency", "throughput"])
def test_benchmark_says_when_one_session_runs_the_split(tmp_path, hint):
    path = tmp_path / "hardmax.onnx"
    onnx.save(hardmax_model(), path)
    args = ["-m", str(path), "-d", SPLIT, "-niter", "5", "-api", "sync", "-hint", hint]
    result = CliRunner().invoke(cli.benchmark, args)
    assert result.exit_code == 0, result.stderr
    said = "the 3 subgraphs run in one ONNX Runtime session" in result.stdout
    assert said == (hint == "latency")
    assert f"PERFORMANCE_HINT: {hint.upper()}" in result.stdout


@needs_accelerator
def test_a_failure_in_the_one_session_names_it():
    proto = hardmax_model()
    graph = proto.graph
    graph.node.append(onnx.helper.make_node("Reshape", ["y", "s"], ["z"], name="reshape"))
    graph.input.append(onnx.helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [2]))
    graph.output.pop()
    graph.output.append(onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None))
    compiled = hc.Core().compile_model(proto, SPLIT)
    assert compiled.one_session
    x = seeded((2, 4))
    assert compiled({"x": x, "s": np.array([4, 2], np.int64)})["z"].shape == (4, 2)
    with pytest.raises(
        hc.InferenceError,
        match=rf"^the one session of subgraph1-subgraph3 \({ACCELERATOR} and CPU\) failed: ",
    ):
        compiled({"x": x, "s": np.array([5, 5], np.int64)})


@needs_openvino
def test_a_float16_node_run_on_cpu_through_inserted_casts_is_placed_on_cpu():
    """In a float16 model the OpenVINO EP leaves Hardmax to the CPU EP, which has no float16 Hardmax: ORT
    runs it through Casts it inserts and leaves it out of its record of placements, so the node missing
    from the optimized probe's record is not taken to be fused away: the exact probe places it on CPU."""
    f16 = onnx.TensorProto.FLOAT16
    w = onnx.numpy_helper.from_array(seeded((4, 4)).astype(np.float16), "w")
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
            onnx.helper.make_node("Relu", ["m"], ["r"], name="relu"),
            onnx.helper.make_node("Hardmax", ["r"], ["hm"], name="hardmax"),
            onnx.helper.make_node("Add", ["hm", "r"], ["y"], name="add"),
        ],
        "fp16",
        [onnx.helper.make_tensor_value_info("x", f16, [2, 4])],
        [onnx.helper.make_tensor_value_info("y", f16, [2, 4])],
        [w],
    )
    proto = onnx.helper.make_model(graph, ir_version=9, opset_imports=[onnx.helper.make_opsetid("", 17)])
    core = hc.Core()
    assert core.query_model(proto, SPLIT) == {
        "matmul": "OPENVINO",
        "relu": "OPENVINO",
        "hardmax": "CPU",
        "add": "OPENVINO",
    }
    compiled = core.compile_model(proto, SPLIT)
    assert [s.device for s in compiled.subgraphs] == ["OPENVINO", "CPU", "OPENVINO"]
    x = seeded((2, 4)).astype(np.float16)
    got = compiled({"x": x})["y"]
    np.testing.assert_allclose(
        got.astype(np.float32), ort_run(proto, {"x": x})["y"].astype(np.float32), atol=1e-2
    )


@needs_accelerator
@pytest.mark.parametrize("how", ["config", "load_config"])
def test_benchmark_takes_the_hint_a_config_gives_when_no_hint_option_does(tmp_path, how):
    path = tmp_path / "hardmax.onnx"
    onnx.save(hardmax_model(), path)
    if how == "config":
        extra = ["--config", "PERFORMANCE_HINT=THROUGHPUT"]
    else:
        (tmp_path / "c.json").write_text('{"HETERO": {"PERFORMANCE_HINT": "THROUGHPUT"}}')
        extra = ["-load_config", str(tmp_path / "c.json")]
    args = ["-m", str(path), "-d", SPLIT, "-niter", "5", "-api", "sync", *extra]
    result = CliRunner().invoke(cli.benchmark, args)
    assert result.exit_code == 0, result.stderr
    assert "PERFORMANCE_HINT: THROUGHPUT" in result.stdout
    assert "run in one ONNX Runtime session" not in result.stdout
    assert "was not explicitly specified" not in result.stdout + result.stderr


@needs_openvino
def test_a_float16_tensor_made_by_a_dtype_attribute_counts_as_float16():
    """EyeLike(dtype=float16) makes the model's only float16 tensor: its Hardmax runs on CPU through
    inserted Casts, which the query must see (Model.has_half_floats reads dtype attributes too)."""
    nodes = [
        onnx.helper.make_node("Relu", ["x"], ["r"], name="relu"),
        onnx.helper.make_node("EyeLike", ["r"], ["e"], name="eye", dtype=onnx.TensorProto.FLOAT16),
        onnx.helper.make_node("Hardmax", ["e"], ["hm"], name="hardmax"),
        onnx.helper.make_node("Cast", ["hm"], ["hf"], name="cast", to=onnx.TensorProto.FLOAT),
        onnx.helper.make_node("Add", ["hf", "r"], ["y"], name="add"),
    ]
    info = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        nodes, "g", [info("x", onnx.TensorProto.FLOAT, [4, 4])], [info("y", onnx.TensorProto.FLOAT, [4, 4])]
    )
    proto = onnx.helper.make_model(graph, ir_version=9, opset_imports=[onnx.helper.make_opsetid("", 17)])
    assert hc.Model(proto).has_half_floats
    assert hc.Core().query_model(proto, SPLIT)["hardmax"] == "CPU"


@needs_accelerator
def test_the_automatic_plans_affinities_saved_and_marked_run_in_one_session(tmp_path):
    """hetero query --save and hetero tune save the automatic plan's affinities marked as such: compiled in
    manual mode, they run in the query's one session as the automatic plan did; unmarked, or edited, in a
    session per subgraph (the mark is a hint: the probe's placement decides)."""
    from hetero_cli.placement.affinities import mark_automatic, marked_automatic

    proto = hardmax_model()
    core = hc.Core()
    x = {"x": seeded((2, 4))}
    for marked, edit, one in ((True, False, True), (False, False, False), (True, True, False)):
        model = core.read_model(hardmax_model())  # a fresh proto: set_affinities writes into it
        plan = core.plan(model, SPLIT)
        affinities = dict(plan.affinities)
        if edit:
            affinities[plan.subgraphs[0].nodes[0]] = "CPU"
        model.set_affinities(affinities)
        mark_automatic(model, marked)
        path = tmp_path / f"m{marked}{edit}.onnx"
        model.save(path)
        saved = core.read_model(path)
        assert marked_automatic(saved) == marked
        compiled = core.compile_model(saved, SPLIT)
        assert compiled.one_session == one
        assert_same(compiled(x), ort_run(proto, x), exact=False)


@needs_accelerator
def test_query_save_marks_only_the_automatic_plan(tmp_path):
    from hetero_cli.placement.affinities import marked_automatic

    path = tmp_path / "m.onnx"
    onnx.save(hardmax_model(), path)
    for extra, marked in (((), True), (("--affinity", "sigmoid=CPU"), False)):
        out = tmp_path / f"saved{marked}.onnx"
        result = CliRunner().invoke(
            cli.hetero, ["query", "-m", str(path), "-d", SPLIT, "--save", str(out), *extra]
        )
        assert result.exit_code == 0, result.output
        assert marked_automatic(hc.Core().read_model(out)) == marked
