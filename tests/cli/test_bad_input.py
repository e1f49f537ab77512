"""Bad input found by a hunt through every command and the API (2026-11-23): each case gets one message
that says what is wrong and what would fix it, the right exit status, and leaves nothing behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import click
import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as h
from support.helpers import HAS_OPENVINO, chain_model, const, make_model, needs_openvino, vi
from support.robust import external_model, invoke, nothing_left_behind, one_error_line, set_location

import hetero_cli as hc
from hetero_cli import cli
from hetero_cli.app.benchmark.inputs import _npy_fix
from hetero_cli.cli import files
from hetero_cli.cli.commands import classify as classify_command
from hetero_cli.errors import NotClassScoresError
from hetero_cli.ort.failures import failure_reason, model_fault

DIGITS = Path(__file__).resolve().parents[2] / "models" / "digits.onnx"
IMAGE = Path(__file__).resolve().parents[2] / "samples" / "images" / "digit_3.png"


def _bad_attribute_model() -> onnx.ModelProto:
    """Relu with an attribute Relu does not have: onnx builds it, ORT refuses the graph."""
    node = h.make_node("Relu", ["x"], ["y"], name="r", foo=3)
    return make_model([node], [vi("x", [2])], [vi("y", [2])])


# --- reading and saving models ---------------------------------------------------------------------------


@pytest.mark.parametrize("source", [None, 5, ["model.onnx"], {"path": "model.onnx"}])
def test_read_model_names_what_it_takes(source):
    with pytest.raises(hc.ModelError, match=r"give a file path, the model.s bytes or an onnx\.ModelProto"):
        hc.Core().read_model(source)
    with pytest.raises(hc.ModelError):
        hc.Core().compile_model(source, "CPU")


def test_read_model_takes_a_memoryview():
    data = DIGITS.read_bytes()
    assert hc.Core().read_model(memoryview(data)).name == hc.Core().read_model(data).name


@pytest.mark.parametrize(("ir_version", "opset", "words"), [(99, 17, "IR version 99"), (10, 99, "opset 99")])
def test_a_model_this_onnx_runtime_cannot_load_is_refused_when_read(tmp_path, ir_version, opset, words):
    proto = chain_model(("Relu",))
    proto.ir_version = ir_version
    proto.opset_import[0].version = opset
    path = tmp_path / "new.onnx"
    onnx.save(proto, str(path))
    with pytest.raises(hc.ModelError) as err:
        hc.Core().read_model(path)
    assert words in str(err.value) and "ONNX Runtime" in str(err.value)
    with nothing_left_behind(tmp_path):
        result = invoke(cli.query, "-m", path, "-d", "CPU")
    assert result.exit_code == 2
    assert words in one_error_line(result)


@pytest.mark.parametrize("device", ["HETERO:CPU", "CPU", "HETERO:OPENVINO,CPU"])
def test_an_invalid_graph_is_blamed_on_the_model_not_the_device(device):
    if "OPENVINO" in device and not HAS_OPENVINO:
        pytest.skip("needs the OpenVINO execution provider")
    with pytest.raises(hc.ModelError) as err:
        hc.Core().compile_model(_bad_attribute_model(), device)
    text = str(err.value)
    assert "Unrecognized attribute: foo" in text
    assert "the model itself is at fault" in text and "another device" not in text


@needs_openvino
def test_an_invalid_node_after_an_op_no_device_has_is_blamed_on_the_model():
    """The nodes no device takes are each probed alone on the CPU EP: the broken Relu is found although an
    op no EP knows comes first."""
    nodes = [
        h.make_node("Frobnicate", ["x"], ["f"], name="custom", domain="com.example"),
        h.make_node("Relu", ["f"], ["y"], name="r", foo=3),
    ]
    proto = make_model(nodes, [vi("x", [2])], [vi("y", [2])])
    proto.opset_import.append(h.make_opsetid("com.example", 1))
    proto.graph.value_info.append(vi("f", [2]))  # the custom op's output type, which nothing can infer
    with pytest.raises(hc.ModelError, match=r"Unrecognized attribute: foo.*the model itself is at fault"):
        hc.Core().compile_model(proto, "HETERO:OPENVINO,CPU")


@needs_openvino
def test_a_query_that_probes_an_invalid_graph_blames_the_model(tmp_path):
    """(A query over the CPU alone places every node without creating a session, so it cannot tell.)"""
    path = tmp_path / "bad.onnx"
    onnx.save(_bad_attribute_model(), str(path))
    result = invoke(cli.query, "-m", path, "-d", "HETERO:OPENVINO,CPU")
    assert result.exit_code != 0
    line = one_error_line(result)
    assert "Unrecognized attribute: foo" in line and "no device" not in line


def test_save_keeps_a_file_named_like_a_temporary_one_and_writes_through_links(tmp_path):
    model = hc.Core().read_model(DIGITS)
    precious = tmp_path / "out.onnx.tmp"
    precious.write_text("precious")
    model.save(tmp_path / "out.onnx")
    assert precious.read_text() == "precious"
    real = tmp_path / "real.onnx"
    real.write_text("old")
    (tmp_path / "link.onnx").symlink_to(real)
    model.save(tmp_path / "link.onnx")
    assert (tmp_path / "link.onnx").is_symlink()
    assert onnx.load(str(real)).graph.name == model.proto.graph.name
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "link.onnx",
        "out.onnx",
        "out.onnx.tmp",
        "real.onnx",
    ]


@pytest.mark.parametrize(("target", "words"), [("/dev/null", "not a regular file"), ("", "empty")])
def test_save_refuses_what_is_not_a_file_to_write(target, words):
    with pytest.raises(hc.ModelError, match=words):
        hc.Core().read_model(DIGITS).save(target)


def test_save_onto_a_folder_says_so(tmp_path):
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError, match="is a directory"):
        hc.Core().read_model(DIGITS).save(tmp_path)


def test_external_data_whose_location_is_a_folder(tmp_path):
    path = external_model(tmp_path / "m")
    (tmp_path / "m" / "adir").mkdir()
    set_location(path, "w", "adir")
    with pytest.raises(hc.ModelError, match="which is a folder"):
        hc.Core().read_model(path)


# --- ONNX Runtime's errors in one line ---------------------------------------------------------------------

OPENVINO_FAILURE = (
    "[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: /onnxruntime/onnxruntime/core/providers/"
    "openvino/backends/basic_backend.cc:136 onnxruntime::openvino_ep::BasicBackend::BasicBackend(std::unique_ptr"
    "<onnx::ModelProto>&, onnxruntime::openvino_ep::SessionContext&) /onnxruntime/onnxruntime/core/providers/"
    "openvino/ov_interface.cc:28 auto onnxruntime::openvino_ep::OvExceptionBoundary(Func&&, Args&& ...) [with "
    "bool typed = false; Func = OVCore::CompileModel(std::string&)::<lambda()>; Args = {const std::string&}] "
    "[OpenVINO-EP] Exception while Loading Network for graph g: Exception from src/inference/src/cpp/core.cpp:"
    "114:\nCheck '!shape.rank().is_dynamic()' failed at src/plugins/intel_cpu/src/node.cpp:106:\nUnexpected: "
    "CPU plug-in doesn't support If operation with dynamic rank. Operation name: If_0\n\n\n"
)


def test_failure_reason_keeps_the_cause_and_drops_the_cpp():
    reason = failure_reason(RuntimeError(OPENVINO_FAILURE))
    assert reason.endswith("CPU plug-in doesn't support If operation with dynamic rank. Operation name: If_0")
    assert reason.startswith("[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: [OpenVINO-EP]")
    for noise in ("::", ".cc:", ".cpp:", "[with", "\n"):
        assert noise not in reason
    assert not model_fault(RuntimeError(OPENVINO_FAILURE))


def test_failure_reason_keeps_every_line_of_a_short_message():
    message = "Got invalid dimensions for input: x for the following indices\n index: 0 Got: 1 Expected: 0\n"
    assert failure_reason(RuntimeError(message)).endswith("index: 0 Got: 1 Expected: 0")
    assert len(failure_reason(RuntimeError("x" * 1000))) <= 400


# --- devices and configuration ----------------------------------------------------------------------------


@needs_openvino
@pytest.mark.parametrize("call", ["compile_model", "query_model"])
def test_a_provider_option_onnx_runtime_drops_the_device_over_is_an_error(call, tmp_path):
    """ORT drops the OpenVINO EP with only a log line over an option it refuses: the split would quietly
    put every node on CPU."""
    config = {"DEVICE_PROPERTIES": {"OPENVINO": {"enable_qdq_optimizer": "maybe"}}}
    with nothing_left_behind(tmp_path), pytest.raises(hc.ConfigError) as err:
        getattr(hc.Core(), call)(DIGITS, "HETERO:OPENVINO,CPU", config)
    assert "enable_qdq_optimizer" in str(err.value) and "check the config for OPENVINO" in str(err.value)


@needs_openvino
def test_a_precision_the_openvino_ep_refuses_on_cpu_is_named_when_configured():
    config = {"DEVICE_PROPERTIES": {"OPENVINO": {"precision": "FOO"}}}
    with pytest.raises(
        hc.ConfigError, match=r"OPENVINO cannot compute in FOO: .* takes precision FP32 or ACCURACY"
    ):
        hc.Core().compile_model(DIGITS, "HETERO:OPENVINO,CPU", config)


def test_a_hand_set_affinity_outside_the_priority_list_is_named_alone():
    result = invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--affinity", "conv1=OPENVINO")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "conv1=OPENVINO" in line and "automatic mode is off" not in line


def test_no_dot_files_from_a_failed_compile(tmp_path):
    folder = tmp_path / "dots"
    config = {"HETERO_DUMP_GRAPH_DOT": True, "HETERO_DOT_DIR": str(folder)}
    with nothing_left_behind(tmp_path), pytest.raises(hc.ModelError):
        hc.Core().compile_model(_bad_attribute_model(), "HETERO:CPU", config)
    assert not folder.exists()
    compiled = hc.Core().compile_model(chain_model(), "HETERO:CPU", config)
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in compiled.dot_files)


# --- command-line paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "option"),
    [
        (cli.query, ["-m", DIGITS, "-d", "CPU", "--save", ""], "--save"),
        (cli.query, ["-m", DIGITS, "-d", "CPU", "--dot-dir", " "], "--dot-dir"),
        (cli.benchmark, ["-m", DIGITS, "-d", "CPU", "-niter", 1, "-dump_config", ""], "-dump_config"),
        (cli.benchmark, ["-m", DIGITS, "-d", "CPU", "-niter", 1, "-report_folder", ""], "-report_folder"),
        (cli.classify, [DIGITS, IMAGE, "CPU", "-load_config", ""], "-load_config"),
        (cli.benchmark, ["-m", "", "-d", "CPU", "-niter", 1], "-m"),
        (cli.query, ["-m", " ", "-d", "CPU"], "-m"),
        (cli.classify, ["", IMAGE, "CPU"], "MODEL"),
    ],
)
def test_an_empty_path_is_a_usage_error(tmp_path, command, args, option):
    with nothing_left_behind(tmp_path):
        result = invoke(command, *args)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert option in line and "empty" in line


def test_benchmark_checks_its_output_paths_before_it_runs(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for option, value, words in [
        ("-report_folder", a_file, "is a file"),
        ("-dump_config", tmp_path, "is a folder"),
        ("-dump_config", a_file / "inside.json", "is a file"),
    ]:
        with nothing_left_behind(tmp_path):
            result = invoke(cli.benchmark, "-m", DIGITS, "-d", "CPU", "-niter", 1, option, value)
        assert result.exit_code == 2, result.stderr
        assert words in one_error_line(result)
        assert "Step 2/11" not in result.stdout


def test_every_output_path_is_checked_before_any_work(tmp_path):
    """--dot-dir, HETERO_DOT_DIR, --save and -report_folder under a regular file (unwritable even for root):
    refused before the model is read, nothing written."""
    under_a_file = tmp_path / "afile" / "sub"
    (tmp_path / "afile").write_text("x")
    for command, args, option in [
        (cli.query, ["-d", "HETERO:CPU", "--dot-dir", under_a_file], "--dot-dir"),
        (cli.classify, ["-i", IMAGE, "-d", "HETERO:CPU", "--dot-dir", under_a_file], "--dot-dir"),
        (cli.query, ["-d", "HETERO:CPU", "--config", "HETERO_DUMP_GRAPH_DOT=YES",
                     "--config", f"HETERO_DOT_DIR={under_a_file}"], "HETERO_DOT_DIR"),
        (cli.query, ["-d", "HETERO:CPU", "--save", under_a_file / "m.onnx"], "--save"),
        (cli.benchmark, ["-d", "CPU", "-niter", 1, "-report_folder", under_a_file], "-report_folder"),
    ]:  # fmt: skip
        with nothing_left_behind(tmp_path):
            result = invoke(command, "-m", DIGITS, *args)
        assert result.exit_code == 2, result.stderr
        line = one_error_line(result)
        assert option in line and "afile is a file" in line
        assert "Reading the model" not in result.stdout and "Step 4/11" not in result.stdout


def _refused(folder: Path) -> None:
    """files._probe where the folder refuses new files (a user without write permission there)."""
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))


def test_an_unwritable_current_directory_is_refused_up_front_where_outputs_go_there(tmp_path, monkeypatch):
    """The default report folder and the .dot files OPENVINO_HETERO_VISUALIZE asks for go here: checked
    before any work (the probe file cannot be created, as for a user without write permission)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(files, "_probe", _refused)
    result = invoke(cli.benchmark, "-m", DIGITS, "-niter", 2, "-report_type", "no_counters")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "reports go into the current directory" in line and "-report_folder DIR" in line
    assert "Step 4/11" not in result.stdout
    monkeypatch.setenv("OPENVINO_HETERO_VISUALIZE", "1")
    result = invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "OPENVINO_HETERO_VISUALIZE" in line and "--dot-dir DIR" in line
    assert "Reading the model" not in result.stdout


