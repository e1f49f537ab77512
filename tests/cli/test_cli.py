"""The command line through click's CliRunner: every command, its output format, errors and exit codes."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import click
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto
from onnx import helper as h
from support.counters import parse_counters
from support.helpers import chain_model

import hetero_cli as hc
from hetero_cli import cli
from hetero_cli.app import benchmark as bench
from hetero_cli.app.benchmark.shapes import parse_shapes
from hetero_cli.cli import runner
from hetero_cli.cli.commands import classify as classify_command

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits.onnx"
SAMPLES = ROOT / "samples" / "images"
IMAGES = sorted(SAMPLES.glob("digit_*.*"))
LABELS = (ROOT / "models" / "digits.labels").read_text().split()
HAS_OPENVINO = "OpenVINOExecutionProvider" in ort.get_available_providers()
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()
needs_openvino = pytest.mark.skipif(not HAS_OPENVINO, reason="needs the OpenVINO execution provider")
SPLIT = "HETERO:GPU,OPENVINO,CPU"
ROW = re.compile(r"^\[ INFO \] (\d+)\s+(\d+\.\d{7})(?:\s+(\S.*))?$")


def run(command, *args: str, env: dict[str, str] | None = None):
    result = CliRunner().invoke(command, [str(a) for a in args], env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def top_rows(stdout: str) -> list[tuple[int, float, str | None]]:
    lines = stdout.splitlines()
    start = (
        lines.index("[ INFO ] class_id probability label")
        if any(line.endswith("class_id probability label") for line in lines)
        else lines.index("[ INFO ] class_id probability")
    )
    rows = []
    for line in lines[start + 2 :]:
        m = ROW.match(line)
        if not m:
            break
        rows.append((int(m[1]), float(m[2]), m[3]))
    return rows


def error_line(result) -> str:
    """The one [ ERROR ] line, after any warnings."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("[ ERROR ] ")]
    assert len(errors) == 1, result.stderr
    assert all(line.startswith(("[ ERROR ] ", "[ WARNING ] ")) for line in lines), result.stderr
    return errors[0]


# --- help ----------------------------------------------------------------------------------------------


def test_hetero_help_explains_each_command_in_a_line():
    result = run(cli.hetero, "--help")
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:")[1].split("\n\n")[0].strip().splitlines()  # then the epilog
    assert [line.split()[0] for line in commands] == [
        "classify",
        "benchmark",
        "query",
        "compile",
        "validate",
        "tune",
        "export",
        "serve",
        "devices",
    ]
    assert all(len(line.split()) > 3 for line in commands)


def test_hetero_without_a_command_prints_help():
    result = run(cli.hetero)
    assert result.exit_code == 0 and "Commands:" in result.stdout


@pytest.mark.parametrize("command", [cli.classify, cli.benchmark, cli.query, cli.devices, cli.serve])
def test_every_command_has_help(command):
    for flag in ("--help", "-h"):
        result = run(command, flag)
        assert result.exit_code == 0 and "Usage:" in result.stdout


def test_version():
    result = run(cli.hetero, "--version")
    assert result.exit_code == 0 and hc.__version__ in result.stdout


# --- classify ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", IMAGES, ids=[p.name for p in IMAGES])
def test_top1_is_the_digit_in_the_file_name(path):
    digit = int(path.stem.split("_")[1])
    if digit % 2:
        result = run(cli.classify, DIGITS, path, "HETERO:GPU,CPU")
    else:
        result = run(cli.classify, "-m", DIGITS, "-i", path, "-d", "CPU")
    assert result.exit_code == 0, result.stderr
    rows = top_rows(result.stdout)
    assert rows[0][0] == digit
    assert rows[0][2] == LABELS[digit]


def test_classify_prints_hello_classifications_table():
    result = run(cli.classify, DIGITS, SAMPLES / "digit_3.png", "CPU")
    lines = result.stdout.splitlines()
    assert f"[ INFO ] Image path: {SAMPLES / 'digit_3.png'}" in lines
    i = lines.index("[ INFO ] Top 10 results:")
    assert lines[i + 1] == "[ INFO ] class_id probability label"
    assert lines[i + 2] == "[ INFO ] " + "-" * len("class_id probability label")
    rows = top_rows(result.stdout)
    assert len(rows) == 10
    assert sorted(r[0] for r in rows) == list(range(10))
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    assert sum(r[1] for r in rows) == pytest.approx(1.0, abs=1e-5)
    assert all(r[2] == LABELS[r[0]] for r in rows)
    # columns aligned: the probability starts in column 9 of the row, the label in column 21
    first = lines[i + 3][len("[ INFO ] ") :]
    assert first[9:18] == f"{rows[0][1]:.7f}" and first[21:] == rows[0][2]
    assert "hetero benchmark" in lines[-1]
    assert result.stderr == ""


def test_classify_top_and_labels_options(tmp_path):
    labels = tmp_path / "names.txt"
    labels.write_text("\n".join(f"class-{k}" for k in range(10)))
    result = run(cli.classify, DIGITS, SAMPLES / "digit_4.bmp", "CPU", "-nt", "3", "--labels", labels)
    assert "[ INFO ] Top 3 results:" in result.stdout
    rows = top_rows(result.stdout)
    assert len(rows) == 3 and rows[0] == (4, rows[0][1], "class-4")


