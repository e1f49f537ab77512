"""hetero export's writers (issue 32): a split as a Triton model repository whose configs Triton's own schema
parses and whose ensemble, run step by step as Triton's scheduler runs it, gives the whole model's outputs;
as .onnx files with a manifest that reads back as written and runs the split; the device mapping; and
nothing half-written when a write fails."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper as h
from support.helpers import chain_model, const, cpu_split, make_model, reference, seeded, vi
from support.shape_chains import cuts, shape_chains, zero_out_model
from support.triton_repo import read_configs, run_ensemble
from tritonclient.grpc import model_config_pb2 as mc

from hetero_cli.app import export as exporting
from hetero_cli.app.export.folder import write_folder
from hetero_cli.app.export.members import Member, split_of
from hetero_cli.app.export.onnx_manifest import manifest_of
from hetero_cli.app.export.triton import member_config
from hetero_cli.errors import ExportError
from hetero_cli.placement import devices as registry


def _export(compiled, fmt: str, out: Path, name: str = "m", **kwargs):
    return exporting.export_split(compiled, fmt, out, name=name, **kwargs)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chain=shape_chains(), data=st.data())
def test_every_cut_of_a_shape_chain_runs_as_a_triton_ensemble(chain, data, tmp_path_factory):
    """Static shape values a subgraph holds, or that a folded group made: each member model holds its own
    (placement.export), so the ensemble needs no tensor the plan never hands on."""
    devices = data.draw(st.sampled_from(list(cuts(len(chain.names)))))
    compiled = cpu_split(chain.model, devices)
    repo = tmp_path_factory.mktemp("repo") / "out"
    split = _export(compiled, "triton", repo, name="chain")
    assert len(split.members) == len(compiled.plan.subgraphs)
    got = run_ensemble(repo, "chain", chain.feeds)
    want = reference(chain.model, chain.feeds)
    assert list(got) == list(want)
    for k, w in want.items():
        np.testing.assert_array_equal(got[k], w)


def test_every_cut_of_issue_29s_model_folds_or_holds_its_shape_values_and_runs(tmp_path):
    """zero_out_model cut every way: some plans fold the group that only feeds a static shape value,
    some subgraphs hold one (Subgraph.fixed); each ensemble gives the model's outputs all the same."""
    proto = zero_out_model()
    feeds = {"x": seeded((2, 3))}
    want = reference(proto, feeds)
    folded = held = 0
    for k, devices in enumerate(cuts(len(proto.graph.node))):
        compiled = cpu_split(proto, devices)
        folded += bool(compiled.plan.folded)
        held += any(s.fixed for s in compiled.plan.subgraphs)
        _export(compiled, "triton", tmp_path / str(k), name="zero_out")
        np.testing.assert_array_equal(run_ensemble(tmp_path / str(k), "zero_out", feeds)["y"], want["y"])
    assert folded and held


def test_repository_layout_names_and_wiring(tmp_path):
    """One model per subgraph, named <model>_<N>_<device>, and an ensemble whose steps map each member's
    tensors to the model's own names, in execution order; every config parses with model_config.proto."""
    proto = chain_model(("Relu", "Neg", "Abs", "Sigmoid"))
    compiled = cpu_split(proto, ["A", "A", "B", "A"])
    _export(compiled, "triton", tmp_path / "repo", name="chain")
    configs = read_configs(tmp_path / "repo")
    assert sorted(configs) == ["chain", "chain_1_CPU", "chain_2_CPU", "chain_3_CPU"]
    ensemble = configs["chain"]
    assert [t.name for t in ensemble.input] == ["x"] and [t.name for t in ensemble.output] == ["y"]
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == [
        "chain_1_CPU",
        "chain_2_CPU",
        "chain_3_CPU",
    ]
    first, second, _ = ensemble.ensemble_scheduling.step
    assert dict(first.input_map) == {"x": "x"} and dict(first.output_map) == {"t1": "t1"}
    assert dict(second.input_map) == {"t1": "t1"}
    member = configs["chain_1_CPU"]
    assert member.platform == "onnxruntime_onnx" and member.max_batch_size == 0
    assert [(g.kind, g.count) for g in member.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, 1)]
    assert list(member.input[0].dims) == [2, 3] and member.input[0].data_type == mc.TYPE_FP32
    # the weights travel inside each member: it loads on its own
    onnx.checker.check_model(str(tmp_path / "repo" / "chain_2_CPU" / "1" / "model.onnx"))