SYSTEM_REASONS = ("no such file or directory", "permission denied", "read-only file system")
BENCH = ["-niter", 1]
QUERY = ["-d", "HETERO:CPU"]


@pytest.mark.parametrize(
    ("command", "args", "option", "path", "folder"),
    [
        (cli.benchmark, BENCH, "-report_folder", "/proc/hetero_reports", "/proc/hetero_reports"),
        (cli.benchmark, BENCH, "-report_folder", "/proc", "/proc"),
        (cli.benchmark, BENCH, "-dump_config", "/proc/hetero_config.json", "/proc"),
        (cli.query, QUERY, "--save", "/proc/hetero_reports/m.onnx", "/proc/hetero_reports"),
        (cli.query, QUERY, "--dot-dir", "/proc/hetero_dots", "/proc/hetero_dots"),
    ],
)
def test_an_output_under_proc_is_refused_before_any_work(tmp_path, command, args, option, path, folder):
    """/proc takes no new file or folder, even from root, whom every permission bit lets through: the write
    check tries it (a probe file, in ``folder`` or creating it), so the run stops at once with why."""
    with nothing_left_behind(tmp_path):
        result = invoke(command, "-m", DIGITS, *args, option, path)
    assert result.exit_code == 2, result.stderr
    line = one_error_line(result)
    what = "write into" if Path(folder).exists() else "create the folder"
    assert option in line and f"cannot {what} {folder}: " in line, line
    assert any(reason in line for reason in SYSTEM_REASONS), line
    assert "this user can write to" in line
    assert "Step 2/11" not in result.stdout and "Reading the model" not in result.stdout
    assert not [name for name in os.listdir("/proc") if name.startswith(("hetero", ".hetero"))]