def test_no_labels_no_label_column(tmp_path):
    model = tmp_path / "copy.onnx"
    proto = onnx.load(DIGITS)
    del proto.metadata_props[:]
    onnx.save(proto, model)
    result = run(cli.classify, model, SAMPLES / "digit_6.jpg", "CPU")
    assert "[ INFO ] class_id probability" in result.stdout.splitlines()
    assert top_rows(result.stdout)[0][:1] == (6,) and top_rows(result.stdout)[0][2] is None


def test_unavailable_gpu_is_one_warning_line():
    result = run(cli.classify, DIGITS, SAMPLES / "digit_1.bmp", "HETERO:GPU,CPU")
    assert result.exit_code == 0
    if not HAS_CUDA:
        warnings = result.stderr.splitlines()
        assert len(warnings) == 1 and warnings[0].startswith("[ WARNING ] GPU is not available")


def test_pc_on_cpu_counters_parse_back():
    result = run(cli.classify, DIGITS, SAMPLES / "digit_8.png", "CPU", "-pc")
    assert result.exit_code == 0, result.stderr
    infos, total = parse_counters(result.stdout)
    assert infos and total == sum(i.real_time_us for i in infos)
    assert {i.subgraph for i in infos} == {1}
    assert any(i.node_type == "Output" and i.status == "NOT_RUN" for i in infos)


def test_no_pc_no_counters():
    result = run(cli.classify, DIGITS, SAMPLES / "digit_8.png", "CPU")
    assert "Total time:" not in result.stdout and parse_counters(result.stdout)[0] == []


@needs_openvino
def test_split_configuration_gives_two_subgraphs_on_two_devices_and_counters_match():
    result = run(cli.classify, "-m", DIGITS, "-i", SAMPLES / "digit_7.png", "-d", SPLIT, "-pc")
    assert result.exit_code == 0, result.stderr
    assert top_rows(result.stdout)[0][0] == 7
    compiled = hc.Core().compile_model(DIGITS, SPLIT)
    devices = [s.device for s in compiled.subgraphs]
    assert devices == ["CPU", "OPENVINO"]
    assert sorted(n for s in compiled.subgraphs if s.device == "CPU" for n in s.nodes) == [
        "sanitize_isinf",
        "sanitize_isnan",
    ]
    for s in compiled.subgraphs:
        assert f"[ INFO ]   {s.description}" in result.stdout
    infos, total = parse_counters(result.stdout)
    assert total == sum(i.real_time_us for i in infos)
    assert sorted({i.subgraph for i in infos}) == [s.index + 1 for s in compiled.subgraphs]
    for info in infos:
        sub = compiled.subgraphs[info.subgraph - 1]
        if info.node_type != "Output":
            assert info.exec_type.startswith(sub.target.ep), info
    numbers = [i.subgraph for i in infos]
    assert numbers == sorted(numbers)  # execution order
    assert "2. OPENVINO execute time" in {i.node_name for i in infos}


@needs_openvino
def test_affinity_option_forces_a_third_subgraph():
    result = run(
        cli.classify,
        DIGITS,
        SAMPLES / "digit_2.jpg",
        "HETERO:OPENVINO,CPU",
        "--affinity",
        "softmax=CPU",
        "-pc",
    )
    assert result.exit_code == 0, result.stderr
    assert "subgraph3: CPU (CPUExecutionProvider), 1 node(s)" in result.stdout
    infos, _ = parse_counters(result.stdout)
    assert {i.subgraph for i in infos} == {1, 2, 3}
    assert top_rows(result.stdout)[0][0] == 2


def test_affinity_file(tmp_path):
    path = tmp_path / "aff.json"
    path.write_text(json.dumps({"fc2": "CPU"}))
    result = run(cli.classify, DIGITS, SAMPLES / "digit_2.jpg", "HETERO:CPU", "--affinity-file", path)
    assert result.exit_code == 0, result.stderr


def test_invert_option_changes_the_input(tmp_path):
    result = run(cli.classify, DIGITS, SAMPLES / "digit_0.png", "CPU", "--invert")
    assert result.exit_code == 0 and ", inverted" in result.stdout
    assert top_rows(result.stdout)[0][0] != 0 or top_rows(result.stdout)[0][1] < 0.9


def test_dark_on_light_image_is_inverted_automatically(tmp_path):
    from PIL import Image

    path = tmp_path / "ink.png"
    Image.fromarray(255 - np.asarray(Image.open(SAMPLES / "digit_9.png").convert("L")), "L").save(path)
    result = run(cli.classify, DIGITS, path, "CPU")
    assert ", inverted" in result.stdout and top_rows(result.stdout)[0][0] == 9


def test_nhwc_uint8_rgb_model(tmp_path):
    """x uint8 [1,8,8,3] NHWC -> mean colour -> softmax: a red image is class 0, a blue one class 2."""
    from PIL import Image

    nodes = [
        h.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT, name="cast"),
        h.make_node("ReduceMean", ["xf", "axes"], ["m"], keepdims=0, name="mean"),
        h.make_node("Softmax", ["m"], ["y"], name="softmax"),
    ]
    graph = h.make_graph(
        nodes,
        "colours",
        [h.make_tensor_value_info("x", TensorProto.UINT8, [1, 8, 8, 3])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [onnx.numpy_helper.from_array(np.array([1, 2], np.int64), "axes")],
    )
    path = tmp_path / "colours.onnx"
    onnx.save(h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 18)]), path)
    for colour, expected in (((250, 0, 0), 0), ((0, 0, 250), 2)):
        picture = tmp_path / f"{expected}.png"
        Image.new("RGB", (20, 30), colour).save(picture)
        result = run(cli.classify, path, picture, "CPU")
        assert result.exit_code == 0, result.stderr
        assert "NHWC uint8 8x8 RGB" in result.stdout
        assert top_rows(result.stdout)[0][0] == expected
        assert len(top_rows(result.stdout)) == 3


