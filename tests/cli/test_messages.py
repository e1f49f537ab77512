"""Messages that misled (issue 29, item 11) and a .dot write that left half a set (item 12): each case is
run through the CLI and checked for its one error line and its exit status."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import helper as h
from support.helpers import chain_model, make_model, needs_openvino, vi
from support.robust import external_model, invoke, nothing_left_behind, one_error_line

import hetero_cli as hc
from hetero_cli import cli


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """x[2,3] -> Relu -> Neg -> Abs -> Sigmoid -> y, nodes n0..n3."""
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(), str(path))
    return path


@pytest.mark.parametrize("device", ["X" * 10_000, "HETERO:" + "X" * 10_000, "X" * 10_000 + ":CPU"])
def test_a_long_device_string_is_echoed_once_and_shortened(chain, device):
    result = invoke(cli.query, "-m", chain, "-d", device)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "bad device string" in line
    assert line.count("XXXXXXXXXX") <= 6 and "X" * 61 not in line  # 60 characters at most, once
    assert f"({len(device)} characters)" in line


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [("offset", "-16", "negative offset (-16)"), ("length", "-8", "negative length (-8)")],
)
def test_a_negative_external_data_offset_is_called_invalid(tmp_path, key, value, words):
    path = external_model(tmp_path / "ext")
    proto = onnx.load(str(path), load_external_data=False)
    entries = {e.key: e for e in proto.graph.initializer[0].external_data}
    if key in entries:
        entries[key].value = value
    else:
        proto.graph.initializer[0].external_data.add(key=key, value=value)
    onnx.save(proto, str(path))
    with nothing_left_behind(tmp_path):
        result = invoke(cli.query, "-m", path, "-d", "CPU")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert words in line and "invalid" in line
    assert "truncated" not in line and "needs bytes" not in line


@pytest.mark.parametrize(("device", "value"), [("OPENVINO", "null"), ("CPU", "3"), ("cpu", '"YES"')])
def test_load_config_says_a_devices_configuration_is_an_object(chain, tmp_path, device, value):
    config = tmp_path / "config.json"
    config.write_text(f'{{"{device}": {value}}}')
    result = invoke(cli.query, "-m", chain, "-d", "CPU", "-load_config", config)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f'"{device}" is a device, so its configuration must be an object of key/values' in line
    assert f"not {value}" in line and "unknown HETERO config key" not in line


def test_an_affinity_file_nested_too_deep_is_no_valid_affinity_file(chain, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    result = invoke(cli.query, "-m", chain, "-d", "HETERO:CPU", "--affinity-file", deep)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "is not valid for --affinity-file (its JSON nests too deep to read)" in line
    assert "{node name: device}" in line and "RecursionError" not in line


IMAGE = Path(__file__).resolve().parents[2] / "samples" / "images" / "digit_3.png"
DIGITS = Path(__file__).resolve().parents[2] / "models" / "digits.onnx"


#: Each command's options that read a file, as (command, arguments with PATH where the path goes, what the
#: line says for a folder: the options that take a folder of files say it holds none)
FILE_OPTIONS = [
    ("query", ["-m", DIGITS, "-d", "HETERO:CPU", "--affinity-file", "PATH"], "is a folder"),
    ("query", ["-m", DIGITS, "-d", "CPU", "-load_config", "PATH"], "is a folder"),
    ("benchmark", ["-m", DIGITS, "-d", "CPU", "-load_config", "PATH", "-niter", "1"], "is a folder"),
    ("validate", ["-m", DIGITS, "-d", "CPU", "--affinity-file", "PATH"], "is a folder"),
    ("validate", ["-m", DIGITS, "-d", "CPU", "--load-inputs", "PATH"], "without Polygraphy .json files"),
    ("classify", ["-m", DIGITS, "-d", "CPU", "-i", IMAGE, "--labels", "PATH"], "is a folder"),
    ("classify", ["-m", DIGITS, "-d", "CPU", "-i", "PATH"], "is a folder"),
    ("benchmark", ["-m", DIGITS, "-d", "CPU", "-i", "PATH", "-niter", "1"], "holds no images"),
    (
        "tune",
        ["-m", DIGITS, "-d", "HETERO:CPU,OPENVINO", "-i", "PATH", "--save", "t.onnx"],
        "holds no images",
    ),
    ("query", ["-m", "PATH", "-d", "CPU"], "is a directory"),
]


@pytest.mark.parametrize(
    ("command", "args", "folder_words"),
    FILE_OPTIONS,
    ids=[f"{c} {a[a.index('PATH') - 1]}" for c, a, _ in FILE_OPTIONS],
)
@pytest.mark.parametrize("target", ["/dev/zero", "folder"])
def test_every_file_option_names_a_folder_or_device_as_what_it_is(
    tmp_path, monkeypatch, command, args, folder_words, target
):
    monkeypatch.chdir(tmp_path)
    path = Path(target) if target.startswith("/") else tmp_path / target
    if target == "folder":
        path.mkdir()
    with nothing_left_behind(tmp_path):
        result = invoke(cli.hetero, command, *[path if a == "PATH" else a for a in args])
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert (folder_words if target == "folder" else "is not a regular file") in line
    assert "no such file" not in line


TEXT_MODEL = Path(__file__).resolve().parents[1] / "data" / "skl2onnx" / "tfidf_text.onnx"


def test_validate_on_string_inputs_names_load_inputs_not_an_option_it_lacks():
    result = invoke(cli.hetero, "validate", "-m", TEXT_MODEL, "-d", "CPU", "-shape", "[1,1]")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "cannot make random data of strings for input 'text'" in line
    assert "--load-inputs FILE.json" in line and " -i " not in line


def test_tune_on_string_inputs_names_its_own_i_option(tmp_path):
    with nothing_left_behind(tmp_path):
        result = invoke(cli.hetero, "tune", "-m", TEXT_MODEL, "-d", "HETERO:CPU,OPENVINO", "-shape", "[1,1]",
                        "--save", tmp_path / "t.onnx")  # fmt: skip
    assert result.exit_code == 2
    assert "give its data with -i text:FILE.npy" in one_error_line(result)


@pytest.mark.parametrize(
    "elem", [onnx.TensorProto.BFLOAT16, onnx.TensorProto.FLOAT8E4M3FN], ids=["bf16", "f8"]
)
@pytest.mark.parametrize(
    "args",
    [
        ["benchmark", "-niter", "1", "-i", "DATA.npy"],
        ["benchmark", "-niter", "1"],
        ["validate", "--load-inputs", "DATA.json"],
        ["validate"],
        ["tune", "-i", "DATA.npy", "--save", "t.onnx"],
        ["classify", "-i", "DATA.png"],
    ],
    ids=["benchmark -i", "benchmark", "validate --load-inputs", "validate", "tune -i", "classify"],
)
def test_inputs_no_data_can_be_fed_to_are_refused_before_any_data_is_read(tmp_path, monkeypatch, elem, args):
    monkeypatch.chdir(tmp_path)
    node = h.make_node("Cast", ["x"], ["y"], name="cast", to=onnx.TensorProto.FLOAT)
    model = tmp_path / "m.onnx"
    onnx.save(make_model([node], [vi("x", [2], elem)], [vi("y", [2])], opsets={"": 19}), str(model))
    for name in ("DATA.npy", "DATA.json", "DATA.png"):
        (tmp_path / name).write_bytes(b"damaged: reading this file fails")  # the check comes first
    device = "HETERO:CPU,OPENVINO" if args[0] == "tune" else "CPU"
    with nothing_left_behind(tmp_path):
        result = invoke(cli.hetero, args[0], "-m", model, "-d", device, *args[1:])
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "which ONNX Runtime's Python API cannot take from numpy" in line
    assert "a Cast to" in line


@pytest.fixture
def dup(tmp_path: Path) -> Path:
    """x -> Relu (named dup) -> a -> Neg (named dup too) -> b -> Abs (last) -> y: the two dup nodes are
    known as a and b (friendly names must be unique)."""
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="dup"),
        h.make_node("Neg", ["a"], ["b"], name="dup"),
        h.make_node("Abs", ["b"], ["y"], name="last"),
    ]
    path = tmp_path / "dup.onnx"
    onnx.save(make_model(nodes, [vi("x", [2])], [vi("y", [2])]), str(path))
    return path


@needs_openvino
@pytest.mark.parametrize("how", ["--affinity", "--affinity-file"])
def test_a_name_two_nodes_share_pins_them_both(dup, tmp_path, how):
    given = ["--affinity", "dup=CPU", "--affinity", "last=CPU"]
    if how == "--affinity-file":
        (tmp_path / "aff.json").write_text('{"dup": "CPU", "last": "CPU", "b": "OPENVINO"}')
        given = ["--affinity-file", tmp_path / "aff.json"]
    result = invoke(cli.query, "-m", dup, "-d", "HETERO:OPENVINO,CPU", "--json", *given)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    want = {
        "a": "CPU",
        "b": "CPU" if how == "--affinity" else "OPENVINO",
        "last": "CPU",
    }  # a friendly name wins
    assert doc["affinities"] == want
    assert set(doc["set_by"].values()) == {"option"}


def test_query_shows_the_names_duplicated_nodes_go_by(dup):
    result = invoke(cli.query, "-m", dup, "-d", "HETERO:CPU")
    assert result.exit_code == 0, result.output
    assert "2 nodes named 'dup' in the model are shown as a, b" in result.output
    assert "--affinity dup=DEVICE sets them all" in result.output


@pytest.mark.parametrize("blocked", ["hetero_affinity_chain.dot", "hetero_subgraphs_chain.dot"])
def test_a_dot_file_that_cannot_be_written_is_refused_before_the_compile(chain, tmp_path, blocked):
    dots = tmp_path / "d"
    (dots / blocked).mkdir(parents=True)
    with nothing_left_behind(tmp_path):
        result = invoke(cli.hetero, "validate", "-m", chain, "-d", "HETERO:CPU", "--dot-dir", dots)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"{dots / blocked} is a folder, where the command writes a file" in line
    assert "Validating" not in result.output  # refused before the run


def test_the_dot_files_are_written_both_or_neither(tmp_path):
    (tmp_path / "hetero_subgraphs_chain.dot").mkdir()
    config = {"HETERO_DUMP_GRAPH_DOT": "YES", "HETERO_DOT_DIR": str(tmp_path)}
    with nothing_left_behind(tmp_path), pytest.raises(hc.HeteroError) as err:
        hc.Core().compile_model(chain_model(), "HETERO:CPU", config)
    assert (
        str(err.value)
        == f"cannot write {tmp_path / 'hetero_subgraphs_chain.dot'}: it is a folder, not a file"
    )