def test_dynamic_dims_are_minus_one_and_shape_sets_them(tmp_path):
    nodes = [h.make_node("Relu", ["x"], ["r"], name="a"), h.make_node("Neg", ["r"], ["y"], name="b")]
    proto = make_model(nodes, [vi("x", ["n", 4])], [vi("y", ["n", 4])])
    compiled = cpu_split(proto, ["A", "B"])
    _export(compiled, "triton", tmp_path / "dyn")
    configs = read_configs(tmp_path / "dyn")
    assert list(configs["m"].input[0].dims) == [-1, 4]
    assert list(configs["m_2_CPU"].input[0].dims) == [-1, 4]
    shapes = exporting.export_shapes(compiled.model, "[2,4]", None)
    assert shapes == {"x": (2, 4)}
    _export(compiled, "triton", tmp_path / "fixed", shapes=shapes)
    configs = read_configs(tmp_path / "fixed")
    assert list(configs["m"].input[0].dims) == [2, 4] and list(configs["m_1_CPU"].input[0].dims) == [2, 4]
    assert list(configs["m_2_CPU"].input[0].dims) == [-1, 4]  # what the plan hands on stays as declared


def _member(device: str) -> Member:
    proto = chain_model(("Relu",))
    spec = split_of(cpu_split(proto, ["A"]), name="m").members[0]
    return Member(0, "subgraph1", registry.lookup(device), lambda: proto, spec.inputs, spec.outputs)


@pytest.mark.parametrize(
    ("device", "kind", "gpus", "cpu_accelerators", "gpu_accelerators"),
    [
        ("CPU", "KIND_CPU", [], [], []),
        ("OPENVINO", "KIND_CPU", [], ["openvino"], []),
        ("OPENVINO.GPU", "KIND_CPU", [], ["openvino"], []),
        ("GPU", "KIND_GPU", [0], [], []),
        ("GPU.1", "KIND_GPU", [1], [], []),
        ("TENSORRT.2", "KIND_GPU", [2], [], ["tensorrt"]),
    ],
)
def test_device_mapping(device, kind, gpus, cpu_accelerators, gpu_accelerators, caplog):
    """Each device as Triton's onnxruntime backend runs it (no device needed: only the config is read);
    OpenVINO on another device than the CPU is written as the backend runs it, with a warning."""
    member = _member(device)
    split = exporting.Split("m", "HETERO", (member,), member.inputs, member.outputs, {"y": 0}, {}, ())
    config = text_format.Parse(member_config(split, member), mc.ModelConfig())
    warned = [
        r.getMessage() for r in caplog.records if "runs its OpenVINO accelerator on the CPU" in r.getMessage()
    ]
    assert len(warned) == (device == "OPENVINO.GPU")
    assert config.name == f"m_1_{device.replace('.', '_')}"
    (group,) = config.instance_group
    assert mc.ModelInstanceGroup.Kind.Name(group.kind) == kind and list(group.gpus) == gpus
    accelerators = config.optimization.execution_accelerators
    assert [a.name for a in accelerators.cpu_execution_accelerator] == cpu_accelerators
    assert [a.name for a in accelerators.gpu_execution_accelerator] == gpu_accelerators


def test_scalar_tensors_are_dims_one_which_members_reshape_to_none(tmp_path):
    """Triton's dims may not be empty: a scalar is [1]; a member reshapes it to [] for its model, the
    ensemble keeps [1] (Triton checks the ensemble's reshape against its steps' dims)."""
    nodes = [
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        h.make_node("Neg", ["s"], ["y"], name="neg"),
    ]
    proto = make_model(nodes, [vi("x", [2, 3])], [vi("y", [])])
    _export(cpu_split(proto, ["A", "B"]), "triton", tmp_path / "repo")
    configs = read_configs(tmp_path / "repo")
    (out,) = configs["m"].output
    assert list(out.dims) == [1] and not out.HasField("reshape")
    (member_out,) = configs["m_2_CPU"].output
    assert list(member_out.dims) == [1] and member_out.HasField("reshape")
    assert list(member_out.reshape.shape) == []
    feeds = {"x": seeded((2, 3))}
    got = run_ensemble(tmp_path / "repo", "m", feeds)["y"]
    assert got.shape == (1,) and got[0] == reference(proto, feeds)["y"]