def test_dot_dir_writes_both_files(tmp_path):
    result = run(
        cli.classify, DIGITS, SAMPLES / "digit_5.png", "HETERO:OPENVINO,CPU", "--dot-dir", tmp_path / "d"
    )
    assert result.exit_code == 0, result.stderr
    for kind in ("affinity", "subgraphs"):
        assert (tmp_path / "d" / f"hetero_{kind}_digits.dot").is_file()
        assert f"hetero_{kind}_digits.dot" in result.stdout


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot")
def test_render_svg(tmp_path):
    result = run(
        cli.classify, DIGITS, SAMPLES / "digit_5.png", "CPU", "--dot-dir", tmp_path, "--render", "svg"
    )
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "hetero_subgraphs_digits.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_visualize_environment_variable_dumps_into_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(cli.classify, DIGITS, SAMPLES / "digit_5.png", "CPU", env={"OPENVINO_HETERO_VISUALIZE": "1"})
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "hetero_affinity_digits.dot").is_file()
    assert (tmp_path / "hetero_subgraphs_digits.dot").is_file()


def test_dot_files_asked_by_config_keys_are_reported(tmp_path, monkeypatch):
    """HETERO_DUMP_GRAPH_DOT (and HETERO_DOT_DIR) ask for the files as --dot-dir does, for every command:
    each file written is named, and query draws them by compile_model's rule."""
    monkeypatch.chdir(tmp_path)
    here = Path.cwd()
    result = run(
        cli.classify, DIGITS, SAMPLES / "digit_5.png", "HETERO:CPU", "--config", "HETERO_DUMP_GRAPH_DOT=YES"
    )
    assert result.exit_code == 0, result.stderr
    for kind in ("affinity", "subgraphs"):
        assert (here / f"hetero_{kind}_digits.dot").is_file()
        assert f"[ INFO ] Wrote {here / f'hetero_{kind}_digits.dot'}" in result.stdout.splitlines()
    config = ["--config", "HETERO_DUMP_GRAPH_DOT=YES", "--config", "HETERO_DOT_DIR=dd"]
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", *config)
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (here / "dd").iterdir()) == [
        "hetero_affinity_digits.dot",
        "hetero_subgraphs_digits.dot",
    ]
    assert "[ INFO ] Wrote dd/hetero_subgraphs_digits.dot" in result.stdout.splitlines()
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--config", "HETERO_DOT_DIR=other")
    assert result.exit_code == 0 and not (here / "other").exists()  # where, not whether


def test_config_options_and_load_config(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"CPU": {"INFERENCE_NUM_THREADS": 1}, "HETERO": {"PERF_COUNT": "NO"}}))
    for extra in (
        ["--config", "INFERENCE_NUM_THREADS=1"],
        ["--config", "CPU:INFERENCE_NUM_THREADS=2"],
        ["-load_config", good],
        ["--config", "PERF_COUNT=YES"],
    ):
        result = run(cli.classify, DIGITS, SAMPLES / "digit_0.png", "CPU", *extra)
        assert result.exit_code == 0, (extra, result.stderr)
    result = run(cli.classify, DIGITS, SAMPLES / "digit_0.png", "CPU", "--config", "PERF_COUNT=YES")
    assert "Total time:" not in result.stdout  # PERF_COUNT alone profiles, only -pc prints


# --- errors: one line, exit 2 for usage, 1 at run time ---------------------------------------------------


def _bad_files(tmp: Path) -> dict[str, Path]:
    (tmp / "truncated.onnx").write_bytes(DIGITS.read_bytes()[:1000])
    (tmp / "text.onnx").write_text("not a model")
    (tmp / "truncated.png").write_bytes((SAMPLES / "digit_3.png").read_bytes()[:300])
    (tmp / "empty.jpg").write_bytes(b"")
    (tmp / "bad.json").write_text("{not json")
    (tmp / "list.json").write_text("[1, 2]")
    (tmp / "hetero_not_object.json").write_text('{"HETERO": 5}')
    graph = h.make_graph(
        [h.make_node("Relu", ["x"], ["y"], name="relu")],
        "vector",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    onnx.save(h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)]), tmp / "vector.onnx")
    return {p.name: p for p in tmp.iterdir()}


