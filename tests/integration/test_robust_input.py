"""Issue 5, bad input: one clear error and nothing left behind.

Only HeteroError subclasses come out of read_model, Core.plan / query_model / compile_model and infer; the
command line prints one ``[ ERROR ]`` line and exits with 2 (usage) or 1 (run time), never a traceback or
an "internal error". No temporary files stay behind, and no partial output files.
"""

from __future__ import annotations

import io
import json
import logging
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper as h
from PIL import Image
from support.helpers import (
    HAS_OPENVINO,
    SPLIT,
    SPLIT_TOLERANCE,
    guarded_chain_model,
    hardmax_model,
    make_model,
    needs_openvino,
    vi,
)
from support.robust import (
    external_model,
    invoke,
    nothing_left_behind,
    one_error_line,
    only_hetero_errors,
    set_location,
)

import hetero_cli as hc
from hetero_cli import cli
from hetero_cli.app import image
from hetero_cli.placement import devices as registry

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits.onnx"
DIGIT = ROOT / "samples" / "images" / "digit_3.png"


def fuzz(examples: int) -> settings:
    """Deterministic fuzzing (the same examples every run), no example database."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
    )


def if_model() -> onnx.ModelProto:
    """A model with an If whose branches read an outer value and an outer initializer."""
    then_g = h.make_graph(
        [h.make_node("Add", ["r", "k"], ["t_out"], name="then_add")], "then", [], [vi("t_out", [2, 4])]
    )
    else_g = h.make_graph(
        [h.make_node("Mul", ["r", "k"], ["e_out"], name="else_mul")], "else", [], [vi("e_out", [2, 4])]
    )
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        h.make_node("Greater", ["s", "zero"], ["c"], name="cond"),
        h.make_node("If", ["c"], ["z"], name="if", then_branch=then_g, else_branch=else_g),
        h.make_node("Sigmoid", ["z"], ["y"], name="out"),
    ]
    inits = [onnx.numpy_helper.from_array(np.array(0, np.float32), "zero")]
    inits.append(onnx.numpy_helper.from_array(np.full((2, 4), 0.5, np.float32), "k"))
    return make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 4])], inits, name="if_model")


# --- model files: truncated, random, corrupted ----------------------------------------------------------


def test_every_truncation_of_a_model_file_is_refused_or_keeps_the_whole_graph():
    proto = hardmax_model()
    h.set_model_props(proto, {"mean": "0", "scale": "255"})
    data = proto.SerializeToString()
    accepted = []
    for n in range(len(data)):
        try:
            model = hc.Core().read_model(data[:n])
        except hc.ModelError:
            continue
        accepted.append(n)
        # protobuf cannot tell a cut at a field boundary from a shorter file: what it accepts must then be
        # the whole graph with its opsets (only the trailing model metadata may be missing)
        assert model.proto.graph == proto.graph, n
        assert list(model.proto.opset_import) == list(proto.opset_import), n
    assert len(accepted) <= len(proto.metadata_props)


def test_a_file_cut_right_after_its_graph_is_refused(tmp_path):
    proto = hardmax_model()
    data = proto.SerializeToString()
    cut = next(
        n
        for n in range(len(data), 0, -1)
        if _parses(data[:n]) and not onnx.load_from_string(data[:n]).opset_import
    )
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:cut])
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError) as err:
        hc.Core().read_model(path)
    assert "cut.onnx" in str(err.value) and "opset" in str(err.value)


def _parses(data: bytes) -> bool:
    try:
        onnx.load_from_string(data)
    except Exception:
        return False
    return True


@pytest.mark.parametrize("kind", ["pipe", "device"])
def test_a_pipe_or_a_device_given_as_the_model_is_refused_at_once(tmp_path, kind):
    """/dev/zero was read until killed; a pipe (bash's <(cat m.onnx)) was read once, then the probes and
    sessions, which read the weights from the model's file again, found it empty: another split, no word."""
    if kind == "pipe":
        path = tmp_path / "model.onnx"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    with pytest.raises(hc.ModelError, match=r"not a regular file .*save the model to a file"):
        hc.Core().read_model(path)


@pytest.mark.parametrize(
    "content",
    [b"", b"\x00garbage", b"# README\nnot a model\n", json.dumps({"graph": 1}).encode(), b"\x08\x07"],
    ids=["empty", "garbage", "text", "json", "ir-version-only"],
)
def test_files_that_are_not_models_are_refused_by_name(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError) as err:
        hc.Core().read_model(path)
    assert "bad.onnx" in str(err.value)
    with pytest.raises(hc.ModelError):
        hc.Core().read_model(content)


def test_a_png_given_as_the_model_on_the_command_line():
    result = invoke(cli.query, "-m", DIGIT, "-d", "CPU")
    assert result.exit_code == 2
    assert "digit_3.png" in one_error_line(result)


@fuzz(100)
@given(st.binary(max_size=600))
def test_random_bytes_give_a_model_error_or_a_model_that_fails_cleanly(data):
    model = only_hetero_errors(hc.Core().read_model, data)
    if isinstance(model, hc.Model):
        only_hetero_errors(hc.Core().plan, model, "CPU")


def test_names_that_are_not_utf8_are_refused():
    data = hardmax_model().SerializeToString().replace(b"relu_out", b"relu\xe9out")
    with pytest.raises(hc.ModelError, match="UTF-8"):
        hc.Core().read_model(data)


def _text_fields(message, found: list) -> list:
    """(message type.field, value) of every non-empty string field, by a plain walk of every field (the
    reference for model._invalid_text, which takes shortcuts through nodes and attributes)."""
    for field, value in message.ListFields():
        repeated = getattr(field, "is_repeated", None)
        if repeated is None:  # protobuf before 5.x
            repeated = field.label == field.LABEL_REPEATED
        values = list(value) if repeated else [value]
        for v in values:
            if field.type == field.TYPE_MESSAGE:
                _text_fields(v, found)
            elif field.type == field.TYPE_STRING and v:
                found.append((f"{message.DESCRIPTOR.name}.{field.name}", v))
    return found


def test_text_that_is_not_utf8_is_found_in_every_string_field_of_a_model():
    from hetero_cli.graph.reading import _invalid_text

    proto = if_model()
    proto.doc_string = "docmodel"
    proto.graph.doc_string = "docgraph"
    relu = proto.graph.node[0]
    relu.doc_string = "docrelu"
    relu.metadata_props.add(key="keyaffinity", value="valdevice")
    relu.attribute.append(h.make_attribute("tagattr", "strval", doc_string="docattr"))
    proto.graph.node[1].domain = ""
    proto.graph.node[2].attribute.append(
        h.make_attribute("tensattr", onnx.numpy_helper.from_array(np.ones(2, np.float32), "tensname"))
    )
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batchdim"
    proto.metadata_props.add(key="author", value="someone")
    data = proto.SerializeToString()
    fields = [(f, v) for f, v in _text_fields(proto, []) if data.count(v.encode()) == 1 and len(v) > 2]
    assert {
        "NodeProto.name",
        "NodeProto.doc_string",
        "AttributeProto.name",
        "AttributeProto.doc_string",
        "StringStringEntryProto.value",
        "TensorProto.name",
        "Dimension.dim_param",
        "GraphProto.name",
        "ModelProto.doc_string",
    } <= {f for f, _ in fields}
    assert _invalid_text(proto) is None
    for field, value in fields:
        broken = onnx.ModelProto()
        broken.ParseFromString(data.replace(value.encode(), b"\xe9" + value.encode()[1:]))
        assert _invalid_text(broken) == field, value
    for shared in ("zero", "batchdim", "t_out"):  # names several fields hold: each copy broken
        broken = onnx.ModelProto()
        broken.ParseFromString(data.replace(shared.encode(), b"\xe9" + shared.encode()[1:]))
        assert _invalid_text(broken) is not None, shared
    # a STRING attribute's value is bytes in ONNX: any bytes are fine there
    relu.attribute[-1].s = b"\xe9\xff"
    assert _invalid_text(proto) is None


def test_a_node_reading_a_tensor_nothing_defines_is_refused():
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"), h.make_node("Add", ["r", "ghost"], ["y"])]
    proto = make_model(nodes, [vi("x")], [vi("y")])
    with pytest.raises(hc.ModelError, match="ghost"):
        hc.Core().read_model(proto.SerializeToString())
    proto = make_model([nodes[0]], [vi("x")], [vi("y")])
    with pytest.raises(hc.ModelError, match="'y'"):
        hc.Core().read_model(proto.SerializeToString())


def _flips(data: bytes):
    return st.lists(
        st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), min_size=1, max_size=3
    ).map(lambda edits: _apply(data, edits))


