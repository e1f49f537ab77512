"""``hetero tune``: bad input refused with one line, exit 2 and nothing written, before any measuring; the
help's examples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from support.helpers import chain_model, const, make_model, vi
from support.robust import invoke, nothing_left_behind, one_error_line

from hetero_cli.cli import hetero

EXP_CHAIN = ("Neg", "Abs", "Relu", "Exp", "Neg", "Abs", "Relu", "Neg")


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """x[4,64] -> Neg -> Abs -> Relu -> Exp -> Neg -> Abs -> Relu -> Neg -> y, nodes n0..n7."""
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(EXP_CHAIN, shape=(4, 64)), str(path))
    return path


@pytest.fixture
def dynamic(tmp_path: Path) -> Path:
    """x[n,16] -> MatMul -> Softmax -> y, n dynamic."""
    rng = np.random.default_rng(0)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        h.make_node("Softmax", ["a"], ["y"], name="sm", axis=-1),
    ]
    proto = make_model(
        nodes, [vi("x", ["n", 16])], [vi("y", ["n", 16])], [const("w", rng.standard_normal((16, 16)))]
    )
    path = tmp_path / "dynamic.onnx"
    onnx.save(proto, str(path))
    return path


def _a_file(folder: Path) -> Path:
    path = folder / "a_file"
    path.write_text("not a folder")
    return path


@pytest.mark.parametrize(
    ("make_args", "words"),
    [
        (lambda d: ["-d", "CPU"], "one device"),
        (lambda d: ["-d", "HETERO:CPU"], "one device"),
        (lambda d: ["-d", "HETERO:OPENVINO.NPU,CPU"], "two devices available"),
        (lambda d: ["-d", "NOSUCH"], "NOSUCH"),
        (lambda d: ["-t", "0"], "-t"),
        (lambda d: ["-t", "soon"], "-t"),
        (lambda d: ["--save", "/proc/hetero_tune/out.onnx"], "--save"),
        (lambda d: ["--save", d], "--save"),
        (lambda d: ["--report", "/proc/hetero_tune"], "--report"),
        (lambda d: ["--report", _a_file(d)], "--report"),
        (lambda d: ["--atol", "logits:1e-3"], "'logits'"),
        (lambda d: ["--rtol", "abc"], "--rtol"),
        (lambda d: ["-data_shape", "[2,3,4]"], "rank"),
        (lambda d: ["-i", d / "missing.npy"], "missing.npy"),
        (lambda d: ["--config", "nonsense"], "--config"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(chain, tmp_path, make_args, words):
    given = tmp_path / "given"
    given.mkdir()
    extra = [str(a) for a in make_args(given)]
    out = tmp_path / "written"
    args = [
        "-m",
        chain,
        "-d",
        "HETERO:OPENVINO,CPU",
        "--save",
        out / "tuned.onnx",
        "--report",
        out / "report",
    ]
    for option in ("-d", "--save", "--report"):  # the case's own value replaces the default one
        if option in extra:
            k = args.index(option)
            del args[k : k + 2]
    with nothing_left_behind(out, given):
        result = invoke(hetero, "tune", *args, *extra)
        assert result.exit_code == 2, result.output
        assert words in one_error_line(result)
        assert "Winner" not in result.stdout
    assert not out.exists()


def test_dynamic_dimensions_need_a_shape(dynamic, tmp_path):
    out = tmp_path / "out"
    with nothing_left_behind(tmp_path):
        result = invoke(hetero, "tune", "-m", dynamic, "-d", "HETERO:OPENVINO,CPU", "--save", out / "t.onnx")
        assert result.exit_code == 2, result.output
        line = one_error_line(result)
        assert "'x'" in line and "-shape or -data_shape" in line


def test_save_is_required(chain):
    result = invoke(hetero, "tune", "-m", chain, "-d", "HETERO:OPENVINO,CPU")
    assert result.exit_code == 2
    assert "--save" in one_error_line(result)


def test_help_has_examples():
    result = invoke(hetero, "tune", "--help")
    assert result.exit_code == 0
    for words in ("-t SECONDS", "--save", "--report", "--atol", "hetero tune -m", "hetero benchmark -m"):
        assert words in result.stdout
    assert "tune" in invoke(hetero, "--help").stdout