IMG = SAMPLES / "digit_3.png"
CLASSIFY_ERRORS = [
    # (arguments, exit code, text the error line must hold)
    (["missing.onnx", IMG, "CPU"], 2, "model file not found"),
    (["{truncated.onnx}", IMG, "CPU"], 2, "truncated"),
    (["{text.onnx}", IMG, "CPU"], 2, "not a readable ONNX model"),
    ([DIGITS, "{truncated.png}", "CPU"], 2, "corrupt or truncated"),
    ([DIGITS, "{empty.jpg}", "CPU"], 2, "is empty"),
    ([DIGITS, "nowhere.png", "CPU"], 2, "image file not found"),
    (["{vector.onnx}", IMG, "CPU"], 2, "an image needs rank 4"),
    ([DIGITS, IMG, "HETERO:FOO,CPU"], 2, "unknown device 'FOO'"),
    ([DIGITS, IMG, "HETERO:CPU,,GPU"], 2, "empty device name"),
    ([DIGITS, IMG, "CPU,GPU"], 2, "needs the HETERO: prefix"),
    ([DIGITS, IMG, "NPU"], 2, "unknown device"),
    ([DIGITS, IMG, "CPU", "--config", "FOO=1"], 2, "unknown config key 'FOO'"),
    ([DIGITS, IMG, "HETERO:CPU", "--config", "FOO=1"], 2, "unknown HETERO config key 'FOO'"),
    ([DIGITS, IMG, "CPU", "--config", "CPU:INFERENCE_NUM_THREADS=many"], 2, "bad value"),
    ([DIGITS, IMG, "CPU", "--config", "novalue"], 2, "KEY=VALUE"),
    ([DIGITS, IMG, "CPU", "--config", "XPU:PERF_COUNT=YES"], 2, "XPU"),
    ([DIGITS, IMG, "CPU", "-load_config", "{bad.json}"], 2, "not valid JSON"),
    ([DIGITS, IMG, "CPU", "-load_config", "{list.json}"], 2, "JSON object"),
    ([DIGITS, IMG, "CPU", "-load_config", "nofile.json"], 2, "no such file"),
    ([DIGITS, IMG, "HETERO:CPU", "-load_config", "{hetero_not_object.json}"], 2, '"HETERO" takes an object'),
    ([DIGITS, IMG, "HETERO:CPU", "--affinity", "nonode=CPU"], 2, "names no node"),
    ([DIGITS, IMG, "HETERO:CPU", "--affinity", "conv1=FOO"], 2, "unknown device 'FOO'"),
    ([DIGITS, IMG, "HETERO:CPU", "--affinity", "conv1"], 2, "NODE=DEVICE"),
    ([DIGITS, IMG, "HETERO:CPU", "--affinity-file", "{list.json}"], 2, "JSON object"),
    ([DIGITS, IMG, "CPU", "--bogus"], 2, "No such option"),
    ([DIGITS, IMG, "CPU", "-foo"], 2, "No such option '-foo'"),  # click alone named '-f'
    ([DIGITS, IMG, "CPU", "-pcc"], 2, "No such option '-pcc' (did you mean -pc?)"),
    ([DIGITS, IMG, "CPU", "-pc", "-pcx"], 2, "No such option '-pcx'"),  # not the valid -pc before it
    ([DIGITS, IMG, "CPU", "extra"], 2, "unexpected extra argument"),
    ([DIGITS], 2, "no image given"),
    ([DIGITS, IMG, "CPU", "--scale", "0"], 2, "divide by zero"),
    ([DIGITS, IMG, "CPU", "-nt", "0"], 2, "-nt"),
    ([DIGITS, IMG, "CPU", "--labels", "nolabels.txt"], 2, "no such file"),
]
if not HAS_CUDA:
    CLASSIFY_ERRORS.append(([DIGITS, IMG, "GPU"], 1, "no device of GPU is available"))
if HAS_OPENVINO:
    CLASSIFY_ERRORS += [
        ([DIGITS, IMG, "HETERO:OPENVINO"], 2, "sanitize_isnan"),
        ([DIGITS, IMG, "HETERO:OPENVINO,CPU", "--affinity", "conv1=GPU"], 2, "conv1=GPU"),
    ]


@pytest.mark.parametrize(("args", "code", "text"), CLASSIFY_ERRORS, ids=[str(c[2]) for c in CLASSIFY_ERRORS])
def test_classify_errors(tmp_path, args, code, text):
    files = _bad_files(tmp_path)
    argv = [files[str(a)[1:-1]] if str(a).startswith("{") else a for a in args]
    result = run(cli.classify, *argv)
    assert result.exit_code == code, (result.stdout, result.stderr)
    line = error_line(result)
    assert text in line, line


def test_debug_adds_the_traceback():
    result = CliRunner().invoke(cli.classify, ["missing.onnx", str(IMG), "CPU", "--debug"])
    assert result.exit_code == 2
    assert "Traceback" in result.stderr and "[ ERROR ] model file not found" in result.stderr


def test_unexpected_exceptions_are_one_line(monkeypatch):
    def boom(*_args, **_kwargs):
        raise RuntimeError("something odd\nsecond line")

    monkeypatch.setattr(classify_command.image, "read", boom)
    result = run(cli.classify, DIGITS, IMG, "CPU")
    assert result.exit_code == 1
    assert error_line(result).startswith("[ ERROR ] internal error: RuntimeError: something odd second line")


def test_compile_failure_is_a_run_time_error(monkeypatch):
    def fail(*_args, **_kwargs):
        raise hc.CompileError("subgraph1 could not be compiled: test")

    monkeypatch.setattr(hc.Core, "compile_model", fail)
    result = run(cli.classify, DIGITS, IMG, "CPU")
    assert result.exit_code == 1 and "could not be compiled" in error_line(result)


def test_library_warnings_print_once_each():
    import logging

    logger = logging.getLogger("hetero_cli")

    @click.command(cls=runner.Command)
    def noisy():
        logger.warning("first %s", "warning")
        logger.warning("first %s", "warning")
        logger.warning("second\nwarning")

    result = run(noisy)
    assert result.stderr.splitlines() == ["[ WARNING ] first warning", "[ WARNING ] second warning"]