def _apply(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for pos, value in edits:
        out[pos] = value
    return bytes(out)


HARDMAX = hardmax_model().SerializeToString()
IF_MODEL = if_model().SerializeToString()


@pytest.fixture(autouse=True)
def _quiet_library_in_a_fresh_directory(caplog, tmp_path, monkeypatch):
    """Library warnings off; the current directory is the test's own (nothing_left_behind checks it)."""
    caplog.set_level(logging.ERROR, logger="hetero_cli")
    monkeypatch.chdir(tmp_path)


@fuzz(60)
@given(st.one_of(_flips(HARDMAX), _flips(IF_MODEL)))
def test_corrupted_models_give_only_hetero_errors_from_read_to_infer(data):
    core = hc.Core()
    model = only_hetero_errors(core.read_model, data)
    if not isinstance(model, hc.Model):
        return
    compiled = only_hetero_errors(core.compile_model, model, SPLIT)
    if not isinstance(compiled, hc.CompiledModel):
        return
    feeds = {
        i.name: np.ones(
            [d if isinstance(d, int) and d > 0 else 1 for d in i.shape or ()], i.dtype or np.float32
        )
        for i in compiled.inputs
    }
    only_hetero_errors(compiled.create_infer_request().infer, feeds)


def test_corrupt_model_on_the_command_line_is_one_line(tmp_path):
    path = tmp_path / "cut.onnx"
    path.write_bytes(DIGITS.read_bytes()[:5000])
    with nothing_left_behind(tmp_path):
        result = invoke(cli.query, "-m", path, "-d", "CPU", "--save", tmp_path / "out.onnx")
    assert result.exit_code == 2
    assert "cut.onnx" in one_error_line(result)


# --- external data ---------------------------------------------------------------------------------------


def test_external_data_model_reads_and_runs(tmp_path):
    path = external_model(tmp_path / "m")
    x = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    want = _reference_from_path(path, x)
    with nothing_left_behind(tmp_path):
        compiled = hc.Core().compile_model(str(path), SPLIT)
        np.testing.assert_allclose(compiled({"x": x})["y"], want, **SPLIT_TOLERANCE)


def _reference_from_path(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_missing_external_data_file_names_the_tensor_and_the_file(tmp_path):
    path = external_model(tmp_path)
    (tmp_path / "m.data").unlink()
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError) as err:
        hc.Core().read_model(path)
    text = str(err.value)
    assert "'w'" in text and "m.data" in text and "missing" in text


@pytest.mark.parametrize("where", ["parent", "absolute", "symlink", "dotdot-inside"])
def test_external_data_outside_the_model_folder_is_refused(tmp_path, where):
    folder = tmp_path / "model"
    path = external_model(folder)
    outside = tmp_path / "secret.data"
    outside.write_bytes((folder / "m.data").read_bytes())
    location = {
        "parent": "../secret.data",
        "absolute": str(outside),
        "symlink": "link.data",
        "dotdot-inside": "sub/../m.data",
    }[where]
    if where == "symlink":
        (folder / "link.data").symlink_to(outside)
    set_location(path, "w", location)
    if where == "dotdot-inside":  # stays inside the folder: fine
        assert hc.Core().read_model(path).external_dir == folder.resolve()
        return
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError) as err:
        hc.Core().read_model(path)
    text = str(err.value)
    assert "'w'" in text and location in text and "outside" in text


