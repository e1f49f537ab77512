"""Issue 5, models with external data (small ones here; tests/graph/test_big_model.py has one over 2 GB).

Weights stay in their file: read_model does not load them, every subgraph model points at the original
file (same location and offset), ORT sessions read them from the model's folder whatever the current
directory, and saving the model elsewhere links (or copies) the data file beside the copy.
"""

from __future__ import annotations

import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from support.helpers import EXACT_F32, SPLIT, SPLIT_DEVICES, SPLIT_TOLERANCE, run_threads
from support.robust import external_model, nothing_left_behind

import hetero_cli as hc
from hetero_cli import cli
from hetero_cli.placement.export import subgraph_model

DEVICES = SPLIT_DEVICES


def reference(path, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def x_of(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 16)).astype(np.float32)


def force_split(model: hc.Model) -> None:
    for k, node in enumerate(model.get_ops()):
        node.get_rt_info()["affinity"] = DEVICES[k % len(DEVICES)]


def locations(proto: onnx.ModelProto) -> dict[str, tuple[str, str]]:
    out = {}
    for t in proto.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            out[t.name] = (info["location"], info.get("offset", "0"))
    return out


def test_read_model_leaves_the_weights_in_their_file(tmp_path):
    path = external_model(tmp_path)
    model = hc.Core().read_model(path)
    assert model.external_dir == tmp_path.resolve()
    assert set(locations(model.proto)) == {"w"}  # b (512 bytes) is read in: shape inference may need such
    assert model.proto.ByteSize() < 2000 < (tmp_path / "m.data").stat().st_size
    assert model.tensor_info("mm").shape == (1, 128)


def test_subgraph_models_point_at_the_original_weight_file(tmp_path):
    path = external_model(tmp_path)
    original = locations(onnx.load(str(path), load_external_data=False))
    model = hc.Core().read_model(path)
    force_split(model)
    with nothing_left_behind(tmp_path):
        compiled = hc.Core().compile_model(model, SPLIT)
        pointers = {}
        for sub in compiled.subgraphs:
            proto = subgraph_model(model, sub.subgraph)
            pointers.update(locations(proto))
            assert proto.ByteSize() < 4000
        assert pointers == {"w": original["w"]}
        x = x_of()
        np.testing.assert_allclose(compiled({"x": x})["y"], reference(path, x), **SPLIT_TOLERANCE)


def test_sessions_find_the_weights_from_any_current_directory(tmp_path, monkeypatch):
    path = external_model(tmp_path / "model")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with nothing_left_behind(tmp_path):
        affinities = hc.Core().query_model(str(path), SPLIT)
        assert set(affinities) == {"matmul", "add", "relu"}
        compiled = hc.Core().compile_model(str(path), SPLIT)
        x = x_of(1)
        np.testing.assert_allclose(compiled({"x": x})["y"], reference(path, x), **SPLIT_TOLERANCE)


def test_two_external_models_compiled_in_two_threads(tmp_path):
    paths = [external_model(tmp_path / f"m{k}") for k in range(2)]
    data = paths[1].parent / "m.data"
    (-np.fromfile(data, np.float32)).tofile(data)  # other weights, same layout

    def work(i: int) -> None:
        for _ in range(3):
            compiled = hc.Core().compile_model(str(paths[i]), SPLIT)
            x = x_of(2)
            np.testing.assert_allclose(compiled({"x": x})["y"], reference(paths[i], x), **SPLIT_TOLERANCE)

    run_threads(work, len(paths))


def test_save_beside_the_original_shares_its_data_file(tmp_path):
    path = external_model(tmp_path)
    model = hc.Core().read_model(path)
    force_split(model)
    model.save(tmp_path / "with_affinities.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.data", "m.onnx", "with_affinities.onnx"]
    again = hc.Core().read_model(tmp_path / "with_affinities.onnx")
    assert again.affinities() == model.affinities()
    x = x_of(3)
    np.testing.assert_allclose(
        hc.Core().compile_model(again, SPLIT)({"x": x})["y"], reference(path, x), **SPLIT_TOLERANCE
    )


