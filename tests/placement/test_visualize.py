"""The .dot dumps: file names, content, stable colours, escaping, and real Graphviz rendering."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import onnx
import onnx.helper as h
import pytest
from onnx import TensorProto as T
from support.helpers import ACCELERATOR, make_model, vi

import hetero_cli as hc
from hetero_cli.placement import visualize

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz 'dot' is not installed (apt-get install graphviz)"
)


def _odd_model() -> onnx.ModelProto:
    """Names with quotes, backslashes, braces, angle brackets and non-ASCII, and a diamond split."""
    nodes = [
        h.make_node("Relu", ["x"], ['a"{<b>}'], name='re"lu{<ü>}\\'),
        h.make_node("Neg", ['a"{<b>}'], ["b"], name="négatif"),
        h.make_node("Add", ['a"{<b>}', "b"], ["c"], name="add"),
        h.make_node("Reshape", ["w", "shape"], ["w2"], name="const_reshape"),
        h.make_node("Mul", ["c", "w2"], ["y"], name="mul"),
    ]
    graph = h.make_graph(
        nodes,
        'weird "graph" näme/..',
        [h.make_tensor_value_info("x", T.FLOAT, [1, 3])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 3])],
        initializer=[
            h.make_tensor("w", T.FLOAT, [3], [1, 2, 3]),
            h.make_tensor("shape", T.INT64, [2], [1, 3]),
        ],
    )
    return h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])


# a plan names devices of this machine: the second one is whichever accelerator this flavour of ORT has
OTHER = ACCELERATOR
needs_two_devices = pytest.mark.skipif(
    OTHER is None, reason="a split needs a second device: OPENVINO (onnxruntime-openvino) or GPU (CUDA)"
)


def _split(model: hc.Model) -> hc.Plan:
    devices = ["CPU", OTHER]
    for i, node in enumerate(model.get_ops()):
        node.get_rt_info()["affinity"] = devices[i % 2]
    return hc.Core().plan(model, f"HETERO:{OTHER},CPU")


@needs_two_devices
def test_file_names_and_clusters(tmp_path: Path) -> None:
    model = hc.Core().read_model(_odd_model())
    plan = _split(model)
    affinity, subgraphs = visualize.dump(model, plan, tmp_path)
    assert affinity.name == "hetero_affinity_weird_graph_n_me.dot"
    assert subgraphs.name == "hetero_subgraphs_weird_graph_n_me.dot"
    text = subgraphs.read_text()
    for s in plan.subgraphs:
        assert f'label="{s.name}: {s.device}"' in text
    assert 'color="#d62728"' in text  # crossing tensors drawn distinctly
    assert '"legend:CPU"' in text and f'"legend:{OTHER}"' in text
    assert "&#252;" in text and "lu{<" in text and '\\"' in text
    assert all(ord(ch) < 128 for ch in text)
    aff_text = affinity.read_text()
    for node in model.get_ops():
        label = visualize.quote(
            f"{node.get_friendly_name()}\n{node.get_type_name()}\ndevice={node.get_rt_info()['affinity']}"
        )
        assert f"{visualize.node_id('op', node.get_friendly_name())} [label={label}" in aff_text
    assert "device=CPU" in aff_text and f"device={OTHER}" in aff_text


@needs_two_devices
def test_same_model_twice_gives_identical_files(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        model = hc.Core().read_model(_odd_model())
        visualize.dump(model, _split(model), folder)
    for name in os.listdir(one):
        assert (one / name).read_bytes() == (two / name).read_bytes()


def test_colours_fixed_by_sorted_device_name() -> None:
    assert visualize.device_colours(["OPENVINO", "CPU"]) == visualize.device_colours(["CPU", "OPENVINO"])
    colours = visualize.device_colours(["GPU", "CPU", "OPENVINO"])
    assert colours["CPU"] == visualize.PALETTE[0] and colours["GPU"] == visualize.PALETTE[1]


@needs_two_devices
def test_model_name_falls_back_to_file_stem(tmp_path: Path) -> None:
    proto = _odd_model()
    proto.graph.name = ""
    path = tmp_path / "my model.onnx"
    onnx.save(proto, path)
    model = hc.Core().read_model(path)
    affinity, _ = visualize.dump(model, _split(model), tmp_path)
    assert affinity.name == "hetero_affinity_my_model.dot"


def test_env_variable_makes_compile_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(visualize.ENV, "1")
    hc.Core().compile_model(_odd_model(), "CPU")
    assert sorted(p.name for p in tmp_path.glob("*.dot")) == [
        "hetero_affinity_weird_graph_n_me.dot",
        "hetero_subgraphs_weird_graph_n_me.dot",
    ]


def test_old_api_config_key_dumps_into_dot_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(visualize.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    hc.Core().compile_model(
        _odd_model(), "HETERO:CPU", {"HETERO_DUMP_GRAPH_DOT": "YES", "HETERO_DOT_DIR": "dots"}
    )
    assert len(list((tmp_path / "dots").glob("*.dot"))) == 2
    assert not list(tmp_path.glob("*.dot"))


def test_no_dump_without_the_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(visualize.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    hc.Core().compile_model(_odd_model(), "HETERO:CPU")
    assert not list(tmp_path.glob("*.dot"))


def _lookalike_names(tmp_path: Path) -> tuple[Path, Path]:
    """.dot files of Relu named ``in:x`` (on input x) -> Neg named 20,000 n's -> Abs named ``out:y``."""
    long = "n" * 20_000
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="in:x"),
        h.make_node("Neg", ["a"], [long], name=long),
        h.make_node("Abs", [long], ["y"], name="out:y"),
    ]
    model = hc.Core().read_model(make_model(nodes, [vi("x", [2])], [vi("y", [2])]))
    return visualize.dump(model, hc.Core().plan(model, "HETERO:CPU"), tmp_path)