def test_external_data_shorter_than_the_tensor_is_refused(tmp_path):
    path = external_model(tmp_path)
    data = (tmp_path / "m.data").read_bytes()
    (tmp_path / "m.data").write_bytes(data[:100])
    with pytest.raises(hc.ModelError) as err:
        hc.Core().read_model(path)
    assert "m.data" in str(err.value) and "bytes" in str(err.value)


def test_external_data_in_memory_without_a_folder_is_refused(tmp_path):
    path = external_model(tmp_path)
    proto = onnx.load(str(path), load_external_data=False)
    with pytest.raises(hc.ModelError, match="path"):
        hc.Core().read_model(proto)


def test_external_data_error_on_the_command_line(tmp_path):
    path = external_model(tmp_path)
    set_location(path, "w", "../../etc/passwd")
    with nothing_left_behind(tmp_path):
        result = invoke(cli.query, "-m", path, "-d", "CPU", "--save", tmp_path / "out.onnx")
    assert result.exit_code == 2
    assert "outside" in one_error_line(result)


# --- device strings, configuration and affinities from a fuzzer ------------------------------------------

DEVICE_WORDS = [
    "CPU",
    "cpu",
    "OPENVINO",
    "OPENVINO.GPU",
    "GPU",
    "GPU.1",
    "GPU.x",
    "TENSORRT",
    "HETERO",
    "XPU",
]
DEVICE_WORDS += ["", " ", ":", ",", "HETERO:CPU", "é", "\x00", "GPU.99999999999999999999"]
devices = st.one_of(
    st.text(max_size=20),
    st.sampled_from(DEVICE_WORDS),
    st.lists(st.sampled_from(DEVICE_WORDS), max_size=4).map(lambda words: "HETERO:" + ",".join(words)),
    st.integers(),
    st.none(),
    st.binary(max_size=4),
)
KEYS = ["PERF_COUNT", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT", "MULTI_DEVICE_PRIORITIES"]
KEYS += ["DEVICE_PROPERTIES", "HETERO_DUMP_GRAPH_DOT", "device_type", "num_of_threads", "precision", "HETERO"]
values = st.one_of(
    st.text(max_size=8),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
)
keys = st.one_of(st.text(max_size=12), st.sampled_from(KEYS + DEVICE_WORDS), st.integers())
configs = st.recursive(
    st.dictionaries(keys, values, max_size=3),
    lambda inner: st.dictionaries(keys, inner, max_size=3),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def hardmax():
    return hc.Core().read_model(hardmax_model())


@fuzz(250)
@given(
    devices, st.one_of(st.none(), configs, values), st.sampled_from(["plan", "query_model", "compile_model"])
)
def test_device_strings_and_configs_give_only_hetero_errors(hardmax, device, config, what):
    only_hetero_errors(getattr(hc.Core(), what), hardmax, device, config)


@fuzz(150)
@given(st.one_of(devices, st.sampled_from(DEVICE_WORDS)), st.one_of(configs, values))
def test_set_property_gives_only_hetero_errors(hardmax, device, properties):
    core = hc.Core()
    if not isinstance(only_hetero_errors(core.set_property, device, properties), Exception):
        only_hetero_errors(core.compile_model, hardmax, SPLIT)
    only_hetero_errors(core.set_property, properties)


NODE_WORDS = ["matmul", "add_bias", "relu", "hardmax", "pick", "sigmoid", "", "w"]


@fuzz(120)
@given(
    st.dictionaries(
        st.one_of(st.sampled_from(NODE_WORDS), st.text(max_size=6)),
        st.one_of(st.sampled_from(DEVICE_WORDS), st.text(max_size=6), st.integers(), st.none()),
        max_size=7,
    )
)
def test_affinity_maps_give_only_hetero_errors(affinities):
    model = hc.Core().read_model(hardmax_model())
    if isinstance(only_hetero_errors(model.set_affinities, affinities), Exception):
        return
    only_hetero_errors(hc.Core().compile_model, model, SPLIT)


BAD_APP_ARGUMENTS = [
    {"inputs": 5},
    {"inputs": "x"},
    {"shapes": 5},
    {"seed": -1},
    {"seed": "a"},
    {"seed": True},
    {"int_ranges": 5},
    {"tolerances": 5},
]


@pytest.mark.parametrize(
    "arguments", BAD_APP_ARGUMENTS, ids=lambda a: f"{next(iter(a))}={next(iter(a.values()))!r}"
)
def test_validate_and_tune_refuse_arguments_of_another_kind_with_their_own_errors(arguments):
    """Before any compile: a ValidationError each (tune_model's share validate_model's checks), where numpy,
    a loop or an attribute raised its own TypeError, AttributeError or ValueError."""
    model = hc.Core().read_model(hardmax_model())
    with pytest.raises(hc.ValidationError):
        hc.validate_model(hc.Core(), model, "HETERO:CPU", **arguments)
    with pytest.raises(hc.ValidationError):
        hc.tune_model(hc.Core(), model, SPLIT, budget_s=1, **arguments)


def test_validate_reads_a_model_source_and_refuses_what_is_not_a_core_or_a_report(tmp_path):
    """validate_model takes a ModelProto or a path as tune_model does (core.read_model); a core that is no
    Core, a report write_chart cannot draw and Tolerances built of other kinds are errors of the package."""
    proto = hardmax_model()
    shapes = {"x": (2, 4)}
    assert hc.validate_model(hc.Core(), proto, "HETERO:CPU", shapes=shapes).passed
    with pytest.raises(hc.ValidationError, match=r"core must be a hetero_cli\.Core"):
        hc.validate_model(None, proto, "HETERO:CPU")
    with pytest.raises(hc.TuneError, match=r"core must be a hetero_cli\.Core"):
        hc.tune_model(None, proto, SPLIT)
    with pytest.raises(hc.TuneError, match="draws a TuneReport"):
        hc.write_chart(None, tmp_path / "chart.png")
    with pytest.raises(hc.ValidationError, match="atol must be"):
        hc.Tolerances(atol=-1)


def test_affinities_naming_unknown_nodes_or_devices():
    model = hc.Core().read_model(hardmax_model())
    with pytest.raises(hc.AffinityError, match="'nosuch'"):
        model.set_affinities({"nosuch": "CPU"})
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = "XPU" if node.get_friendly_name() == "relu" else "CPU"
    with pytest.raises(hc.AffinityError, match="relu=XPU"):
        hc.Core().compile_model(model, "HETERO:CPU")


def test_affinities_naming_a_device_listed_but_not_here_or_not_listed():
    """Each problem gets its own fix: a device the string lists but this machine lacks cannot be fixed by
    listing it; one the string leaves out can."""
    model = hc.Core().read_model(hardmax_model())
    absent = [d for d in ("GPU", "TENSORRT", "OPENVINO.NPU") if not registry.is_available(registry.lookup(d))]
    if not absent:
        pytest.skip("every device this test could name is available here")
    missing = absent[0]
    model.set_affinities({n.get_friendly_name(): "CPU" for n in model.get_ops()} | {"relu": missing})
    with pytest.raises(hc.AffinityError) as caught:
        hc.Core().compile_model(model, f"HETERO:{missing},CPU")
    assert "not available on this machine" in str(caught.value)
    assert "run where the device is available" in str(caught.value)
    assert "list the device" not in str(caught.value)
    with pytest.raises(hc.AffinityError, match="or list the device in HETERO:CPU"):
        hc.Core().compile_model(model, "HETERO:CPU")


@needs_openvino
def test_an_ep_split_orts_finds_cyclic_is_not_blamed_on_the_model():
    """Relu -> IsInf -> Where -> Sigmoid -> Hardmax all placed on OPENVINO by hand: the OpenVINO EP takes
    Relu and Where around the IsInf it leaves to the CPU EP, and ORT calls the result "not acyclic" (plain
    ORT with [OpenVINO, CPU] fails the same way). The model is valid: the error names the EP and the nodes
    to move, not the model."""
    model = hc.Core().read_model(guarded_chain_model())
    model.set_affinities(dict.fromkeys((n.get_friendly_name() for n in model.get_ops()), "OPENVINO"))
    with pytest.raises(hc.CompileError) as caught:
        hc.Core().compile_model(model, "HETERO:OPENVINO,CPU")
    text = str(caught.value)
    assert "not acyclic" in text and "the CPU EP loads the subgraph" in text
    assert "model itself is at fault" not in text
    assert "`hetero query -d HETERO:OPENVINO,CPU` shows which nodes OPENVINO takes" in text  # no probe here
    hc.Core().query_model(model, "HETERO:OPENVINO,CPU")  # once the query has probed, the error names them
    with pytest.raises(hc.CompileError, match=r"does not take: isinf \(IsInf\), hardmax \(Hardmax\)"):
        hc.Core().compile_model(model, "HETERO:OPENVINO,CPU")


CLI_WORDS = [*DEVICE_WORDS[:10], "matmul", "relu", "hardmax", "=", ":"]
token = st.one_of(st.text(max_size=10), st.sampled_from(CLI_WORDS))
option = st.one_of(
    st.tuples(
        st.just("--config"),
        st.builds(lambda a, b, c: a + b + c, token, st.sampled_from(["=", ":", ""]), token),
    ),
    st.tuples(
        st.just("--affinity"), st.builds(lambda a, b, c: a + b + c, token, st.sampled_from(["=", ""]), token)
    ),
    st.tuples(
        st.just("-d"), st.one_of(token, st.lists(token, max_size=3).map(lambda w: "HETERO:" + ",".join(w)))
    ),
)
documents = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=5), st.sampled_from(CLI_WORDS)), inner, max_size=3),
    ),
    max_leaves=8,
)