def test_a_report_folder_under_a_file_is_refused_before_any_work(tmp_path):
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    with nothing_left_behind(tmp_path):
        result = invoke(cli.benchmark, "-m", DIGITS, "-niter", 1, "-report_folder", a_file / "reports")
    assert result.exit_code == 2, result.stderr
    line = one_error_line(result)
    assert "-report_folder" in line
    assert f"{a_file} is a file, so {a_file / 'reports'} cannot be written" in line
    assert "Step 2/11" not in result.stdout
    assert a_file.read_text() == "x"


def test_the_write_check_leaves_nothing_behind(tmp_path):
    """The check creates the missing folders and a probe file as the command would, and removes them again,
    whether the folder turns out writable or not; an existing file is opened, never changed."""
    deeper = tmp_path / "new" / "deeper"
    with nothing_left_behind(tmp_path):
        files.check_writable(str(deeper), "-report_folder", folder=True)
        files.check_writable(str(deeper / "m.onnx"), "--save", folder=False)
    assert sorted(tmp_path.iterdir()) == []
    kept = tmp_path / "kept.json"
    kept.write_text("{}")
    os.utime(kept, (1_000_000, 1_000_000))
    files.check_writable(str(kept), "-dump_config", folder=False)
    assert kept.read_text() == "{}" and kept.stat().st_mtime == 1_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]


