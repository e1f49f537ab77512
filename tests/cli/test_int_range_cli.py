"""Random integer inputs on the command line (issue 29, item 3): benchmark, validate and tune run a model
with a token-type embedding and an attention mask on their default ranges, print one line per integer
input, take --int-range over them, and refuse bad values with one line, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from support.embedding import embedding_model
from support.helpers import SPLIT, needs_openvino
from support.robust import invoke, nothing_left_behind, one_error_line

from hetero_cli.app.validate import polygraphy_json
from hetero_cli.cli import hetero

LINES = (
    "input_ids: random integers in [0, 49] (indexes axis 0 of 'word_table', of size 50, in Gather 'word_emb')",
    "token_type_ids: random integers in [0, 1] (indexes axis 0 of 'type_table', of size 2, in Gather 'type_emb')",
    "attention_mask: random integers in [1, 1] (all ones: named like a mask)",
)


@pytest.fixture
def embedding(tmp_path: Path) -> Path:
    path = tmp_path / "embedding.onnx"
    onnx.save(embedding_model(), str(path))
    return path


def test_validate_runs_on_the_default_ranges_and_says_them(embedding, tmp_path):
    saved = tmp_path / "inputs.json"
    result = invoke(hetero, "validate", "-m", embedding, "-d", SPLIT, "--save-inputs", saved)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("PASSED")
    for line in LINES:
        assert f"[ INFO ]     {line}" in result.stdout
    (feeds,) = polygraphy_json.load_inputs(saved)
    assert set(np.unique(feeds["token_type_ids"])) <= {0, 1}
    assert (feeds["attention_mask"] == 1).all()


def test_int_range_overrides_the_default(embedding, tmp_path):
    saved = tmp_path / "inputs.json"
    result = invoke(
        hetero, "validate", "-m", embedding, "-d", "CPU", "--save-inputs", saved,
        "--int-range", "token_type_ids:1,1", "--int-range", "attention_mask:0,1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "token_type_ids: random integers in [1, 1] (given)" in result.stdout
    (feeds,) = polygraphy_json.load_inputs(saved)
    assert (feeds["token_type_ids"] == 1).all()
    assert set(np.unique(feeds["attention_mask"])) == {0, 1}


def test_benchmark_runs_on_the_default_ranges_and_says_them(embedding):
    result = invoke(hetero, "benchmark", "-m", embedding, "-d", "CPU", "-niter", "2", "-nireq", "1")
    assert result.exit_code == 0, result.output
    for line in LINES:
        name, text = line.split(": random ")
        assert f"{name}: data [1,8] from seeded random values, {text}" in result.stdout
    given = invoke(
        hetero, "benchmark", "-m", embedding, "-niter", "2", "-nireq", "1", "--int-range", "input_ids:0,3"
    )
    assert given.exit_code == 0, given.output
    assert "input_ids: data [1,8] from seeded random values, integers in [0, 3] (given)" in given.stdout


@needs_openvino
def test_tune_runs_on_the_default_ranges_and_says_them(embedding, tmp_path):
    saved = tmp_path / "tuned.onnx"
    result = invoke(hetero, "tune", "-m", embedding, "-d", "HETERO:OPENVINO,CPU", "-t", "3", "--save", saved)
    assert result.exit_code == 0, result.output
    for line in LINES:
        assert f"[ INFO ]     {line}" in result.stdout
    assert "Validation of the winner against one session of the whole model: PASSED" in result.stdout


BAD = [
    ("token_type_ids:5,2", "--int-range token_type_ids:5,2: LO 5 is over HI 2"),
    ("token_type_ids:a,b", "write NAME:LO,HI with two integers"),
    ("nope:0,1", "'nope' is not an input of the model"),
    ("0,1", "write NAME:LO,HI"),
    ("input_ids:-1,99999999999999999999", "which holds"),
]


@pytest.mark.parametrize(("value", "words"), BAD)
@pytest.mark.parametrize("command", ["validate", "benchmark", "tune"])
def test_bad_values_are_one_line_exit_2_nothing_written(embedding, tmp_path, command, value, words):
    out = tmp_path / "out"
    args = {
        "validate": ["-d", "CPU", "--save-inputs", out / "inputs.json"],
        "benchmark": ["-d", "CPU", "-niter", "2", "-report_folder", out, "-report_type", "no_counters"],
        "tune": ["-d", "HETERO:OPENVINO,CPU", "--save", out / "tuned.onnx"],
    }[command]
    with nothing_left_behind(tmp_path):
        result = invoke(hetero, command, "-m", embedding, *args, "--int-range", value)
        assert result.exit_code == 2, result.output
        assert words in one_error_line(result)
    assert not out.exists()


def test_a_float_input_and_inputs_given_data_are_refused(tmp_path, embedding):
    proto = embedding_model()
    proto.graph.input.extend([onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])])
    proto.graph.output.extend([onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])])
    path = tmp_path / "with_float.onnx"
    onnx.save(proto, str(path))
    result = invoke(hetero, "validate", "-m", path, "-d", "CPU", "--int-range", "x:0,1")
    assert result.exit_code == 2, result.output
    assert "input 'x' takes float32, not integers" in one_error_line(result)

    data = tmp_path / "ids.npy"
    np.save(data, np.zeros((1, 8), np.int64))
    result = invoke(
        hetero,
        "benchmark",
        "-m",
        embedding,
        "-niter",
        "2",
        "-i",
        f"input_ids:{data}",
        "--int-range",
        "input_ids:0,1",
    )
    assert result.exit_code == 2, result.output
    assert "-i gives the data of 'input_ids'" in one_error_line(result)

    saved = tmp_path / "inputs.json"
    assert invoke(hetero, "validate", "-m", embedding, "-d", "CPU", "--save-inputs", saved).exit_code == 0
    result = invoke(
        hetero,
        "validate",
        "-m",
        embedding,
        "-d",
        "CPU",
        "--load-inputs",
        saved,
        "--int-range",
        "input_ids:0,1",
    )
    assert result.exit_code == 2, result.output
    assert "--int-range" in one_error_line(result)