@fuzz(80)
@given(st.lists(option, max_size=4), st.one_of(st.none(), documents), st.one_of(st.none(), documents))
def test_command_line_options_from_a_fuzzer_give_one_line_errors(
    tmp_path_factory, options, config, affinities
):
    folder = tmp_path_factory.mktemp("cli")
    model = folder / "m.onnx"
    onnx.save(hardmax_model(), str(model))
    args = ["-m", model]
    if not any(o[0] == "-d" for o in options):
        args += ["-d", SPLIT]
    for o in options:
        args += list(o)
    if config is not None:
        (folder / "c.json").write_text(json.dumps(config))
        args += ["-load_config", folder / "c.json"]
    if affinities is not None:
        (folder / "a.json").write_text(json.dumps(affinities))
        args += ["--affinity-file", folder / "a.json"]
    args += ["--save", folder / "out.onnx"]
    result = invoke(cli.query, *args)
    assert result.exit_code in (0, 1, 2), result.stderr
    if result.exit_code:
        one_error_line(result)
        assert not (folder / "out.onnx").exists()
    assert not list(folder.glob("*.tmp"))


# --- no partial outputs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "code"),
    [(["--affinity", "nosuch=CPU"], 2), (["--affinity", "relu=XPU"], 2), (["--config", "CPU:FOO=1"], 2)],
)
def test_query_save_writes_nothing_when_the_query_fails(tmp_path, extra, code):
    out = tmp_path / "out.onnx"
    with nothing_left_behind(tmp_path):
        result = invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", *extra, "--save", out)
    assert result.exit_code == code
    one_error_line(result)