def test_save_into_another_folder_copies_the_data_file(tmp_path):
    """A copy, not a hard link: a data file with several links is refused as "a potential hardlink attack"
    (hetero compile of either model failed so); both models still compile, run and export."""
    path = external_model(tmp_path / "a")
    model = hc.Core().read_model(path)
    out = tmp_path / "b" / "copy.onnx"
    out.parent.mkdir()
    model.save(out)
    copied = out.parent / "m.data"
    assert copied.read_bytes() == (path.parent / "m.data").read_bytes()
    assert os.stat(copied).st_nlink == 1 and os.stat(path.parent / "m.data").st_nlink == 1
    x = x_of(4)
    for saved in (path, out):
        compiled = hc.Core().compile_model(str(saved), "CPU")
        np.testing.assert_allclose(compiled({"x": x})["y"], reference(path, x), rtol=1e-4)
        assert compiled.export_model()


def test_save_refuses_to_overwrite_another_data_file_and_leaves_nothing(tmp_path):
    path = external_model(tmp_path / "a")
    model = hc.Core().read_model(path)
    other = tmp_path / "b"
    other.mkdir()
    (other / "m.data").write_bytes(b"someone else's weights")
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError, match=r"m\.data"):
        model.save(other / "copy.onnx")
    assert (other / "m.data").read_bytes() == b"someone else's weights"


def test_query_save_of_an_external_model_on_the_command_line(tmp_path):
    path = external_model(tmp_path / "a")
    out = tmp_path / "b" / "fixed.onnx"
    out.parent.mkdir()
    result = CliRunner().invoke(
        cli.query, ["-m", str(path), "-d", SPLIT, "--affinity", f"relu={DEVICES[-1]}", "--save", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    saved = hc.Core().read_model(out)
    assert saved.affinities()["relu"] == DEVICES[-1]
    x = x_of(5)
    np.testing.assert_allclose(
        hc.Core().compile_model(saved, SPLIT)({"x": x})["y"], reference(path, x), **SPLIT_TOLERANCE
    )


@pytest.mark.skipif(len(SPLIT_DEVICES) < 2, reason="needs a second device to split over")
def test_a_model_file_with_a_colon_in_its_name_splits(tmp_path):
    """The OpenVINO EP cannot read an external data location with a ':' in it, and exports and probes
    point at the model's own file: such a model's weights are read into memory instead. Before, its
    MatMuls (on OPENVINO) failed by hand and were put on CPU automatically, the probe having failed."""
    w = onnx.numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), "W"
    )
    nodes = [
        onnx.helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
        onnx.helper.make_node("Relu", ["m"], ["r"], name="relu"),
        onnx.helper.make_node("MatMul", ["r", "W"], ["y"], name="mm2"),
    ]
    vi = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 64]) for n in ("x", "y")]
    graph = onnx.helper.make_graph(nodes, "g", vi[:1], vi[1:], [w])
    proto = onnx.helper.make_model(graph, ir_version=9, opset_imports=[onnx.helper.make_opsetid("", 17)])
    path = tmp_path / "m:x.onnx"
    onnx.save(proto, str(path))
    accelerator = SPLIT_DEVICES[0]
    core = hc.Core()
    assert set(core.query_model(path, SPLIT).values()) == {accelerator}
    model = core.read_model(path)
    model.set_affinities({"mm": accelerator, "relu": "CPU", "mm2": accelerator})
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    got = core.compile_model(model, SPLIT, EXACT_F32).create_infer_request().infer({"x": x})["y"]
    np.testing.assert_allclose(got, want, **SPLIT_TOLERANCE)