def test_a_refused_probe_is_reported_and_the_folders_made_for_it_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_probe", _refused)
    deeper = tmp_path / "new" / "deeper"
    for path, folder, named in [(deeper, True, "-report_folder"), (deeper / "m.onnx", False, "--save")]:
        with pytest.raises(click.BadParameter) as err:
            files.check_writable(str(path), named, folder=folder)
        message = err.value.format_message()
        assert f"cannot write into {deeper}: permission denied; give a " in message, message
        assert named in message
        assert sorted(tmp_path.iterdir()) == []


def test_save_creates_missing_folders(tmp_path):
    out = tmp_path / "new" / "deeper" / "m.onnx"
    result = invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--save", out)
    assert result.exit_code == 0, result.stderr
    assert len(hc.Core().read_model(out).affinities()) == len(hc.Core().read_model(DIGITS).get_ops())


def test_benchmark_refuses_random_strings_before_it_writes_anything(tmp_path):
    node = h.make_node("Identity", ["s"], ["t"], name="id")
    path = tmp_path / "strings.onnx"
    onnx.save(
        make_model([node], [vi("s", [1], TensorProto.STRING)], [vi("t", [1], TensorProto.STRING)]), path
    )
    with nothing_left_behind(tmp_path):
        result = invoke(
            cli.benchmark, "-m", path, "-d", "HETERO:CPU", "-niter", 2, "--dot-dir", tmp_path / "dots",
            "-dump_config", tmp_path / "c" / "config.json",
        )  # fmt: skip
    assert result.exit_code == 2
    assert "cannot make random data of strings for input 's'" in one_error_line(result)
    assert "Step 7/11" not in result.stdout


def test_a_later_usage_error_removes_what_the_command_wrote(tmp_path):
    """Data that does not fit shows at Step 9, after the .dot files were written: they go again, and the
    folders made for them."""
    data = tmp_path / "bad.npy"
    np.save(data, np.zeros((3, 3), np.float32))
    with nothing_left_behind(tmp_path):
        result = invoke(
            cli.benchmark, "-m", DIGITS, "-d", "HETERO:CPU", "-niter", 2, "-i", data,
            "--dot-dir", tmp_path / "dots" / "here",
        )  # fmt: skip
    assert result.exit_code == 2
    assert "does not fit input 'image'" in one_error_line(result)
    assert "[3,3] does not fit input 'image' [1,1,32,32]: give data of rank 4" in one_error_line(result)
    assert "Wrote" in result.stdout  # they were written, then removed


def test_a_failing_command_keeps_the_files_that_were_there_before_it(tmp_path):
    """The files a failed run overwrote are the user's (a -dump_config onto the -load_config file, the .dot
    files of an earlier run): only what the run created goes again."""
    config = tmp_path / "config.json"
    config.write_text('{"CPU": {"INFERENCE_NUM_THREADS": 1}}')
    dots = tmp_path / "dots"
    assert invoke(cli.query, "-m", DIGITS, "-d", "HETERO:CPU", "--dot-dir", dots).exit_code == 0
    earlier = sorted(dots.iterdir())
    data = tmp_path / "bad.npy"
    np.save(data, np.zeros((3, 3), np.float32))
    result = invoke(
        cli.benchmark, "-m", DIGITS, "-d", "HETERO:CPU", "-niter", 2, "-i", data, "--dot-dir", dots,
        "-load_config", config, "-dump_config", config,
    )  # fmt: skip
    assert result.exit_code == 2
    assert config.is_file() and sorted(dots.iterdir()) == earlier and earlier


def test_class_scores_names_a_ragged_sequence():
    declared = hc.Core().read_model(DIGITS).outputs[0]
    ragged = [np.zeros(2, np.float32), np.zeros(3, np.float32)]
    with pytest.raises(NotClassScoresError, match="holds a ragged sequence, not numeric class scores"):
        classify_command.class_scores(Path("m.onnx"), declared, ragged)