# --- query ---------------------------------------------------------------------------------------------


def test_query_table_summary_and_save(tmp_path):
    out = tmp_path / "fixed.onnx"
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--affinity", "softmax=CPU", "--save", out)
    assert result.exit_code == 0, result.stderr
    for node in ("sanitize_isnan", "conv1", "softmax"):
        assert node in result.stdout
    assert "subgraph1" in result.stdout and "1 subgraph(s) on CPU; 0 tensor(s) cross devices" in result.stdout
    saved = hc.Core().read_model(out)
    assert len(saved.affinities()) == len(saved.get_ops())
    again = run(cli.query, "-m", out, "-d", "HETERO:CPU")
    assert "manual mode" in again.stdout and again.exit_code == 0


def test_the_command_query_save_prints_runs_the_saved_model(tmp_path):
    """digits.onnx has a dynamic batch: the printed command sizes it, as benchmark asks."""
    out = tmp_path / "fixed it.onnx"
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--save", out)
    line = re.search(r"`hetero benchmark (.*)` runs it as is", result.stdout + result.stderr)
    assert line is not None and "--fill-dynamic" in line.group(1)
    again = run(cli.benchmark, *shlex.split(line.group(1)), "-niter", "2")
    assert again.exit_code == 0, again.stderr


def test_benchmark_line_carries_the_sizes_a_dynamic_model_was_given():
    from hetero_cli.cli.files import benchmark_line

    dynamic, static = hc.Core().read_model(DIGITS), hc.Core().read_model(chain_model())
    sizes = [("-shape", None), ("-data_shape", "[1,1,32,32]")]
    assert (
        benchmark_line("t.onnx", "CPU", dynamic, sizes)
        == "`hetero benchmark -m t.onnx -d CPU -data_shape '[1,1,32,32]'`"
    )
    assert benchmark_line("t.onnx", "CPU", static, sizes) == "`hetero benchmark -m t.onnx -d CPU`"
    files = [("-shape", None), ("-i", "image:a b.npy"), ("-i", "c.npy")]
    want = "`hetero benchmark -m t.onnx -d CPU -i 'image:a b.npy' -i c.npy`"
    assert benchmark_line("t.onnx", "CPU", dynamic, files) == want


def test_query_json():
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["device"] == "HETERO:CPU" and set(doc["affinities"].values()) == {"CPU"}
    assert len(doc["plan"]["subgraphs"]) == 1 and doc["crossing_tensors"] == []


@pytest.mark.parametrize(
    "how",
    [
        ["--dot-dir", "dd"],
        pytest.param(
            ["--render", "svg"], marks=pytest.mark.skipif(shutil.which("dot") is None, reason="needs dot")
        ),
        ["OPENVINO_HETERO_VISUALIZE"],
    ],
    ids=["dot-dir", "render", "environment"],
)
def test_query_json_stays_json_when_dot_files_are_written(tmp_path, monkeypatch, how):
    monkeypatch.chdir(tmp_path)
    env = {"OPENVINO_HETERO_VISUALIZE": "1"} if how == ["OPENVINO_HETERO_VISUALIZE"] else None
    args = [] if env else how
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--json", *args, env=env)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["device"] == "HETERO:CPU"
    assert result.stderr.count("[ INFO ] Wrote ") == 2


def test_query_refuses_a_bad_affinity_before_printing_the_table():
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--affinity", "softmax=OPENVINO")
    assert result.exit_code == 2
    assert "softmax=OPENVINO" in error_line(result)
    assert "Affinities of" not in result.stdout and "conv1" not in result.stdout


@needs_openvino
def test_query_split(tmp_path):
    result = run(cli.query, "-m", DIGITS, "-d", SPLIT, "--dot-dir", tmp_path)
    assert result.exit_code == 0, result.stderr
    assert (
        "2 subgraph(s) on CPU, OPENVINO; 2 tensor(s) cross devices: image_is_nan, image_is_inf"
        in result.stdout
    )
    assert re.search(r"subgraph1\s+CPU\s+2\s", result.stdout)
    assert re.search(r"subgraph2\s+OPENVINO\s+15\s", result.stdout)
    assert (tmp_path / "hetero_subgraphs_digits.dot").is_file()
    doc = json.loads(run(cli.query, "-m", DIGITS, "-d", SPLIT, "--json").stdout)
    assert [s["device"] for s in doc["plan"]["subgraphs"]] == ["CPU", "OPENVINO"]
    out = tmp_path / "split.onnx"
    run(cli.query, "-m", DIGITS, "-d", SPLIT, "--affinity", "softmax=CPU", "--save", out)
    compiled = hc.Core().compile_model(out, "HETERO:OPENVINO,CPU")
    assert [s.device for s in compiled.subgraphs] == ["CPU", "OPENVINO", "CPU"]


@needs_openvino
def test_query_reports_unsupported_nodes():
    result = run(cli.query, "-m", DIGITS, "-d", "HETERO:OPENVINO")
    assert result.exit_code == 2
    assert "- (unsupported)" in result.stdout
    assert "sanitize_isnan" in error_line(result)


def test_query_needs_a_device():
    result = run(cli.query, "-m", DIGITS)
    assert result.exit_code == 2 and "-d" in error_line(result)


