"""Compiling once: the query's probe session serves a plan of one subgraph on an EP that compiles the whole
graph, probes and type inference never copy the weights, and a whole-model subgraph loads the file itself."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as h
from support.helpers import (
    assert_same,
    const,
    hardmax_model,
    make_model,
    needs_openvino,
    optimized,
    ort_run,
    seeded,
    vi,
)

import hetero_cli as hc
from hetero_cli.ort.session import PROBE, observe_sessions
from hetero_cli.placement import query
from hetero_cli.placement.devices import lookup


def mlp(width: int = 64) -> onnx.ModelProto:
    """x[2,width] -> MatMul(w0) -> Relu -> MatMul(w1) -> y, weights large enough to count as weights."""
    nodes = [
        h.make_node("MatMul", ["x", "w0"], ["a"], name="mm0"),
        h.make_node("Relu", ["a"], ["r"], name="relu"),
        h.make_node("MatMul", ["r", "w1"], ["y"], name="mm1"),
    ]
    inits = [const("w0", seeded((width, width), seed=1)), const("w1", seeded((width, width), seed=2))]
    return make_model(nodes, [vi("x", [2, width])], [vi("y", [2, width])], inits, name="mlp")


@pytest.fixture
def mlp_file(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), path)
    return path


@needs_openvino
@pytest.mark.parametrize("pass_path", [True, False])
@pytest.mark.parametrize("device", ["HETERO:OPENVINO,CPU", "HETERO:OPENVINO"], ids=["ov_cpu", "ov"])
def test_a_plan_of_one_openvino_subgraph_uses_the_probe_session(mlp_file, device, pass_path):
    created = []
    source = str(mlp_file) if pass_path else hc.Core().read_model(mlp(), None)
    with observe_sessions(lambda request: request.purpose == PROBE and created.append(request)):
        compiled = hc.Core().compile_model(source, device)
    assert len(created) == 1  # the OpenVINO probe; the CPU one is not needed: OpenVINO claimed everything
    assert [s.from_probe for s in compiled.subgraphs] == [True]
    assert compiled.subgraphs[0].fallback_nodes == []
    x = seeded((2, 64))
    assert_same(compiled({"x": x}), ort_run(mlp(), {"x": x}), exact=False)


@needs_openvino
def test_a_probe_session_is_not_used_where_the_compile_profiles(mlp_file):
    compiled = hc.Core().compile_model(str(mlp_file), "HETERO:OPENVINO,CPU", {"PERF_COUNT": "YES"})
    assert [s.from_probe for s in compiled.subgraphs] == [False]
    x = seeded((2, 64))
    assert_same(compiled({"x": x}), ort_run(mlp(), {"x": x}), exact=False)


@needs_openvino
def test_the_probe_is_made_with_the_compiles_device_settings_and_serves_it(mlp_file):
    made = []
    config = {"OPENVINO": {"INFERENCE_NUM_THREADS": 1}}
    with observe_sessions(lambda request: request.purpose == PROBE and made.append(request)):
        compiled = hc.Core().compile_model(str(mlp_file), "HETERO:OPENVINO,CPU", config)
    (sub,) = compiled.subgraphs
    assert sub.from_probe
    assert sub.session.get_session_options().intra_op_num_threads == 1
    (probe,) = made
    assert probe.options.intra_op_num_threads == 1 and probe.providers[0][1]["num_of_threads"] == "1"
    x = seeded((2, 64))
    assert_same(compiled({"x": x}), ort_run(mlp(), {"x": x}), exact=False)


@needs_openvino
def test_a_split_plan_with_a_session_per_subgraph_keeps_no_probe_session():
    compiled = hc.Core().compile_model(
        hardmax_model(), "HETERO:OPENVINO,CPU", {"PERFORMANCE_HINT": "THROUGHPUT"}
    )
    assert len(compiled.subgraphs) == 3
    assert not any(s.from_probe for s in compiled.subgraphs)


def test_the_cpu_device_never_uses_a_probe_session(mlp_file):
    # the CPU probe runs without ORT's graph optimizations, which the CPU EP needs to be fast
    compiled = hc.Core().compile_model(str(mlp_file), "HETERO:CPU")
    assert [s.from_probe for s in compiled.subgraphs] == [False]
    x = seeded((2, 64))
    assert_same(compiled({"x": x}), ort_run(mlp(), {"x": x}))


def test_a_weightless_copy_keeps_small_initializers_and_makes_large_ones_inputs():
    model = hc.Core().read_model(mlp())
    small = const("shape", [2, 64], np.int64)
    model.proto.graph.initializer.append(small)
    light = model.weightless_copy(rename=True)
    assert [t.name for t in light.graph.initializer] == ["shape"]
    assert [i.name for i in light.graph.input] == ["x", "w0", "w1"]
    assert light.ByteSize() < 2000 < model.proto.ByteSize()
    assert [n.name for n in light.graph.node] == ["mm0", "relu", "mm1"]


def test_the_cpu_probe_without_weights_claims_what_a_probe_with_them_does():
    model = hc.Core().read_model(mlp())
    cpu = lookup("CPU")
    assert query.supported_nodes(model, cpu) == {"mm0", "relu", "mm1"}


def test_types_of_declared_tensors_need_no_shape_inference(monkeypatch):
    model = hc.Core().read_model(mlp())
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda *a, **k: pytest.fail("inferred"))
    assert model.tensor_info("x").shape == (2, 64)
    assert model.tensor_info("y").dtype == np.float32


def test_inferred_types_come_from_a_weightless_copy(monkeypatch):
    model = hc.Core().read_model(mlp())
    seen = []
    real = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(
        onnx.shape_inference, "infer_shapes", lambda m, *a, **k: seen.append(m.ByteSize()) or real(m, *a, **k)
    )
    assert model.tensor_info("r").shape == (2, 64)  # an intermediate tensor: only inference knows it
    assert seen and seen[0] < 2000


def test_the_file_serves_as_the_session_model_only_when_its_names_are_the_friendly_names(tmp_path):
    named = tmp_path / "named.onnx"
    onnx.save(mlp(), named)
    assert hc.Core().read_model(named).session_file == named
    unnamed_proto = mlp()
    for node in unnamed_proto.graph.node:
        node.name = ""
    unnamed = tmp_path / "unnamed.onnx"
    onnx.save(unnamed_proto, unnamed)
    assert hc.Core().read_model(unnamed).session_file is None
    assert hc.Core().read_model(mlp()).session_file is None  # in memory: no file
    x = seeded((2, 64))
    for path in (named, unnamed):
        got = hc.Core().compile_model(str(path), "HETERO:CPU")({"x": x})
        assert_same(got, ort_run(mlp(), {"x": x}))


def test_weights_read_from_a_file_stay_there_until_something_needs_them(mlp_file):
    model = hc.Core().read_model(mlp_file)
    assert model.weights.in_memory is False
    x = seeded((2, 64))
    want = ort_run(mlp(), {"x": x})
    assert_same(hc.Core().compile_model(model, "HETERO:CPU")({"x": x}), want)
    assert model.weights.in_memory is False  # one whole-model session: ORT read the file itself
    assert model.metadata_props == {}
    split = dict.fromkeys(["mm0", "relu"], "CPU") | {"mm1": "OPENVINO" if _has_openvino() else "CPU"}
    model.set_affinities(split)
    assert_same(
        hc.Core().compile_model(model, "HETERO:OPENVINO,CPU" if _has_openvino() else "HETERO:CPU")({"x": x}),
        want,
        exact=False,
    )
    assert model.weights.in_memory is False  # the split's sessions read them from the file too
    assert list(model.proto.graph.initializer) == list(onnx.load(mlp_file).graph.initializer)
    assert model.weights.in_memory is True  # asked for: read back


def test_an_exported_subgraph_points_at_its_weights_in_the_model_file(mlp_file):
    from hetero_cli.placement.export import subgraph_model
    from hetero_cli.placement.partition import partition

    model = hc.Core().read_model(mlp_file)
    plan = partition(model, {"mm0": "A", "relu": "B", "mm1": "A"})
    proto = subgraph_model(model, plan.subgraphs[0])
    (w0,) = proto.graph.initializer
    assert w0.name == "w0" and w0.data_location == onnx.TensorProto.EXTERNAL and not w0.raw_data
    where = {e.key: e.value for e in w0.external_data}
    assert where["location"] == mlp_file.name
    data = mlp_file.read_bytes()[int(where["offset"]) : int(where["offset"]) + int(where["length"])]
    assert data == onnx.load(mlp_file).graph.initializer[0].raw_data
    assert proto.ByteSize() < 2000 and model.weights.in_memory is False


def test_a_model_file_changed_after_reading_is_refused_before_a_session_reads_it(mlp_file):
    model = hc.Core().read_model(mlp_file)
    model.set_affinities({"mm0": "CPU", "relu": "CPU", "mm1": "CPU"})
    onnx.save(mlp(width=64), mlp_file)  # the same shapes, written again: another file as far as we know
    import os

    stat = mlp_file.stat()
    os.utime(mlp_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(hc.ModelError, match="changed on disk"):
        model.export_initializer("w0")


def test_the_weights_come_whole_through_proto_and_save(mlp_file, tmp_path):
    model = hc.Core().read_model(mlp_file)
    assert model.proto == onnx.load(mlp_file)
    model.save(tmp_path / "copy.onnx")
    assert onnx.load(tmp_path / "copy.onnx") == onnx.load(mlp_file)


@pytest.mark.parametrize("change", ["deleted", "rewritten"])
def test_a_file_changed_before_its_weights_are_read_gives_a_model_error(mlp_file, change):
    model = hc.Core().read_model(mlp_file)
    if change == "deleted":
        mlp_file.unlink()
    else:
        onnx.save(mlp(width=32), mlp_file)
    with pytest.raises(hc.ModelError, match=r"read (it|the model) again"):
        model.proto  # noqa: B018


def _has_openvino() -> bool:
    return "OPENVINO" in hc.Core().available_devices


def chain_of(ops: list[str]) -> hc.Model:
    """x -> op0 -> op1 -> ... -> y, nodes named n0, n1, ..."""
    names = ["x", *[f"t{i}" for i in range(len(ops) - 1)], "y"]
    nodes = [h.make_node(op, [names[i]], [names[i + 1]], name=f"n{i}") for i, op in enumerate(ops)]
    return hc.Core().read_model(make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])]))


@pytest.mark.parametrize(
    ("claimed", "elsewhere", "want"),
    [
        # n1, n2 fused away between two claimed nodes: claimed
        ({"n0", "n3"}, {"n4"}, {"n0", "n1", "n2", "n3"}),
        # n1 gone between two nodes that ran elsewhere: not claimed
        ({"n3", "n4"}, {"n0", "n2"}, {"n3", "n4"}),
        # n2 gone between a claimed node and one that ran elsewhere: left to the next device, which can
        # run it (a quantized model's scale multiplication between DynamicQuantizeLinear and ConvInteger)
        ({"n0", "n1"}, {"n3", "n4"}, {"n0", "n1"}),
    ],
    ids=["between_claimed", "between_elsewhere", "mixed"],
)
def test_nodes_missing_from_an_optimized_probe_take_their_neighbours_verdict(claimed, elsewhere, want):
    model = chain_of(["Relu", "Neg", "Abs", "Relu", "Neg"])
    wanted = {f"n{i}" for i in range(5)}
    assert query._resolve_missing(model, wanted, claimed, elsewhere) == want


def test_a_missing_group_with_no_named_neighbour_is_ambiguous():
    model = chain_of(["Relu", "Neg"])
    assert query._resolve_missing(model, {"n0", "n1"}, set(), set()) is None


@needs_openvino
def test_an_optimized_probe_that_cannot_tell_falls_back_to_exact_names(monkeypatch):
    monkeypatch.setattr(query, "_resolve_missing", lambda *a: None)
    calls = []
    with observe_sessions(lambda request: request.purpose == PROBE and calls.append(request)):
        compiled = hc.Core().compile_model(hardmax_model(), "HETERO:OPENVINO,CPU")
    assert [optimized(c) for c in calls[:2]] == [True, False]
    assert len(compiled.subgraphs) == 3


@needs_openvino
def test_a_node_ort_merged_with_its_repeat_takes_the_repeats_device():
    """ORT's common subexpression elimination keeps one of two identical nodes and records only it: the
    other (IsInf, which the OpenVINO EP refuses) ran where the kept one ran, on CPU, and must not be taken
    for a node OpenVINO fused. Found by test_automatic_split_around_refused_ops (hypothesis)."""
    nodes = [
        h.make_node("Abs", ["x"], ["a"], name="abs"),
        h.make_node("Exp", ["a"], ["e"], name="exp"),
        h.make_node("IsInf", ["a"], ["i1"], name="isinf_1"),
        h.make_node("Cast", ["i1"], ["c1"], name="cast_1", to=onnx.TensorProto.FLOAT),
        h.make_node("IsInf", ["a"], ["i2"], name="isinf_2"),
        h.make_node("Cast", ["i2"], ["c2"], name="cast_2", to=onnx.TensorProto.FLOAT),
        h.make_node("Add", ["c1", "c2"], ["y"], name="add"),
    ]
    model = make_model(nodes, [vi("x", (2, 2))], [vi("e", (2, 2)), vi("y", (2, 2))])
    core = hc.Core()
    compiled = core.compile_model(core.read_model(model), "HETERO:OPENVINO,CPU")
    for name in ("isinf_1", "isinf_2"):
        assert compiled.plan.affinities[name] == "CPU", name
    x = np.array([[1.0, np.inf], [-np.inf, 2.0]], np.float32)
    assert_same(compiled.create_infer_request().infer({"x": x}), ort_run(model, {"x": x}), exact=False)