def test_an_npy_file_of_the_wrong_shape_gets_the_fix_that_fits():
    """-data_shape only where the model leaves the differing dimensions dynamic; said plainly otherwise."""
    assert _npy_fix("x", (4, 3), ("batch", 3)) == "give -data_shape x[4,3]"
    assert _npy_fix("x", (4, 5), ("batch", 3)) == "the model fixes dimension 1 at 3: give data of its shape"
    assert _npy_fix("x", (12,), ("batch", 3)) == "give data of rank 2 ([batch,3])"


def test_dot_dir_onto_a_file(tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    result = invoke(cli.query, "-m", DIGITS, "-d", "CPU", "--dot-dir", a_file)
    assert result.exit_code != 0
    assert "it is a file, not a folder" in one_error_line(result)


def test_classify_with_an_empty_device_is_refused():
    result = invoke(cli.classify, DIGITS, IMAGE, "")
    assert result.exit_code == 2
    assert "it is empty" in one_error_line(result)


def _out_empty() -> onnx.ModelProto:
    """x[1,1,8,8] -> Slice(0:0) -> y: an output with no values."""
    starts, ends = const("s", [0], np.int64), const("e", [0], np.int64)
    node = h.make_node("Slice", ["x", "s", "e"], ["y"], name="sl")
    return make_model([node], [vi("x", [1, 1, 8, 8])], [vi("y", None)], [starts, ends])


def _out_strings() -> onnx.ModelProto:
    """x[1,1,8,8] -> Flatten -> ArgMax -> Gather over string labels -> y: a label, not scores."""
    labels = numpy_helper.from_array(np.array([f"l{k}" for k in range(64)], dtype=object), "labels")
    nodes = [
        h.make_node("Flatten", ["x"], ["f"], name="fl"),
        h.make_node("ArgMax", ["f"], ["a"], axis=1, keepdims=0, name="am"),
        h.make_node("Gather", ["labels", "a"], ["y"], name="g"),
    ]
    return make_model(nodes, [vi("x", [1, 1, 8, 8])], [vi("y", [1], TensorProto.STRING)], [labels])


@pytest.mark.parametrize(
    ("proto", "words"), [(_out_empty, "holds no values"), (_out_strings, "holds strings")]
)
def test_classify_a_model_whose_output_is_no_class_scores(tmp_path, proto, words):
    path = tmp_path / "m.onnx"
    onnx.save(proto(), path)
    with nothing_left_behind(tmp_path):
        result = invoke(cli.classify, path, IMAGE, "HETERO:CPU", "--dot-dir", tmp_path / "dots")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert words in line and "not numeric class scores" in line


# --- inputs ----------------------------------------------------------------------------------------------


def test_a_string_input_fed_numbers_says_strings():
    node = h.make_node("Identity", ["s"], ["t"], name="id")
    proto = make_model([node], [vi("s", [2], TensorProto.STRING)], [vi("t", [2], TensorProto.STRING)])
    request = hc.Core().compile_model(proto, "CPU").create_infer_request()
    with pytest.raises(hc.InferenceError, match="takes strings"):
        request.infer({"s": np.zeros(2, np.float32)})
    assert list(request.infer({"s": np.array(["a", "b"], dtype=object)})["t"]) == ["a", "b"]


def test_a_fixed_zero_dimension_is_checked_like_any_other():
    proto = make_model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [0, 3])], [vi("y", [0, 3])])
    request = hc.Core().compile_model(proto, "CPU").create_infer_request()
    with pytest.raises(hc.InferenceError, match=r"has shape \[1,3\] but the model takes \[0,3\]"):
        request.infer({"x": np.zeros((1, 3), np.float32)})
    assert request.infer({"x": np.zeros((0, 3), np.float32)})["y"].shape == (0, 3)


def test_save_gives_a_new_file_the_umasks_permissions_and_leaves_the_umask(tmp_path):
    before = os.umask(0o022)
    os.umask(before)
    hc.Core().read_model(DIGITS).save(tmp_path / "m.onnx")
    after = os.umask(0o022)
    os.umask(after)
    assert before == after
    assert (tmp_path / "m.onnx").stat().st_mode & 0o777 == 0o666 & ~before


def test_async_infer_queue_takes_only_a_compiled_model_of_hetero_clis():
    """Not the class, nor another library's compiled model that has a create_infer_request method."""

    class OtherCompiledModel:
        def create_infer_request(self):
            return object()

    for wrong in (hc.CompiledModel, OtherCompiledModel()):
        with pytest.raises(hc.InferenceError, match="takes a compiled model"):
            hc.AsyncInferQueue(wrong, 1)


def test_async_api_misuse_is_an_inference_error():
    compiled = hc.Core().compile_model(DIGITS, "CPU")
    with pytest.raises(hc.InferenceError, match="takes a compiled model"):
        hc.AsyncInferQueue("model.onnx", 2)
    with pytest.raises(hc.InferenceError, match="whole number"):
        hc.AsyncInferQueue(compiled, True)
    with pytest.raises(hc.InferenceError, match="milliseconds"):
        compiled.create_infer_request().wait_for("soon")


def test_wait_for_takes_numpy_numbers_and_refuses_nan():
    compiled = hc.Core().compile_model(DIGITS, "CPU")
    request = compiled.create_infer_request()
    (image,) = compiled.inputs
    request.infer({image.name: np.zeros([d if isinstance(d, int) else 1 for d in image.shape], image.dtype)})
    assert (  # a result is ready: no wait
        request.wait_for(np.int64(5)) and request.wait_for(np.float32(3)) and request.wait_for(float("inf"))
    )
    with pytest.raises(hc.InferenceError, match="milliseconds"):
        request.wait_for(float("nan"))