def _constant_output_model() -> onnx.ModelProto:
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="a"),
        h.make_node("Neg", ["r"], ["y"], name="b"),
        h.make_node("Identity", ["w"], ["c"], name="k"),
    ]
    return make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3]), vi("c", [3])], [const("w", [1, 2, 3])])


def test_triton_refuses_an_output_no_step_makes_and_leaves_nothing(tmp_path):
    compiled = cpu_split(_constant_output_model(), ["A", "B", "A"])
    with pytest.raises(ExportError, match=r"output 'c' is its constant.*--format onnx"):
        _export(compiled, "triton", tmp_path / "deep" / "repo")
    assert list(tmp_path.iterdir()) == []


def test_manifest_round_trip_and_run(tmp_path):
    """The manifest reads back as written, and its files and links alone run the split."""
    proto = _constant_output_model()
    compiled = cpu_split(proto, ["A", "B", "A"])
    split = _export(compiled, "onnx", tmp_path / "split")
    doc = exporting.read_manifest(tmp_path / "split")
    assert doc == json.loads(json.dumps(manifest_of(split, {"c": "constants/0.npy"})))
    assert doc["outputs"] == [
        {"name": "y", "type": "tensor", "dtype": "float32", "shape": [2, 3], "from": "subgraph2"},
        {
            "name": "c",
            "type": "tensor",
            "dtype": "float32",
            "shape": [3],
            "from": "constant",
            "value": "constants/0.npy",
        },
    ]
    assert doc["links"] == [
        {"tensor": "x", "from": None, "to": ["subgraph1"]},
        {"tensor": "r", "from": "subgraph1", "to": ["subgraph2"]},
    ]
    feeds = {"x": seeded((2, 3))}
    assert_runs(tmp_path / "split", doc, feeds, reference(proto, feeds))


def assert_runs(folder: Path, doc, feeds, want) -> None:
    """Run the manifest's subgraphs in order, each reading what the links say, and compare."""
    tensors = dict(feeds)
    for sub in doc["subgraphs"]:
        session = ort.InferenceSession(str(folder / sub["file"]), providers=["CPUExecutionProvider"])
        names = [t["name"] for t in sub["outputs"]]
        fed = {link["tensor"] for link in doc["links"] if sub["name"] in link["to"]}
        assert fed == {t["name"] for t in sub["inputs"]}
        tensors.update(zip(names, session.run(names, {n: tensors[n] for n in fed}), strict=True))
    for out in doc["outputs"]:
        got = np.load(folder / out["value"]) if out["from"] == "constant" else tensors[out["name"]]
        np.testing.assert_array_equal(got, want[out["name"]])


def test_read_manifest_refuses_a_folder_it_did_not_write(tmp_path):
    with pytest.raises(ExportError, match="cannot read"):
        exporting.read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": "other"}')
    with pytest.raises(ExportError, match="no hetero-cli-split manifest"):
        exporting.read_manifest(tmp_path)


def test_unknown_format_is_refused():
    with pytest.raises(ExportError, match="unknown export format 'tflite': give triton or onnx"):
        exporting.check_format("tflite")


def test_a_failed_write_leaves_the_folder_as_it_was(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")

    def fails(folder: Path) -> None:
        (folder / "half.onnx").write_bytes(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_folder(out, fails, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    with pytest.raises(KeyboardInterrupt):
        write_folder(tmp_path / "a" / "b" / "new", fails, force=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_force_replaces_and_a_full_folder_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(ExportError, match="exists and is not empty: give another -o folder, or --force"):
        write_folder(out, lambda f: (f / "new.txt").write_text("new"), force=False)
    write_folder(out, lambda f: (f / "new.txt").write_text("new"), force=True)
    assert [p.name for p in out.iterdir()] == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