# --- devices -------------------------------------------------------------------------------------------


def test_devices_layout():
    result = run(cli.devices)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "[ INFO ] Available devices:"
    assert "[ INFO ] CPU :" in lines
    i = lines.index("[ INFO ] CPU :")
    assert lines[i + 1] == "[ INFO ] \tSUPPORTED_PROPERTIES:"
    assert lines[i + 2] == "[ INFO ] \t\tFULL_DEVICE_NAME: ONNX Runtime CPU execution provider"
    assert lines[i + 3] == "[ INFO ] \t\tEXECUTION_PROVIDER: CPUExecutionProvider"
    assert any(line.startswith("[ INFO ] \t\tINFERENCE_NUM_THREADS:") for line in lines)
    if HAS_OPENVINO:
        assert "[ INFO ] OPENVINO :" in lines
    if not HAS_CUDA:
        assert "[ INFO ] Known devices not available here:" in lines
        assert any(
            line.startswith("[ INFO ] GPU : ") and "make FLAVOUR=gpu install" in line for line in lines
        )


# --- benchmark -----------------------------------------------------------------------------------------

STAT = re.compile(
    r"\[ INFO \] Count:\s+(\d+) iterations\n\[ INFO \] Duration:\s+([\d.]+) ms\n\[ INFO \] Latency:\n"
    r"\[ INFO \]    Median:\s+([\d.]+) ms\n\[ INFO \]    Average:\s+([\d.]+) ms\n"
    r"\[ INFO \]    Min:\s+([\d.]+) ms\n\[ INFO \]    Max:\s+([\d.]+) ms\n\[ INFO \] Throughput:\s+([\d.]+) FPS"
)


def stats(stdout: str) -> dict[str, float]:
    m = STAT.search(stdout)
    assert m, stdout
    keys = ("count", "duration", "median", "average", "min", "max", "throughput")
    return dict(zip(keys, map(float, m.groups()), strict=True))


def test_benchmark_sync():
    result = run(cli.benchmark, "-m", DIGITS, "-b", "1", "-d", "CPU", "-niter", "30", "-api", "sync")
    assert result.exit_code == 0, result.stderr
    s = stats(result.stdout)
    assert s["count"] == 30
    assert s["min"] <= s["median"] <= s["max"] and s["min"] <= s["average"] <= s["max"]
    # the printed median is rounded to 2 decimals (as benchmark_app prints it): allow for that rounding
    assert s["throughput"] == pytest.approx(1000 / s["median"], rel=0.01 + 0.005 / s["median"])
    for k in range(1, 12):
        assert f"[Step {k}/11]" in result.stdout
    assert "Execution Devices:['CPU']" in result.stdout


def test_benchmark_async_rounds_iterations_to_requests_and_prints_counters_per_request():
    result = run(
        cli.benchmark, "-m", DIGITS, "-b", "1", "-niter", "10", "-nireq", "3", "-pc", "-hint", "throughput"
    )
    assert result.exit_code == 0, result.stderr
    assert stats(result.stdout)["count"] == 12
    assert "rounded up to 12" in result.stdout
    blocks = re.split(r"\[ INFO \] Performance counts for \d+-th infer request\n", result.stdout)[1:]
    assert len(blocks) == 3
    for block in blocks:
        infos, total = parse_counters(block)
        assert infos and total == sum(i.real_time_us for i in infos)


def test_benchmark_prints_counters_when_a_config_sets_perf_count():
    """PERF_COUNT=YES from --config does what -pc does (benchmark_app reads it from its config too)."""
    result = run(
        cli.benchmark, "-m", DIGITS, "-b", "1", "-niter", "5", "-api", "sync", "--config", "PERF_COUNT=YES"
    )
    assert result.exit_code == 0, result.stderr
    (block,) = re.split(r"\[ INFO \] Performance counts for \d+-th infer request\n", result.stdout)[1:]
    infos, total = parse_counters(block)
    assert infos and total == sum(i.real_time_us for i in infos)


def test_benchmark_prints_counters_when_a_config_file_sets_perf_count_for_a_device(tmp_path):
    """benchmark_app's own -load_config shape, {"CPU": {"PERF_COUNT": "YES"}}, prints the counters too."""
    (tmp_path / "c.json").write_text('{"CPU": {"PERF_COUNT": "YES"}}')
    result = run(
        cli.benchmark,
        "-m",
        DIGITS,
        "-b",
        "1",
        "-niter",
        "2",
        "-api",
        "sync",
        "-load_config",
        tmp_path / "c.json",
    )
    assert result.exit_code == 0, result.stderr
    assert "Performance counts for 0-th infer request" in result.stdout