def test_failure_reason_keeps_openvinos_validation_text_and_bounds_a_huge_message():
    message = (
        "Exception from src/core/src/node.cpp:142: Check 'axis <= axis_range_max' failed at "
        "src/core/src/op/softmax.cpp:386: While validating node 'opset1::Softmax Softmax_1 (Parameter_1[0]:"
        "f32[1,2]) -> (f32[1,2])' with friendly_name 'Softmax_1': Axis 5 out of the tensor rank range"
    )
    reason = failure_reason(RuntimeError(message))
    assert "While validating node 'opset1::Softmax Softmax_1 (Parameter_1[0]" in reason
    assert "Axis 5 out of the tensor rank range" in reason and ".cpp" not in reason
    lambda_message = "x.cc:3 a::Locale::Locale(const std::string&)::<lambda()> Failed to construct locale"
    assert failure_reason(RuntimeError(lambda_message)) == "Failed to construct locale"
    assert len(failure_reason(RuntimeError("a::b(" * 50_000))) <= 400


@needs_openvino
def test_openvinos_load_config_takes_a_mapping_as_json():
    config = {"DEVICE_PROPERTIES": {"OPENVINO": {"load_config": {"CPU": {"NUM_STREAMS": "1"}}}}}
    compiled = hc.Core().compile_model(DIGITS, "HETERO:OPENVINO,CPU", config)
    assert "OPENVINO" in compiled.execution_devices


# --- values ONNX Runtime's Python API cannot convert, and values for overridable initializers ------------


def _cast_model(in_type: int, out_type: int) -> onnx.ModelProto:
    node = h.make_node("Cast", ["x"], ["y"], name="cast", to=out_type)
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info("x", in_type, [2])],
        [h.make_tensor_value_info("y", out_type, [2])],
    )
    return h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 21)])


def test_a_bfloat16_input_or_output_is_an_inference_error_not_a_runtime_error():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    request = hc.Core().compile_model(_cast_model(TensorProto.BFLOAT16, TensorProto.FLOAT), "HETERO:CPU")
    request = request.create_infer_request()
    for value in (np.ones(2, np.float32), np.ones(2, ml_dtypes.bfloat16)):
        with pytest.raises(
            hc.InferenceError, match=r"input 'x' is bfloat16, which ONNX Runtime's Python API"
        ):
            request.infer({"x": value})
    compiled = hc.Core().compile_model(_cast_model(TensorProto.FLOAT, TensorProto.BFLOAT16), "HETERO:CPU")
    with pytest.raises(hc.InferenceError, match=r"output 'y' \(tensor\(bfloat16\)\) cannot be handed over"):
        compiled.create_infer_request().infer({"x": np.ones(2, np.float32)})


@pytest.mark.parametrize(
    ("value", "words"),
    [("abc", "has dtype <U3 but the model takes float32"), (np.ones(3), "has dtype float64")],
    ids=["string", "float64"],
)
def test_a_value_for_an_overridable_initializer_is_checked_like_an_input(value, words):
    b = onnx.numpy_helper.from_array(np.array([1, 2, 3], np.float32), "B")
    graph = h.make_graph(
        [h.make_node("Add", ["x", "B"], ["y"], name="add")],
        "g",
        [vi("x", [3]), vi("B", [3])],
        [vi("y", [3])],
        [b],
    )
    proto = h.make_model(graph, ir_version=9, opset_imports=[h.make_opsetid("", 17)])
    request = hc.Core().compile_model(proto, "HETERO:CPU").create_infer_request()
    with pytest.raises(hc.InferenceError, match=f"input 'B' {words}"):
        request.infer({"x": np.zeros(3, np.float32), "B": value})


# --- affinity messages ------------------------------------------------------------------------------------


def _after_unknown_op() -> onnx.ModelProto:
    """x -> Relu -> com.example.Foo -> Sigmoid: nothing declares Foo's output type."""
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu"),
        h.make_node("Foo", ["a"], ["b"], name="foo", domain="com.example"),
        h.make_node("Sigmoid", ["b"], ["y"], name="sig"),
    ]
    proto = make_model(nodes, [vi("x", [2])], [vi("y", [2])])
    proto.opset_import.append(h.make_opsetid("com.example", 1))
    return proto


@needs_openvino
def test_a_node_after_an_op_no_device_knows_is_named_with_the_untyped_tensor(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_after_unknown_op(), str(path))
    with pytest.raises(
        hc.UnsupportedNodesError, match=r"sig reads 'b', whose type nothing declares or infers"
    ):
        hc.Core().compile_model(path, "HETERO:OPENVINO")
    line = one_error_line(invoke(cli.query, "-m", path, "-d", "HETERO:OPENVINO,CPU", "--affinity", "foo=CPU"))
    assert "sig (Sigmoid); pin them with --affinity NODE=DEVICE" in line  # CPU is listed already
    assert "add CPU" not in line and "declare it in the model's value_info" in line


