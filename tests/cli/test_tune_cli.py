"""``hetero tune``: bad input refused with one line, exit 2 and nothing written (before any measuring, or
where the budget is too small, after pricing one candidate); a real tune of a small chain on OPENVINO and
CPU: the table, the saved model that hetero benchmark runs as is, the report and the chart. No timing is
judged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image
from support.helpers import EXP_CHAIN, needs_openvino
from support.robust import invoke, nothing_left_behind, one_error_line

from hetero_cli import Core
from hetero_cli.app.tune.chart import SIZE
from hetero_cli.cli import hetero


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


def test_a_budget_under_one_candidate_is_refused_naming_the_budget_to_give(chain, tmp_path):
    out = tmp_path / "out"
    with nothing_left_behind(tmp_path):
        result = invoke(
            hetero, "tune", "-m", chain, "-d", "HETERO:OPENVINO,CPU", "-t", "0.001", "--save", out / "t.onnx",
            "--report", out / "report",
        )  # fmt: skip
        if "OpenVINOExecutionProvider" not in ort.get_available_providers():
            assert result.exit_code == 2 and "two devices available" in one_error_line(result)
            return
        assert result.exit_code == 2, result.output
        line = one_error_line(result)
        assert "-t" in line and "give a budget of at least" in line
    assert not out.exists()


@needs_openvino
def test_tune_saves_the_winner_reports_and_benchmark_runs_it_as_is(chain, tmp_path):
    out = tmp_path / "out"
    saved, report = out / "tuned.onnx", out / "report"
    result = invoke(
        hetero, "tune", "-m", chain, "-d", "HETERO:OPENVINO,CPU", "-t", "4", "--save", saved, "--report", report,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    for words in ("candidate", "median ms", "vs fastest single device", "vs automatic", "automatic", "CPU"):
        assert words in result.stdout
    assert "(winner)" in result.stdout
    assert "Validation of the winner against one session of the whole model: PASSED" in result.stdout
    assert f"hetero benchmark -m {saved} -d HETERO:OPENVINO,CPU" in result.stdout

    doc = json.loads((report / "tune_report.json").read_text())
    assert doc["device"] == "HETERO:OPENVINO,CPU" and doc["budget_s"] == 4.0 and doc["seed"] == 0
    names = [c["name"] for c in doc["candidates"]]
    assert {"automatic", "CPU", "OPENVINO"} <= set(names) and doc["winner"] in names
    assert doc["validation"]["passed"] is True
    if any(doc["per_subgraph"].values()):
        with Image.open(report / "tune_chart.png") as image:
            assert image.size == SIZE
    else:
        assert "No tune_chart.png" in result.stdout

    # every node has the winner's affinity: manual mode runs the file as is
    winner = next(c for c in doc["candidates"] if c["name"] == doc["winner"])
    model = Core().read_model(saved)
    assert model.affinities() == winner["affinities"]
    assert set(model.affinities()) == {f"n{i}" for i in range(len(EXP_CHAIN))}
    bench = invoke(hetero, "benchmark", "-m", saved, "-d", "HETERO:OPENVINO,CPU", "-niter", "3")
    assert bench.exit_code == 0, bench.output


@needs_openvino
def test_inputs_from_a_file_are_tuned_on(chain, tmp_path):
    data = tmp_path / "x.npy"
    np.save(data, np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32))
    saved = tmp_path / "tuned.onnx"
    result = invoke(
        hetero, "tune", "-m", chain, "-d", "HETERO:OPENVINO,CPU", "-t", "3", "-i", data, "--save", saved
    )
    assert result.exit_code == 0, result.output
    assert saved.exists()


@needs_openvino
def test_dynamic_dimensions_are_sized_from_an_npy_file_as_benchmark_sizes_them(token_model, tmp_path):
    data = tmp_path / "ids.npy"
    np.save(data, np.arange(6, dtype=np.int64).reshape(2, 3))
    saved, report = tmp_path / "tuned.onnx", tmp_path / "report"
    bench = invoke(
        hetero, "benchmark", "-m", token_model, "-d", "CPU", "-i", f"input_ids:{data}", "-niter", "2"
    )
    assert bench.exit_code == 0, bench.output
    result = invoke(
        hetero, "tune", "-m", token_model, "-d", "HETERO:OPENVINO,CPU", "-t", "3", "-i", f"input_ids:{data}",
        "--save", saved, "--report", report,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert saved.exists()
    doc = json.loads((report / "tune_report.json").read_text())
    assert doc["validation"]["passed"] is True


def test_a_dynamic_dimension_no_file_sizes_is_refused_in_one_line(token_model, tmp_path):
    raw = tmp_path / "ids.raw"
    np.arange(6, dtype=np.int64).tofile(raw)
    out = tmp_path / "out"
    with nothing_left_behind(tmp_path):
        result = invoke(
            hetero, "tune", "-m", token_model, "-d", "HETERO:OPENVINO,CPU", "-i", f"input_ids:{raw}",
            "--save", out / "t.onnx",
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        line = one_error_line(result)
    assert (
        "input 'input_ids' is [batch,sequence], and neither -shape, -data_shape nor an -i file gives a size "
        "for its dynamic dimensions 0, 1: give them with -shape or -data_shape (e.g. -data_shape "
        "input_ids[1,1])"
    ) in line


@needs_openvino
def test_a_model_whose_outputs_hold_infinities_and_nans_passes_validation(nonfinite, tmp_path):
    saved, report = tmp_path / "tuned.onnx", tmp_path / "report"
    result = invoke(
        hetero, "tune", "-m", nonfinite, "-d", "HETERO:OPENVINO,CPU", "-t", "3", "--save", saved,
        "--report", report,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Validation of the winner against one session of the whole model: PASSED" in result.stdout
    outputs = json.loads((report / "tune_report.json").read_text())["validation"]["outputs"]
    assert [(o["name"], o["passed"], o["max_abs"]) for o in outputs] == [
        ("logp", True, 0.0),
        ("ratio", True, 0.0),
    ]


@needs_openvino
def test_the_saved_model_and_the_report_record_the_configuration_measured(chain, tmp_path):
    saved, report = tmp_path / "tuned.onnx", tmp_path / "report"
    result = invoke(
        hetero, "tune", "-m", chain, "-d", "HETERO:OPENVINO,CPU", "-t", "4", "--save", saved, "--report", report,
        "--config", "CPU:INFERENCE_NUM_THREADS=1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    given = {"--config": ["CPU:INFERENCE_NUM_THREADS=1"]}
    assert json.loads(Core().read_model(saved).metadata_props["hetero_cli.tune.config"]) == given
    assert json.loads((report / "tune_report.json").read_text())["config"] == given
    assert "give the same --config to run it as measured" in result.stdout