@needs_openvino
def test_benchmark_counts_only_the_device_a_config_sets_perf_count_for():
    """docs/counters-and-dot.md: a device's PERF_COUNT counts only that device's subgraphs (-pc counts them all)."""
    result = run(
        cli.benchmark, "-m", DIGITS, "-b", "1", "-d", "HETERO:OPENVINO,CPU", "-niter", "2", "-nireq", "1",
        "--config", "CPU:PERF_COUNT=YES",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    block = result.stdout.split("Performance counts for 0-th infer request\n")[1].split("[ INFO ]")[0]
    infos, _ = parse_counters(block)
    assert infos and {i.exec_type for i in infos} == {"CPUExecutionProvider"}


class SteppingTime:
    """``time`` as the benchmark's loop sees it: every perf_counter() reading is ``step_s`` later than the
    one before, whatever the machine's speed or load."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += self.step_s
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_benchmark_time_limit(monkeypatch):
    """-t 1 runs until a second has passed and stops at the first check after it: a loop's clock that moves
    50 ms a reading (a few readings an iteration) ends between 1 and 1.2 seconds."""
    loop = sys.modules["hetero_cli.app.benchmark.measure"]  # the package names its function measure too
    monkeypatch.setattr(loop, "time", SteppingTime(0.05))
    result = run(cli.benchmark, "-m", DIGITS, "-b", "1", "-t", "1", "-api", "sync")
    assert result.exit_code == 0, result.stderr
    assert 1000 <= stats(result.stdout)["duration"] < 1200


def test_benchmark_pcsort_simple_sort_drops_not_run_rows():
    result = run(
        cli.benchmark, "-m", DIGITS, "-b", "1", "-niter", "5", "-api", "sync", "-pcsort", "simple_sort"
    )
    assert result.exit_code == 0, result.stderr
    table = result.stdout.split("Performance counts sorted for 0-th infer request")[1].split("Total time:")[0]
    rows = [line for line in table.splitlines() if line.startswith("subgraph")]
    assert rows and all("NOT_RUN" not in r for r in rows)
    times = [float(re.search(r"realTime \(ms\): ([\d.]+)", r)[1]) for r in rows]
    assert times == sorted(times, reverse=True)
    assert "Total proportion:" in result.stdout


def test_benchmark_reports_csv_and_json(tmp_path):
    args = ["-m", DIGITS, "-b", "1", "-niter", "4", "-nireq", "2", "-report_folder", tmp_path]
    result = run(
        cli.benchmark, *args, "-report_type", "average_counters", "-dump_config", tmp_path / "c.json"
    )
    assert result.exit_code == 0, result.stderr
    report = (tmp_path / "benchmark_report.csv").read_text()
    assert report.startswith("Command line parameters\n-m;")
    assert "\nConfiguration setup\n" in report and "\nExecution results\n" in report
    assert "total number of iterations;4" in report
    counters = (tmp_path / "benchmark_average_counters_report.csv").read_text().splitlines()
    assert counters[0] == "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)"
    total = next(line for line in counters if line.startswith("Total;")).split(";")
    rows = [line.split(";") for line in counters[1:] if line and not line.startswith("Total")]
    assert float(total[4]) == pytest.approx(sum(float(r[4]) for r in rows), abs=0.01)
    config = json.loads((tmp_path / "c.json").read_text())
    assert config["CPU"]["INFERENCE_NUM_THREADS"] >= 1

    again = run(
        cli.benchmark,
        *args,
        "-report_type",
        "detailed_counters",
        "-json_stats",
        "-load_config",
        tmp_path / "c.json",
    )
    assert again.exit_code == 0, again.stderr
    doc = json.loads((tmp_path / "benchmark_report.json").read_text())
    # values as benchmark_app writes them: text
    assert doc["execution_results"]["total number of iterations"] == "4"
    threads = str(config["CPU"]["INFERENCE_NUM_THREADS"])
    assert doc["configuration_setup"]["CPU: INFERENCE_NUM_THREADS"] == threads
    detailed = json.loads((tmp_path / "benchmark_detailed_counters_report.json").read_text())
    assert detailed["report_type"] == "detailed" and len(detailed["detailed_performance"]) == 2


def test_benchmark_inputs_from_files(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 32, 32), np.float32))
    for inputs in (["-i", SAMPLES], ["-i", f"image:{SAMPLES / 'digit_2.jpg'}"], ["-i", tmp_path / "x.npy"]):
        result = run(
            cli.benchmark, "-m", DIGITS, "-niter", "3", "-api", "sync", "-data_shape", "[2,1,32,32]", *inputs
        )
        assert result.exit_code == 0, (inputs, result.stderr)
        assert "Model batch size: 2" in result.stdout


BENCHMARK_ERRORS = [
    (["-shape", "[2,3,32,32]"], 2, "fixed at 1"),
    (["-data_shape", "[1,32,32]"], 2, "rank 3"),
    (["-data_shape", "other[1,1,32,32]"], 2, "unknown input 'other'"),
    (["-shape", "1,1,32,32"], 2, "bad -shape"),
    (["-i", "nowhere.png"], 2, "no such file"),
    (["-api", "later"], 2, "-api"),
    (["-niter", "-1"], 2, "-niter"),
    (["-pcsort", "random"], 2, "-pcsort"),
    (["-report_type", "all"], 2, "-report_type"),
    (["-d", "HETERO:"], 2, "empty"),
    (["-data_shape", "[1,1,32,32][2,1,32,32]"], 2, "more than one shape ([1,1,32,32] and [2,1,32,32])"),
    (["-data_shape", "image[1,1,32,32],image[2,1,32,32]"], 2, "several shapes per input are not supported"),
    (["-shape", "[1,,1,32,32]"], 2, "dimension 1 is empty"),
    (["-shape", "[1,1,32,32]", "-data_shape", "[2,1,32,32]"], 2, "but -shape set dimension 0 of it to 1"),
]


@pytest.mark.parametrize(("args", "code", "text"), BENCHMARK_ERRORS, ids=[c[2] for c in BENCHMARK_ERRORS])
def test_benchmark_errors(args, code, text):
    result = run(cli.benchmark, "-m", DIGITS, "-niter", "2", *args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert text in error_line(result)


@needs_openvino
def test_benchmark_split_with_counters():
    result = run(cli.benchmark, "-m", DIGITS, "-b", "1", "-d", SPLIT, "-niter", "8", "-pc")
    assert result.exit_code == 0, result.stderr
    assert "Execution Devices:['CPU', 'OPENVINO']" in result.stdout
    block = result.stdout.split("Performance counts for 0-th infer request")[1]
    infos, total = parse_counters(block.split("[ INFO ] Performance counts")[0])
    assert {i.subgraph for i in infos} == {1, 2} and total == sum(i.real_time_us for i in infos)


# --- benchmark helpers ---------------------------------------------------------------------------------


def test_parse_shapes():
    names = ["a", "b"]
    assert parse_shapes("[1,3,?,-1]", names, "-shape") == {
        "a": [1, 3, None, None],
        "b": [1, 3, None, None],
    }
    assert parse_shapes("a[1,2],b[3]", names, "-shape") == {"a": [1, 2], "b": [3]}
    for bad in ("a[1,x]", "[1,0]", "junk"):
        with pytest.raises(bench.BenchmarkError):
            parse_shapes(bad, names, "-shape")


def test_parse_shapes_refuses_several_shapes_per_input_and_empty_dimensions():
    names = ["a", "b"]
    for several in ("[1,3,8,8][1,3,4,4]", "a[1,2],a[3,4]", "[1,2],b[3,4]"):
        with pytest.raises(bench.BenchmarkError, match=r"more than one shape.*give one"):
            parse_shapes(several, names, "-data_shape")
    for empty in ("[1,,3]", "[1,3,]", "[,1]"):
        with pytest.raises(bench.BenchmarkError, match="is empty"):
            parse_shapes(empty, names, "-shape")
    assert parse_shapes("a[]", names, "-shape") == {"a": []}  # a scalar


def test_data_shape_against_a_dimension_shape_fixed_blames_shape():
    model = hc.Core().read_model(DIGITS)
    with pytest.raises(bench.BenchmarkError) as err:
        bench.data_shapes(model, "[1,1,32,32]", "[2,1,32,32]")
    assert "-shape set dimension 0 of it to 1 (the model's input is [batch,1,32,32])" in str(err.value)
    assert "does not reshape" not in str(err.value) and "? in -shape to leave it to -data_shape" in str(
        err.value
    )
    with pytest.raises(bench.BenchmarkError, match="or leave -b out to leave it to -data_shape"):
        bench.data_shapes(model, None, "[2,1,32,32]", batch=1)
    with pytest.raises(bench.BenchmarkError, match=r"\[batch,1,32,32\] is fixed at 32"):
        bench.data_shapes(model, None, "[2,1,32,16]")


def test_measure_counts_and_stops():
    compiled = hc.Core().compile_model(DIGITS, "CPU")
    feeds = [{"image": np.zeros((1, 1, 32, 32), np.float32)}]
    sync = bench.measure(compiled, feeds, nireq=1, api="sync", niter=7, duration_s=None)
    assert sync.count == 7 and len(sync.latencies_ms) == 7
    threaded = bench.measure(compiled, feeds * 2, nireq=2, api="async", niter=9, duration_s=None)
    assert threaded.count == 9
    assert threaded.throughput_fps == pytest.approx(9 * 1000 / threaded.duration_ms)


def test_average_counters():
    from hetero_cli.runtime.profiling import ProfilingInfo

    runs = [
        [
            ProfilingInfo("a", "Relu", "CPU", "EXECUTED", 10, 10, 1),
            ProfilingInfo("b", "", "X", "EXECUTED", 2, 0, 2),
        ],
        [
            ProfilingInfo("a", "Relu", "CPU", "EXECUTED", 20, 30, 1),
            ProfilingInfo("b", "", "X", "EXECUTED", 4, 0, 2),
        ],
    ]
    avg = bench.average_counters(runs)
    assert [(i.node_name, i.real_time_us, i.cpu_time_us, i.subgraph) for i in avg] == [
        ("a", 15, 20, 1),
        ("b", 3, 0, 2),
    ]


def test_group_runs_the_same_classify():
    result = run(cli.hetero, "classify", DIGITS, SAMPLES / "digit_1.bmp", "CPU")
    assert result.exit_code == 0 and top_rows(result.stdout)[0][0] == 1
    bad = run(cli.hetero, "classify", "missing.onnx", SAMPLES / "digit_1.bmp", "CPU")
    assert bad.exit_code == 2 and "model file not found" in error_line(bad)


def test_affinity_with_one_device_is_a_warning():
    result = run(cli.classify, DIGITS, SAMPLES / "digit_1.bmp", "CPU", "--affinity", "conv1=CPU")
    assert result.exit_code == 0
    assert result.stderr.startswith("[ WARNING ] --affinity only applies to HETERO devices")


@needs_openvino
def test_query_one_device_shows_what_the_device_does_not_support():
    result = run(cli.query, "-m", DIGITS, "-d", "OPENVINO")
    assert result.exit_code == 0, result.stderr
    assert "one device" in result.stdout
    assert re.search(r"sanitize_isnan\s+IsNaN\s+OPENVINO\s+device; unsupported", result.stdout)