def test_query_save_into_a_missing_folder_or_onto_a_folder(tmp_path):
    """A missing folder is created, as -dump_config's is; a folder as the file is refused before any work."""
    out = tmp_path / "no" / "such" / "out.onnx"
    assert invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--save", out).exit_code == 0
    assert hc.Core().read_model(out).affinities()
    with nothing_left_behind(tmp_path):
        result = invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--save", tmp_path)
    assert result.exit_code == 2
    assert "is a folder" in one_error_line(result)


def test_model_save_failing_half_way_leaves_no_partial_file(tmp_path, monkeypatch):
    model = hc.Core().read_model(hardmax_model())

    def half_then_fail(proto, f, *args, **kwargs):
        Path(f).write_bytes(proto.SerializeToString()[:10])
        raise ValueError("Message onnx.ModelProto exceeds maximum protobuf size of 2GB")

    monkeypatch.setattr(onnx, "save", half_then_fail)
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError, match=r"out\.onnx"):
        model.save(tmp_path / "out.onnx")


def test_profiled_compile_failing_half_way_leaves_no_profile_folder():
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Nope", ["r"], ["y"], name="custom", domain="com.example"),
    ]
    proto = make_model(nodes, [vi("x")], [vi("y")], opsets={"": 17, "com.example": 1})
    model = hc.Core().read_model(proto)
    for node in model.get_ops():
        node.get_rt_info()["affinity"] = "CPU"
    with nothing_left_behind(), pytest.raises(hc.CompileError):
        hc.Core().compile_model(model, "HETERO:CPU", {"PERF_COUNT": "YES"})