def test_affinities_in_the_model_plus_an_option_say_every_node_needs_one(tmp_path):
    proto = chain_model(("Relu", "Neg", "Abs"))
    model = hc.Core().read_model(proto)
    first = model.get_ops()[0].get_friendly_name()
    model.get_ops()[0].get_rt_info()["affinity"] = "CPU"
    model.save(tmp_path / "partial.onnx")
    last = model.get_ops()[-1].get_friendly_name()
    result = invoke(
        cli.query, "-m", tmp_path / "partial.onnx", "-d", "HETERO:CPU", "--affinity", f"{last}=CPU"
    )
    line = one_error_line(result)
    assert "the model sets affinities for some nodes, so automatic mode is off" in line, line
    assert "no device" not in line and first not in line


def test_an_affinity_option_over_the_models_own_still_says_every_node_needs_one(tmp_path):
    """--affinity replacing every affinity the model had: the nodes without one still get the hand-set
    message, not 'no device supports' (no query ran)."""
    model = hc.Core().read_model(chain_model(("Relu", "Neg", "Abs")))
    first = model.get_ops()[0].get_friendly_name()
    model.get_ops()[0].get_rt_info()["affinity"] = "CPU"
    model.save(tmp_path / "p.onnx")
    line = one_error_line(
        invoke(cli.query, "-m", tmp_path / "p.onnx", "-d", "HETERO:CPU", "--affinity", f"{first}=CPU")
    )
    assert "the model sets affinities for some nodes" in line and "no device" not in line


@needs_openvino
def test_sequences_are_not_called_untyped():
    """A node no device takes that reads a sequence: nothing about undeclared types."""
    nodes = [
        h.make_node("SequenceConstruct", ["x", "x"], ["seq"], name="construct"),
        h.make_node("SequenceAt", ["seq", "i"], ["y"], name="at"),
    ]
    index = h.make_tensor("i", TensorProto.INT64, [], [0])
    proto = make_model(nodes, [vi("x", [2])], [vi("y", [2])])
    proto.graph.initializer.append(index)
    with pytest.raises(hc.HeteroError) as err:
        hc.Core().compile_model(proto, "HETERO:OPENVINO")
    assert "whose type nothing declares" not in str(err.value)


def test_a_bfloat16_constant_output_is_a_compile_error():
    nodes = [
        h.make_node(
            "Constant", [], ["c"], name="const", value=h.make_tensor("v", TensorProto.FLOAT, [2], [1, 2])
        ),
        h.make_node("Cast", ["c"], ["bf"], name="cast", to=TensorProto.BFLOAT16),
        h.make_node("Relu", ["x"], ["y"], name="relu"),
    ]
    outputs = [
        h.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
        h.make_tensor_value_info("bf", TensorProto.BFLOAT16, [2]),
    ]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [2])], outputs)
    proto = h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 21)])
    with pytest.raises(
        hc.CompileError, match=r"constant output\(s\) 'bf' cannot be handed over as numpy arrays"
    ):
        hc.Core().compile_model(proto, "HETERO:CPU")


@needs_openvino
def test_a_device_whose_every_probe_fails_is_named_in_a_warning(caplog):
    """When the EP cannot load the model at all (not a matter of ops), its nodes go to the next device with
    a warning naming the device and ORT's reason, not in silence."""
    from hetero_cli.ort.session import PROBE, observe_sessions

    def failing(request):
        if request.purpose == PROBE and request.subject == "OPENVINO":
            raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : cannot read the weights")

    with observe_sessions(failing), caplog.at_level("WARNING", logger="hetero_cli"):
        compiled = hc.Core().compile_model(chain_model(("Relu", "Neg")), "HETERO:OPENVINO,CPU")
    assert compiled.execution_devices == ["CPU"]
    assert "OPENVINO took no node: every probe of it failed, the whole model's with: " in caplog.text
    assert "cannot read the weights" in caplog.text


def test_a_constant_output_whose_computation_fails_is_a_compile_error():
    nodes = [
        h.make_node(
            "Constant", [], ["c"], name="const", value=h.make_tensor("v", TensorProto.FLOAT, [3], [1, 2, 3])
        ),
        h.make_node(
            "Constant", [], ["s"], name="shape", value=h.make_tensor("w", TensorProto.INT64, [2], [2, 2])
        ),
        h.make_node("Reshape", ["c", "s"], ["bad"], name="reshape"),
        h.make_node("Relu", ["x"], ["y"], name="relu"),
    ]
    proto = make_model(nodes, [vi("x", [2])], [vi("y", [2]), vi("bad", None)])
    with pytest.raises(hc.HeteroError, match=r"constant output\(s\) 'bad'"):
        hc.Core().compile_model(proto, "HETERO:CPU")


def test_an_int4_initializer_output_read_from_its_file(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = (np.arange(2048) % 7).astype(ml_dtypes.int4).reshape(2, 1024)  # packed two to a byte on disk
    graph = h.make_graph(
        [h.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [vi("x", [2])],
        [vi("y", [2]), h.make_tensor_value_info("Q", TensorProto.INT4, [2, 1024])],
        [onnx.numpy_helper.from_array(values, "Q")],
    )
    onnx.save(
        h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 21)]), str(tmp_path / "q.onnx")
    )
    got = hc.Core().compile_model(tmp_path / "q.onnx", "HETERO:CPU")({"x": np.ones(2, np.float32)})
    np.testing.assert_array_equal(got["Q"].astype(np.int8), values.astype(np.int8))


