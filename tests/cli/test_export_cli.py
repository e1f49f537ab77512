"""``hetero export`` as a user runs it (issue 32): real splits over OPENVINO and CPU, by hand and automatic,
written as a Triton repository whose ensemble (run as Triton's scheduler runs it) gives the whole model's
outputs; and each bad input as one line, exit 2, nothing written."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import onnx
import pytest
from onnx import helper as h
from support import pypi_models
from support.helpers import ROOT, const, make_model, needs_openvino, reference, seeded, vi
from support.robust import invoke
from support.triton_repo import read_configs, run_ensemble
from tritonclient.grpc import model_config_pb2 as mc

from hetero_cli.app import export as exporting
from hetero_cli.cli import hetero
from hetero_cli.data import DEFAULT_MODEL


def _errors(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("[ ERROR ]")]


def _close(got, want) -> None:
    assert list(got) == list(want)
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=name)


def _sanitised_mlp() -> onnx.ModelProto:
    """bench's mlp_sanitised, small: a residual MLP whose activations pass IsInf -> Where every second
    block; the OpenVINO EP leaves IsInf to the CPU, so HETERO:OPENVINO,CPU cuts it into alternating
    subgraphs."""
    spec = importlib.util.spec_from_file_location("bench_graphs", ROOT / "bench" / "graphs.py")
    graphs = sys.modules.setdefault("bench_graphs", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(graphs)
    return graphs.mlp_sanitised(blocks=6, width=16, batch=4, every=2)


@needs_openvino
def test_digits_split_by_hand_runs_as_a_triton_ensemble(tmp_path):
    repo = tmp_path / "repo"
    result = invoke(
        hetero, "export", "-m", DEFAULT_MODEL, "-d", "HETERO:OPENVINO,CPU", "--affinity", "softmax=CPU",
        "--format", "triton", "-o", repo,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Wrote the Triton model repository" in result.output
    configs = read_configs(repo)
    assert sorted(configs) == ["digits", "digits_1_CPU", "digits_2_OPENVINO", "digits_3_CPU"]
    openvino = configs["digits_2_OPENVINO"]
    assert [g.kind for g in openvino.instance_group] == [mc.ModelInstanceGroup.KIND_CPU]
    accelerators = openvino.optimization.execution_accelerators.cpu_execution_accelerator
    assert [a.name for a in accelerators] == ["openvino"]
    feeds = {"image": seeded((2, 1, 32, 32))}
    _close(run_ensemble(repo, "digits", feeds), reference(onnx.load(str(DEFAULT_MODEL)), feeds))


@needs_openvino
def test_automatic_split_with_several_subgraphs_runs_as_a_triton_ensemble(tmp_path):
    proto = _sanitised_mlp()
    path = tmp_path / "mlp.onnx"
    onnx.save(proto, str(path))
    result = invoke(
        hetero, "export", "-m", path, "-d", "HETERO:OPENVINO,CPU", "--format", "triton", "-o", tmp_path / "r"
    )
    assert result.exit_code == 0, result.output
    steps = read_configs(tmp_path / "r")["mlp"].ensemble_scheduling.step
    names = [s.model_name for s in steps]
    assert len(names) >= 4 and {n.rsplit("_", 1)[1] for n in names} == {"OPENVINO", "CPU"}, names
    feeds = {"x": seeded((4, 16))}
    _close(run_ensemble(tmp_path / "r", "mlp", feeds), reference(proto, feeds))


def test_onnx_format_writes_the_files_the_manifest_names(tmp_path, chain):
    result = invoke(
        hetero, "export", "-m", chain, "-d", "HETERO:CPU", "--format", "ONNX", "-o", tmp_path / "s", "--name", "c",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["manifest.json", "subgraph1_CPU.onnx"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "tflite"], "Invalid value for '--format': 'tflite' is not one of 'triton', 'onnx'"),
        (
            ["--format", "triton", "-shape", "[1,2]"],
            "-shape gives 'x' [1,2] but dimension 0 of the model's input [4,64] is fixed at 4",
        ),
        (
            ["--format", "triton", "-d", "HETERO:CPU", "--name", "!!"],
            "--name '!!' cannot name a served model",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, chain, args, message):
    out = tmp_path / "out"
    argv = ["export", "-m", chain, "-d", "CPU", "-o", out, *args]
    result = invoke(hetero, *argv)
    assert result.exit_code == 2, result.output
    (line,) = _errors(result)
    assert message in line and "Traceback" not in result.output
    assert not out.exists()


def test_a_full_output_folder_needs_force(tmp_path, chain):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    result = invoke(hetero, "export", "-m", chain, "-d", "CPU", "--format", "triton", "-o", out)
    assert result.exit_code == 2, result.output
    (line,) = _errors(result)
    assert "exists and is not empty: give another -o folder, or --force to replace its content" in line
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    result = invoke(hetero, "export", "-m", chain, "-d", "CPU", "--format", "triton", "-o", out, "--force")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["chain", "chain_1_CPU"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.onnx", "out"]


@pytest.mark.parametrize("force", [False, True])
def test_an_output_that_is_a_link_to_a_folder_writes_into_that_folder(tmp_path, chain, force):
    """-o LINK, LINK a symbolic link to a folder (empty, or with --force a full one): the folder it leads
    to gets the split, the link stays a link to it, and nothing else is left beside either."""
    target = tmp_path / "target"
    target.mkdir()
    if force:
        (target / "old.txt").write_text("replaced")
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    argv = ["export", "-m", chain, "-d", "CPU", "--format", "onnx", "-o", link] + (
        ["--force"] if force else []
    )
    result = invoke(hetero, *argv)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and link.readlink() == target
    assert sorted(p.name for p in target.iterdir()) == ["manifest.json", "subgraph1_CPU.onnx"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.onnx", "link", "target"]


def test_a_file_in_the_folders_place_is_refused(tmp_path, chain):
    out = tmp_path / "out"
    out.write_text("a file")
    result = invoke(hetero, "export", "-m", chain, "-d", "CPU", "--format", "onnx", "-o", out, "--force")
    assert result.exit_code == 2, result.output
    assert "it is a file, not a folder" in _errors(result)[0]
    assert out.read_text() == "a file"


def test_a_split_triton_cannot_take_fails_after_the_compile_and_leaves_nothing(tmp_path):
    nodes = [h.make_node("Relu", ["x"], ["y"], name="a"), h.make_node("Identity", ["w"], ["c"], name="k")]
    path = tmp_path / "const.onnx"
    onnx.save(
        make_model(nodes, [vi("x", [2])], [vi("y", [2]), vi("c", [2])], [const("w", [1, 2])]), str(path)
    )
    result = invoke(
        hetero, "export", "-m", path, "-d", "CPU", "--format", "triton", "-o", tmp_path / "a" / "repo"
    )
    assert result.exit_code == 2, result.output
    (line,) = _errors(result)
    assert "the model's output 'c' is its constant, served without a session" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["const.onnx"]


@needs_openvino
@pytest.mark.slow
def test_a_pypi_model_split_automatically_runs_as_a_triton_ensemble(tmp_path):
    """silero-vad: If nodes, an int64 scalar input (dims [1] reshaped to []), a state carried in and out;
    HETERO:OPENVINO,CPU cuts it into four subgraphs."""
    path = pypi_models.fetch("silero_vad")
    result = invoke(
        hetero, "export", "-m", path, "-d", "HETERO:OPENVINO,CPU", "--format", "triton", "-o", tmp_path / "r"
    )
    assert result.exit_code == 0, result.output
    configs = read_configs(tmp_path / "r")
    assert len(configs["silero_vad"].ensemble_scheduling.step) >= 3
    rng = np.random.default_rng(0)
    feeds = {
        "input": (rng.standard_normal((1, 512)) * 0.3).astype(np.float32),
        "state": (rng.standard_normal((2, 1, 128)) * 0.2).astype(np.float32),
        "sr": np.array(16000, np.int64),
    }
    ensemble_config = configs["silero_vad"]
    sr = next(t for t in ensemble_config.input if t.name == "sr")
    assert list(sr.dims) == [1] and not sr.HasField("reshape")  # the member reshapes it to a scalar
    sent = {**feeds, "sr": np.array([16000], np.int64)}  # as a client sends it: the ensemble's dims
    _close(run_ensemble(tmp_path / "r", "silero_vad", sent), reference(onnx.load(str(path)), feeds))


def test_a_sequence_output_is_refused_for_triton_and_recorded_by_the_manifest(tmp_path):
    """skl2onnx's ZipMap output (a sequence of maps): Triton's onnxruntime backend passes tensors only."""
    model = ROOT / "tests" / "data" / "skl2onnx" / "logreg_zipmap.onnx"
    result = invoke(hetero, "export", "-m", model, "-d", "CPU", "--format", "triton", "-o", tmp_path / "r")
    assert result.exit_code == 2, result.output
    (line,) = _errors(result)
    assert "tensor 'output_probability' is a sequence, not a tensor" in line and "--format onnx" in line
    assert list(tmp_path.iterdir()) == []
    result = invoke(hetero, "export", "-m", model, "-d", "CPU", "--format", "onnx", "-o", tmp_path / "s")
    assert result.exit_code == 0, result.output
    outputs = {o["name"]: o for o in exporting.read_manifest(tmp_path / "s")["outputs"]}
    assert outputs["output_probability"] == {
        "name": "output_probability",
        "type": "sequence",
        "from": "subgraph1",
    }
    assert outputs["output_label"]["type"] == "tensor"


def test_weights_in_an_external_data_file_travel_inside_each_member(tmp_path):
    """The source's weights file is gone once exported: each member's model.onnx holds its own."""
    rng = np.random.default_rng(0)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        h.make_node("Relu", ["a"], ["y"], name="act"),
    ]
    proto = make_model(
        nodes, [vi("x", [2, 64])], [vi("y", [2, 64])], [const("w", rng.standard_normal((64, 64)))]
    )
    source = tmp_path / "src"
    source.mkdir()
    saved = onnx.ModelProto()
    saved.CopyFrom(proto)  # onnx.save moves the weights of what it saves out to the data file
    onnx.save(
        saved, str(source / "ext.onnx"), save_as_external_data=True, location="ext.data", size_threshold=0
    )
    result = invoke(
        hetero, "export", "-m", source / "ext.onnx", "-d", "HETERO:CPU", "--affinity", "act=CPU",
        "--format", "triton", "-o", tmp_path / "r",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (source / "ext.data").unlink()
    feeds = {"x": seeded((2, 64))}
    _close(run_ensemble(tmp_path / "r", "ext", feeds), reference(proto, feeds))
    assert sorted(p.name for p in (tmp_path / "r" / "ext_1_CPU" / "1").iterdir()) == ["model.onnx"]


def test_force_never_deletes_the_model_or_the_current_directory(tmp_path, chain, monkeypatch):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    cases = ((".", str(tmp_path / "mine")), (str(tmp_path), str(chain)), ("..", str(chain)))
    monkeypatch.chdir(tmp_path / "mine")
    for out, held in cases:
        result = invoke(hetero, "export", "-m", chain, "-d", "CPU", "--format", "onnx", "-o", out, "--force")
        assert result.exit_code == 2, result.output
        (line,) = _errors(result)
        assert f"{out} holds {held}, which --force would delete with the rest of it" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chain.onnx", "mine"]
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