# --- images ----------------------------------------------------------------------------------------------


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_of_size(width: int, height: int) -> bytes:
    """A valid grey PNG of any size: zero rows compress to almost nothing (a decompression bomb)."""
    packer = zlib.compressobj(9)
    row = b"\x00" * (width + 1)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", body) + _chunk(b"IEND", b"")


@pytest.mark.parametrize("size", [(10_000, 10_000), (20_000, 20_000)], ids=["100M-pixels", "400M-pixels"])
def test_decompression_bomb_sized_images_are_refused_before_decoding(tmp_path, size):
    path = tmp_path / "bomb.png"
    path.write_bytes(png_of_size(*size))
    with nothing_left_behind(tmp_path):
        result = invoke(cli.classify, DIGITS, path, "CPU")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "bomb.png" in line and "pixels" in line


def test_pillow_size_limit_is_kept_as_pillow_had_it():
    before = Image.MAX_IMAGE_PIXELS
    with pytest.raises(image.ImageError):
        image.read(DIGIT.parent / "no-such.png")
    assert before == Image.MAX_IMAGE_PIXELS


ODD = {
    "I;16B": ("tiff", lambda: Image.new("I;16B", (8, 8), 40000)),
    "LA": ("png", lambda: Image.new("LA", (8, 8), (90, 128))),
    "PA": ("tiff", lambda: Image.new("RGBA", (8, 8), (1, 2, 3, 4)).convert("PA")),
    "LAB": ("tiff", lambda: Image.new("RGB", (8, 8), (10, 200, 30)).convert("LAB")),
    "YCbCr": ("jpeg", lambda: Image.new("RGB", (8, 8), (10, 200, 30)).convert("YCbCr")),
    "1x4000": ("png", lambda: Image.new("L", (1, 4000), 200)),
    "animated": ("gif", None),
}