def test_no_output_replaces_the_model_or_its_weights(tmp_path):
    """-o, --save, --save-inputs/--save-outputs and -dump_config naming the model read, its external data
    file (through a symlink too) or a pipe: one usage error each before any work, the files as they were."""
    model = external_model(tmp_path / "m")
    data = tmp_path / "m" / "m.data"
    (tmp_path / "link.data").symlink_to(data)
    os.link(model, tmp_path / "hard.onnx")  # another name of the model's file
    (tmp_path / "saved.json").write_text("{}")
    os.link(tmp_path / "saved.json", tmp_path / "saved_too.json")  # one file, two names
    device = tmp_path / "pipe"  # no regular file, as /dev/null (which a regression here would replace)
    os.mkfifo(device)
    before = {p: p.read_bytes() for p in (model, data)}
    for command, args, option, words in [
        ("compile", ["-d", "CPU", "-o", data], "-o", "weights of"),
        ("compile", ["-d", "CPU", "-o", model], "-o", "is the model"),
        ("compile", ["-d", "CPU", "-o", device], "-o", "not a regular file"),
        ("query", ["-d", "CPU", "--save", tmp_path / "link.data"], "--save", "weights of"),
        ("validate", ["-d", "CPU", "--save-outputs", model], "--save-outputs", "is the model"),
        ("validate", ["-d", "CPU", "--save-inputs", device], "--save-inputs", "not a regular file"),
        ("benchmark", ["-d", "CPU", "-niter", 1, "-dump_config", data], "-dump_config", "weights of"),
        ("compile", ["-d", "CPU", "-o", tmp_path / "hard.onnx"], "-o", "is the model"),
        (
            "validate",
            ["-d", "CPU", "--save-inputs", tmp_path / "io.json", "--save-outputs", tmp_path / "io.json"],
            "--save-outputs",
            "--save-inputs' file too",
        ),
        (
            "validate",
            [
                "-d",
                "CPU",
                "--save-inputs",
                tmp_path / "saved.json",
                "--save-outputs",
                tmp_path / "saved_too.json",
            ],
            "--save-outputs",
            "--save-inputs' file too",
        ),
    ]:
        with nothing_left_behind(tmp_path):
            result = invoke(cli.hetero, command, "-m", model, *args)
        assert result.exit_code == 2, (option, result.stderr)
        line = one_error_line(result)
        assert option in line and words in line, line
        assert "Wrote" not in result.stdout and "Step 4/11" not in result.stdout
    assert {p: p.read_bytes() for p in (model, data)} == before
    assert (tmp_path / "saved.json").read_text() == "{}"
    assert device.is_fifo()


def test_compile_creates_the_folders_of_its_output(tmp_path):
    out = tmp_path / "new" / "deeper" / "digits.hetero"
    result = invoke(cli.hetero, "compile", "-m", DIGITS, "-d", "CPU", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert hc.Core().read_model(out).inputs[0].name == "image"


@pytest.mark.parametrize("command", ["validate", "tune"])
def test_a_negative_seed_is_a_usage_error(command):
    result = invoke(cli.hetero, command, "-m", DIGITS, "-d", "CPU", "--seed", -1)
    assert result.exit_code == 2
    assert "--seed" in one_error_line(result)


@pytest.mark.parametrize("command", ["benchmark", "validate"])
def test_input_shapes_no_node_can_take_are_a_usage_error_before_the_compile(tmp_path, command):
    """x [N,3] + b [N,3] given N 2 and 3: one line naming the dimension, exit 2, no compile (ORT failed the
    first inference with its broadcast error, exit 1); N agreeing runs."""
    nodes = [h.make_node("Add", ["x", "b"], ["y"], name="add")]
    path = tmp_path / "two.onnx"
    onnx.save(make_model(nodes, [vi("x", ["N", 3]), vi("b", ["N", 3])], [vi("y", ["N", 3])]), path)
    with nothing_left_behind(tmp_path):
        result = invoke(cli.hetero, command, "-m", path, "-d", "CPU", "-data_shape", "x[2,3],b[3,3]")
    assert result.exit_code == 2, result.stderr
    assert "give dimension 'N' the sizes 2 and 3" in one_error_line(result)
    assert "Step 7/11" not in result.stdout and "Compiling" not in result.stdout
    short = ["-niter", 2] if command == "benchmark" else []
    agreeing = invoke(cli.hetero, command, "-m", path, "-d", "CPU", "-data_shape", "x[2,3],b[2,3]", *short)
    assert agreeing.exit_code == 0, agreeing.stderr


def test_a_model_without_nodes_is_queried_and_run_as_its_inputs(tmp_path):
    """A graph that hands its input straight back: no subgraph, and the query says why (it said "0
    subgraph(s) on ;"); a benchmark runs it."""
    graph = h.make_graph([], "bare", [vi("x", [1, 4])], [vi("x", [1, 4])])
    path = tmp_path / "bare.onnx"
    onnx.save(h.make_model(graph, ir_version=10, opset_imports=[h.make_opsetid("", 17)]), path)
    result = invoke(cli.hetero, "query", "-m", path, "-d", "HETERO:CPU")
    assert result.exit_code == 0, result.stderr
    assert "0 subgraph(s) (the model has no nodes to run)" in result.stdout
    assert invoke(cli.hetero, "benchmark", "-m", path, "-d", "HETERO:CPU", "-niter", 2).exit_code == 0