def test_names_that_look_like_other_boxes_or_run_long_get_boxes_of_their_own(tmp_path: Path) -> None:
    """An op named ``in:x`` was drawn as the box of model input ``x`` (a cycle the model does not have);
    names past Graphviz's 16,384-character limit for a quoted string made the files fail to render."""
    for path in _lookalike_names(tmp_path):
        text = path.read_text()
        assert text.count('"in:x" [') == 1 and '"op:in:x" [' in text and '"op:out:y" [' in text
        assert max(len(line) for line in text.splitlines()) < 16_384


def test_names_quoted_alike_stay_apart() -> None:
    names = ["a\tb", "a b", "&#233;", "\u00e9", "a&b"]
    assert len({visualize.quote(n) for n in names}) == len(names)


@needs_dot
def test_names_that_run_long_render(tmp_path: Path) -> None:
    for path in _lookalike_names(tmp_path):
        result = subprocess.run(["dot", "-Tsvg", str(path), "-o", os.devnull], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


@needs_dot
@needs_two_devices
def test_odd_names_render(tmp_path: Path) -> None:
    model = hc.Core().read_model(_odd_model())
    for path in visualize.dump(model, _split(model), tmp_path):
        svg = visualize.render(path, "svg")
        assert svg.stat().st_size > 0
        png = visualize.render(path, "png")
        assert png.read_bytes()[:4] == b"\x89PNG"


@needs_dot
@needs_two_devices
@pytest.mark.parametrize("path", sorted(LIGHT.glob("*.onnx")), ids=lambda p: p.stem)
def test_light_models_render(path: Path, tmp_path: Path) -> None:
    model = hc.Core().read_model(path)
    plan = _split(model)
    for dot_file in visualize.dump(model, plan, tmp_path):
        result = subprocess.run(
            ["dot", "-Tsvg", str(dot_file), "-o", os.devnull], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        assert "Warning" not in result.stderr, result.stderr


@needs_two_devices
def test_files_are_named_after_the_model_file_and_the_graph_where_they_differ(tmp_path: Path) -> None:
    """Exporters name every graph alike (main_graph, torch-jit-export): two models' files must not collide."""
    names = []
    for stem in ("encoder", "decoder"):
        proto = _odd_model()
        proto.graph.name = "main_graph"
        path = tmp_path / f"{stem}.onnx"
        onnx.save(proto, path)
        model = hc.Core().read_model(path)
        names += [p.name for p in visualize.dump(model, _split(model), tmp_path / "dots")]
    assert names == [
        "hetero_affinity_encoder_main_graph.dot",
        "hetero_subgraphs_encoder_main_graph.dot",
        "hetero_affinity_decoder_main_graph.dot",
        "hetero_subgraphs_decoder_main_graph.dot",
    ]
    proto = _odd_model()
    proto.graph.name = "same"
    onnx.save(proto, tmp_path / "same.onnx")
    model = hc.Core().read_model(tmp_path / "same.onnx")
    assert visualize.dump(model, _split(model), tmp_path)[0].name == "hetero_affinity_same.dot"