@pytest.mark.parametrize("kind", sorted(ODD))
def test_odd_modes_and_shapes_classify(tmp_path, kind):
    fmt, make = ODD[kind]
    path = tmp_path / f"odd.{fmt}"
    if make is None:
        frames = [Image.new("P", (16, 16), c) for c in (1, 2, 3)]
        frames[0].save(path, save_all=True, append_images=frames[1:])
    else:
        make().save(path)
    result = invoke(cli.classify, DIGITS, path, "CPU")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.strip() == ""


@pytest.mark.parametrize("mode", ["La", "RGBa", "HSV", "I", "F"])
def test_odd_modes_in_memory_become_tensors(mode):
    prep = image.preprocessing(hc.Core().read_model(DIGITS))
    if mode in ("I", "F"):
        values = [[np.nan, np.inf], [-np.inf, 5.0]] if mode == "F" else [[-5, 2**31 - 1], [0, 7]]
        img = Image.fromarray(np.array(values, np.float32 if mode == "F" else np.int32), mode)
    else:
        img = Image.new("RGBA", (4, 4), (9, 99, 199, 50)).convert(mode)
    with np.errstate(all="raise"):
        x = image.to_tensor(img, prep)
    assert x.shape == (1, 1, 32, 32) and np.isfinite(x).all()
    assert x.min() >= 0 and x.max() <= 255


