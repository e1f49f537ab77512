"""``hetero validate``: its tables and last line, exit statuses 0 / 1 / 2, Polygraphy's files written and read
back, and bad input refused with one line, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper as h
from support.arithmetic import require_only_differing, require_openvino_difference
from support.helpers import EXP_CHAIN, const, make_model, needs_openvino, seeded, vi
from support.robust import invoke, nothing_left_behind, one_error_line

from hetero_cli.app.validate import polygraphy_json
from hetero_cli.cli import hetero


def last_line(result) -> str:
    return result.stdout.strip().splitlines()[-1]


def test_passed_exit_0_with_a_table_per_output(chain):
    result = invoke(hetero, "validate", "-m", chain, "-d", "CPU", "--atol", "0", "--rtol", "0")
    assert result.exit_code == 0, result.output
    assert last_line(result) == "PASSED"
    assert result.stdout.count("PASSED") == 1 and "FAILED" not in result.stdout
    for column in ("max abs", "mean abs", "median abs", "max rel", "worst index", "tolerance", "verdict"):
        assert column in result.stdout
    assert "elemwise error, atol 0, rtol 0" in result.stdout


@needs_openvino
def test_failed_exit_1_names_the_subgraph_and_bisects(chain, tmp_path):
    require_only_differing(EXP_CHAIN, seeded((4, 64)), ["n3"])
    outputs = tmp_path / "out" / "o.json"
    args = ["validate", "-m", chain, "-d", "HETERO:OPENVINO,CPU", "--atol", "0", "--rtol", "0"]
    result = invoke(
        hetero,
        *args,
        *_rest_on("CPU", 0, 2),
        *_rest_on("OPENVINO", 2),
        "--bisect",
        "--save-outputs",
        outputs,
    )
    assert result.exit_code == 1, result.output
    assert last_line(result) == "FAILED"
    assert (
        "The first subgraph that differs: subgraph2 on OPENVINO, 6 node(s): n2, n3, n4, n5, n6, n7"
        in result.stdout
    )
    assert "subgraph1 on CPU: within tolerance" in result.stdout
    assert "The node that differs fed the reference's values: n3" in result.stdout
    # a FAILED verdict is the command's answer: what it wrote stays
    runs = polygraphy_json.load_outputs(outputs)
    assert list(runs) == ["hetero[HETERO:OPENVINO,CPU]", "onnxrt[CPU]"]
    assert not np.array_equal(runs["hetero[HETERO:OPENVINO,CPU]"][0]["y"], runs["onnxrt[CPU]"][0]["y"])


def _rest_on(device: str, start: int, stop: int = 8) -> list[str]:
    return [a for k in range(start, stop) for a in ("--affinity", f"n{k}={device}")]


@needs_openvino
def test_save_inputs_then_load_inputs_gives_the_same_verdict(chain, tmp_path):
    require_openvino_difference(onnx.load(str(chain)), {"x": seeded((4, 64))})
    inputs = tmp_path / "in.json"
    args = ["validate", "-m", chain, "-d", "OPENVINO", "--atol", "0", "--rtol", "0", "--seed", "5"]
    first = invoke(hetero, *args, "--save-inputs", inputs)
    assert first.exit_code == 1 and last_line(first) == "FAILED", first.output
    saved = polygraphy_json.load_inputs(inputs)
    assert len(saved) == 1 and saved[0]["x"].shape == (4, 64)
    again = invoke(hetero, *args[:-2], "--load-inputs", inputs)
    assert again.exit_code == 1 and last_line(again) == "FAILED", again.output
    # the same numbers: the same inputs
    assert _table_rows(first.stdout) == _table_rows(again.stdout)
    loose = invoke(hetero, *args[:5], "--load-inputs", inputs, "--atol", "1e-3")
    assert loose.exit_code == 0 and last_line(loose) == "PASSED", loose.output


def _table_rows(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip().startswith("y ")]


def test_dynamic_dimensions_need_a_shape(dynamic):
    result = invoke(hetero, "validate", "-m", dynamic, "-d", "CPU")
    assert result.exit_code == 2
    assert (
        "input 'x' is [n,16], and neither -shape nor -data_shape gives a size for its dynamic dimension 0: "
        "give it with -shape or -data_shape (e.g. -data_shape x[1,16])"
    ) in one_error_line(result)
    ok = invoke(hetero, "validate", "-m", dynamic, "-d", "CPU", "-data_shape", "[3,16]")
    assert ok.exit_code == 0 and last_line(ok) == "PASSED", ok.output
    ok = invoke(hetero, "validate", "-m", dynamic, "-d", "CPU", "-shape", "x[2,16]")
    assert ok.exit_code == 0, ok.output


def _bad_inputs(folder: Path) -> Path:
    path = folder / "bad.json"
    path.write_text(json.dumps({"not": "inputs"}))
    return path


def _outputs_file(folder: Path) -> Path:
    path = folder / "outputs.json"
    polygraphy_json.save_outputs(path, {"r": [{"y": np.zeros((2, 3), np.float32)}]})
    return path


def _wrong_input(folder: Path) -> Path:
    path = folder / "wrong.json"
    polygraphy_json.save_inputs(path, [{"z": np.zeros((2, 3), np.float32)}])
    return path


@pytest.mark.parametrize(
    ("make_args", "words"),
    [
        (lambda m, d: ["--atol", "logits:1e-3"], "'logits'"),
        (lambda m, d: ["--rtol", "abc"], "--rtol"),
        (lambda m, d: ["--check-error-stat", "worst"], "--check-error-stat"),
        (lambda m, d: ["--load-inputs", d / "missing.json"], "missing.json"),
        (lambda m, d: ["--load-inputs", _bad_inputs(d)], "bad.json"),
        (lambda m, d: ["--load-inputs", _outputs_file(d)], "outputs"),
        (lambda m, d: ["--load-inputs", _wrong_input(d)], "'z'"),
        (lambda m, d: ["--save-outputs", "/proc/hetero_validate/o.json"], "--save-outputs"),
        (lambda m, d: ["--save-inputs", d], "--save-inputs"),
        (lambda m, d: ["--reference", "HETERO:CPU"], "--reference"),
        (lambda m, d: ["--reference", "NOSUCH"], "NOSUCH"),
        (lambda m, d: ["-data_shape", "[2,3,4]"], "rank"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(chain, tmp_path, make_args, words):
    given = tmp_path / "given"
    given.mkdir()
    extra = make_args(chain, given)
    out = tmp_path / "written"
    with nothing_left_behind(tmp_path / "written", given):
        result = invoke(
            hetero,
            "validate",
            "-m",
            chain,
            "-d",
            "CPU",
            *extra,
            "--save-outputs" if "--save-outputs" not in extra else "--seed",
            out / "o.json" if "--save-outputs" not in extra else "1",
            "--save-inputs" if "--save-inputs" not in extra else "--seed",
            out / "i.json" if "--save-inputs" not in extra else "2",
        )
        assert result.exit_code == 2, result.output
        assert words in one_error_line(result)
        assert "PASSED" not in result.stdout and "FAILED" not in result.stdout
    assert not out.exists()


def test_help_has_examples():
    result = invoke(hetero, "validate", "--help")
    assert result.exit_code == 0
    for words in ("--atol", "--bisect", "--load-inputs", "--save-outputs", "hetero validate -m"):
        assert words in result.stdout
    assert "validate" in invoke(hetero, "--help").stdout


def test_dot_dir_draws_the_split_only(chain, tmp_path):
    dots = tmp_path / "dots"
    result = invoke(hetero, "validate", "-m", chain, "-d", "HETERO:CPU", "--dot-dir", dots)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in dots.iterdir()) == [
        "hetero_affinity_chain.dot",
        "hetero_subgraphs_chain.dot",
    ]
    assert f"Wrote {dots / 'hetero_affinity_chain.dot'}" in result.stdout


@needs_openvino
def test_several_values_per_tolerance_option_as_polygraphy_takes_them(chain):
    require_openvino_difference(onnx.load(str(chain)), {"x": seeded((4, 64))})
    base = ["validate", "-m", chain, "-d", "OPENVINO"]
    strict = invoke(
        hetero, *base, "--atol", "1", "y:0", "--rtol", "1", "y:0", "--check-error-stat", "elemwise"
    )
    assert strict.exit_code == 1 and strict.stdout.strip().endswith("FAILED"), strict.output
    loose = invoke(hetero, *base, "--atol", "0", "y:1e-3", "--rtol", "0", "--seed", "1")
    assert loose.exit_code == 0 and loose.stdout.strip().endswith("PASSED"), loose.output
    unknown = invoke(hetero, *base, "--atol", "1e-5", "logits:1e-3")
    assert unknown.exit_code == 2 and "'logits'" in one_error_line(unknown)


ON_BOTH = ["--affinity", "n0=OPENVINO", "--affinity", "n1=CPU", "--affinity", "n2=CPU"]


@needs_openvino
def test_the_same_infinities_and_nans_on_both_sides_are_named_not_printed_as_nan(nonfinite):
    result = invoke(hetero, "validate", "-m", nonfinite, "-d", "HETERO:OPENVINO,CPU", *ON_BOTH)
    assert result.exit_code == 1, result.output
    assert last_line(result) == (
        "FAILED: the outputs differ only where both runs give the same infinities and NaNs "
        "(--infinities-compare-equal compares the infinities as equal; Polygraphy fails every NaN)"
    )
    rows = [
        line.split() for line in result.stdout.splitlines() if line.strip().startswith(("logp ", "ratio "))
    ]
    assert [row[0] for row in rows] == ["logp", "ratio"]
    for row in rows:
        assert row[1:7] == ["0"] * 6  # the statistics of the other elements, not nan
    assert rows[0][-3:] == ["FAILED:", "same", "inf"] and rows[1][-3:] == ["FAILED:", "same", "NaN"]
    assert "logp: 2 elements are -inf on both sides" in result.stdout
    assert "ratio: 2 elements are NaN on both sides" in result.stdout
    # nothing to localise: the split gives what the whole model gives
    assert "subgraph that differs" not in result.stdout


@needs_openvino
def test_infinities_compare_equal_passes_a_split_that_gives_the_same_infinities(infinities, tmp_path):
    args = ["validate", "-m", infinities, "-d", "HETERO:OPENVINO,CPU", *ON_BOTH[:4]]
    strict = invoke(hetero, *args)
    assert strict.exit_code == 1, strict.output
    assert last_line(strict) == (
        "FAILED: the outputs differ only where both runs give the same infinities "
        "(--infinities-compare-equal compares the infinities as equal)"
    )
    inputs, outputs = tmp_path / "in.json", tmp_path / "out.json"
    equal = invoke(
        hetero, *args, "--infinities-compare-equal", "--save-inputs", inputs, "--save-outputs", outputs
    )
    assert equal.exit_code == 0 and last_line(equal) == "PASSED", equal.output
    assert "out.json --atol 1e-05 --rtol 1e-05 --infinities-compare-equal\n" in equal.stdout
    runs = polygraphy_json.load_outputs(outputs)
    assert np.count_nonzero(np.isneginf(runs["hetero[HETERO:OPENVINO,CPU]"][0]["logp"])) == 2


@needs_openvino
def test_a_subgraph_that_hands_on_the_same_infinities_is_no_culprit(tmp_path):
    """Log of a masked input on CPU hands -inf on to an Exp on OPENVINO, which differs in the last bit: the
    localisation names the OPENVINO subgraph, not the CPU one whose -inf the reference gives too."""
    mask = (np.arange(256).reshape(4, 64) % 3 != 0).astype(np.float32)
    nodes = [
        h.make_node("Mul", ["x", "mask"], ["y"], name="n0"),
        h.make_node("Log", ["y"], ["l"], name="n1"),
        h.make_node("Exp", ["l"], ["e"], name="n2"),
    ]
    path = tmp_path / "log_exp.onnx"
    onnx.save(make_model(nodes, [vi("x", [4, 64])], [vi("e", [4, 64])], [const("mask", mask)]), str(path))
    result = invoke(
        hetero, "validate", "-m", path, "-d", "HETERO:OPENVINO,CPU", "--affinity", "n0=CPU", "--affinity",
        "n1=CPU", "--affinity", "n2=OPENVINO", "--atol", "0", "--rtol", "0",
    )  # fmt: skip
    assert result.exit_code == 1 and last_line(result) == "FAILED", result.output
    assert "subgraph1 on CPU: within tolerance" in result.stdout
    assert "The first subgraph that differs: subgraph2 on OPENVINO, 1 node(s): n2" in result.stdout


def test_a_bisect_step_whose_shapes_differ_says_so_not_an_error_of_0(capsys):
    from hetero_cli.app.validate import BisectStep, Localisation, SubgraphCheck, Tolerances, compare_outputs
    from hetero_cli.cli.commands.validate import _print_localisation

    tolerances = Tolerances()
    shapes = compare_outputs({"b": np.zeros((1, 1, 2))}, {"b": np.zeros((1, 1, 1))}, tolerances)
    values = compare_outputs({"c": np.ones(3)}, {"c": np.zeros(3)}, tolerances)
    first = SubgraphCheck("subgraph2", "OPENVINO", ("pool", "neg"), shapes)
    steps = [BisectStep(("pool",), "OPENVINO", shapes), BisectStep(("neg",), "OPENVINO", values)]
    _print_localisation(Localisation([first], first, steps, ("pool",)), None)
    lines = [line for line in capsys.readouterr().out.splitlines() if "bisect" in line]
    assert (
        "pool on OPENVINO: DIFFERS (b: shapes differ: (1, 1, 2) here, (1, 1, 1) in the reference)" in lines[0]
    )
    assert lines[1].endswith("neg on OPENVINO: DIFFERS (max abs error 1)")


@pytest.mark.parametrize("failure", [KeyboardInterrupt, RuntimeError])
def test_a_failure_after_the_compile_drew_dot_files_removes_them(chain, tmp_path, monkeypatch, failure):
    """validate_model's compile draws them inside the library: the command noted them before it ran."""
    from hetero_cli.cli.commands import validate as command

    def cut_short(core, model, device, **_):
        core.compile_model(model, device)  # draws the .dot files, as validate_model's compile of the split
        raise failure("cut short")

    monkeypatch.setattr(command, "validate_model", cut_short)
    result = invoke(hetero, "validate", "-m", chain, "-d", "HETERO:CPU", "--dot-dir", tmp_path / "dots")
    assert result.exit_code == (130 if failure is KeyboardInterrupt else 1), result.output
    assert not (tmp_path / "dots").exists()