@pytest.mark.parametrize("how", ["plain", "symlink", "hardlink"])
def test_a_model_file_reached_through_a_link(tmp_path, how):
    """A model file behind a symlink (a Hugging Face cache's layout) or with several hard links: exports
    and probes reference the real file in its own folder (ORT refuses a reference through a symlink that
    leads out of the folder), and the weights hetero-cli reads itself (a constant output, an overridable
    initializer's default) are read without onnx's external data loader, which refuses hard-linked files.
    Before, a symlinked model's weight-reading nodes went to CPU in automatic mode without a word."""
    w = onnx.numpy_helper.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096, "W")
    b = onnx.numpy_helper.from_array(np.full((2, 64), 0.5, np.float32), "B")
    nodes = [
        onnx.helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
        onnx.helper.make_node("Add", ["m", "B"], ["y"], name="add"),
    ]
    info = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [info("x", onnx.TensorProto.FLOAT, [2, 64]), info("B", onnx.TensorProto.FLOAT, [2, 64])],
        [info("y", onnx.TensorProto.FLOAT, [2, 64]), info("W", onnx.TensorProto.FLOAT, [64, 64])],
        [w, b],
    )
    proto = onnx.helper.make_model(graph, ir_version=9, opset_imports=[onnx.helper.make_opsetid("", 17)])
    (tmp_path / "real").mkdir()
    (tmp_path / "use").mkdir()
    real = tmp_path / "real" / "m.onnx"
    onnx.save(proto, str(real))
    path = real if how == "plain" else tmp_path / "use" / "m.onnx"
    if how == "symlink":
        path.symlink_to(real)
    elif how == "hardlink":
        os.link(real, path)
    if len(SPLIT_DEVICES) > 1:
        assert hc.Core().query_model(path, SPLIT)["mm"] == SPLIT_DEVICES[0]
    x = np.ones((2, 64), np.float32)
    for device in dict.fromkeys(["HETERO:CPU", SPLIT]):
        request = hc.Core().compile_model(path, device, EXACT_F32).create_infer_request()
        for feeds in ({"x": x}, {"x": x, "B": np.zeros((2, 64), np.float32)}):
            got = request.infer(feeds)
            want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(
                None, feeds
            )
            np.testing.assert_allclose(got["y"], want[0], rtol=1e-5, err_msg=device)
            np.testing.assert_array_equal(got["W"], want[1], err_msg=device)


def test_initializers_read_from_a_hard_linked_external_data_file(tmp_path):
    """A data file hard-linked into another folder (a user's layout): onnx's loader refuses it (a "hardlink
    attack"), ORT does not: hetero-cli reads an initializer output's bytes itself, from either copy."""
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).random((64, 64), dtype=np.float32), "W")
    info = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "g",
        [info("x", onnx.TensorProto.FLOAT, [2, 64])],
        [info("y", onnx.TensorProto.FLOAT, [2, 64]), info("W", onnx.TensorProto.FLOAT, [64, 64])],
        [w],
    )
    proto = onnx.helper.make_model(graph, ir_version=9, opset_imports=[onnx.helper.make_opsetid("", 17)])
    onnx.save(
        proto, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0
    )
    (tmp_path / "out").mkdir()
    shutil.copyfile(tmp_path / "m.onnx", tmp_path / "out" / "m.onnx")
    os.link(tmp_path / "m.data", tmp_path / "out" / "m.data")
    for path in (tmp_path / "m.onnx", tmp_path / "out" / "m.onnx"):
        got = (
            hc.Core()
            .compile_model(path, "HETERO:CPU")
            .create_infer_request()
            .infer({"x": np.ones((2, 64), np.float32)})
        )
        np.testing.assert_array_equal(got["W"], onnx.numpy_helper.to_array(w))


def test_a_model_read_by_a_relative_path_survives_a_change_of_directory(tmp_path, monkeypatch):
    proto = onnx.helper.make_model(
        onnx.helper.make_graph(
            [onnx.helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
            "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 64])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 64])],
            [onnx.numpy_helper.from_array(np.eye(64, dtype=np.float32), "W")],
        ),
        ir_version=9,
        opset_imports=[onnx.helper.make_opsetid("", 17)],
    )
    onnx.save(proto, str(tmp_path / "rel.onnx"))
    monkeypatch.chdir(tmp_path)
    model = hc.Core().read_model("rel.onnx")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    x = np.ones((2, 64), np.float32)
    for device in dict.fromkeys(["HETERO:CPU", SPLIT]):
        np.testing.assert_allclose(
            hc.Core().compile_model(model, device, EXACT_F32)({"x": x})["y"], x, rtol=1e-6
        )