@pytest.mark.parametrize("damage", ["truncated-jpeg", "bad-crc-png", "bmp-header-only", "zero-size-png"])
def test_corrupt_images_are_one_line_errors(tmp_path, damage):
    buf = io.BytesIO()
    if damage == "truncated-jpeg":
        Image.new("RGB", (64, 64), (5, 100, 200)).save(buf, "jpeg")
        data = buf.getvalue()[: len(buf.getvalue()) // 2]
    elif damage == "bad-crc-png":
        Image.new("L", (16, 16), 10).save(buf, "png")
        data = bytearray(buf.getvalue())
        data[40] ^= 0xFF
        data = bytes(data)
    elif damage == "bmp-header-only":
        Image.new("RGB", (16, 16)).save(buf, "bmp")
        data = buf.getvalue()[:60]
    else:
        data = png_of_size(1, 1).replace(struct.pack(">II", 1, 1), struct.pack(">II", 0, 0), 1)
    path = tmp_path / f"bad.{damage.split('-')[-1]}"
    path.write_bytes(data)
    with nothing_left_behind(tmp_path):
        result = invoke(cli.classify, DIGITS, path, "CPU")
    assert result.exit_code == 2, result.stderr
    assert path.name in one_error_line(result)


@pytest.mark.parametrize("hint", ["LATENCY", "THROUGHPUT"])  # one session, or a session per subgraph
def test_wrong_inputs_at_infer_time_on_a_split_model(hint):
    compiled = hc.Core().compile_model(hardmax_model(), SPLIT, {"PERFORMANCE_HINT": hint})
    request = compiled.create_infer_request()
    for feeds, words in [
        ({"nosuch": np.zeros((2, 4), np.float32)}, ["'nosuch'", "x"]),
        ({"x": np.zeros((2, 5), np.float32)}, ["'x'", "[2,5]"]),
        ({"x": np.zeros((2, 4), np.float64)}, ["'x'", "float64"]),
        ({"x": [[1, 2], [3]]}, ["'x'"]),
        ({"x": None}, ["'x'"]),
    ]:
        with pytest.raises(hc.InferenceError) as err:
            request.infer(feeds)
        for word in words:
            assert word in str(err.value)


# --- ONNX Runtime's own log lines ------------------------------------------------------------------------


@pytest.mark.skipif(not HAS_OPENVINO, reason="needs the OpenVINO execution provider")
def test_onnx_runtime_log_lines_do_not_reach_a_command_line_user(tmp_path):
    # the OpenVINO EP logs "[W:onnxruntime:Default, ...] The input 'zero' is not used due to OpenVINO
    # optimization" through ORT's process-wide logger, straight to file descriptor 2, on this nested If
    inner_then = h.make_graph(
        [h.make_node("Tanh", ["x"], ["it"])], "inner_then", [], [vi("it", ["batch", 4])]
    )
    inner_else = h.make_graph([h.make_node("Neg", ["x"], ["ie"])], "inner_else", [], [vi("ie", ["batch", 4])])
    then_g = h.make_graph(
        [
            h.make_node("ReduceSum", ["x"], ["s2"], keepdims=0),
            h.make_node("Greater", ["s2", "zero"], ["c2"]),
            h.make_node("If", ["c2"], ["to"], then_branch=inner_then, else_branch=inner_else),
        ],
        "then",
        [],
        [vi("to", ["batch", 4])],
    )
    else_g = h.make_graph([h.make_node("Abs", ["x"], ["eo"])], "else", [], [vi("eo", ["batch", 4])])
    nodes = [
        h.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
        h.make_node("Greater", ["s", "zero"], ["c"], name="greater"),
        h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="if"),
    ]
    zero = onnx.numpy_helper.from_array(np.array(0.0, np.float32), "zero")
    path = tmp_path / "noisy.onnx"
    onnx.save(
        make_model(nodes, [vi("x", ["batch", 4])], [vi("y", ["batch", 4])], [zero]),
        str(path),
    )
    hetero = Path(sys.executable).parent / "hetero"
    done = subprocess.run(
        [str(hetero), "query", "-m", str(path), "-d", "HETERO:OPENVINO,CPU"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "onnxruntime" not in done.stderr, done.stderr


def test_core_and_model_methods_refuse_arguments_of_another_kind_with_their_own_errors():
    """Core.schedule of no Plan, Core.get_property of a name that is no string, Model.save to no path: an
    error of the package each (they were AttributeError and TypeError); exported_device of anything that is
    no Model read from an export is None (it was a TypeError for a str)."""
    core = hc.Core()
    model = core.read_model(hardmax_model())
    with pytest.raises(hc.ConfigError, match="takes a Plan"):
        core.schedule(None, "HETERO:CPU")
    with pytest.raises(hc.ConfigError, match="a property name is a string"):
        core.get_property("CPU", {"a": 1})
    for path in (None, 5):
        with pytest.raises(hc.ModelError, match="saved to a file path"):
            model.save(path)
    assert core.exported_device("m.onnx") is None and core.exported_device(model) is None
