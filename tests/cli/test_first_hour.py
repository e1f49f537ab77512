"""What a user switching from OpenVINO's tools meets in the first hour (issue 22), as real subprocesses:
--version names ONNX Runtime, its EPs and OpenVINO; `python -m hetero_cli` runs; shell completion works as
documented; --help ends with the environment variables and exit statuses; install hints work from this
repository; hello_classification says which channel order it feeds; query's header says the mode that
applies, and --summary leaves the node rows out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest
from cli.test_cli_subprocess import DIGITS, ROOT, needs_openvino, sh
from support.robust import on_a_terminal

LIGHT = Path(__import__("onnx").__file__).parent / "backend" / "test" / "data" / "light"


def python_m(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "hetero_cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_version_names_onnx_runtime_its_eps_and_openvino():
    result = sh("hetero", "--version")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "hetero-cli 0.1.0"
    assert f"onnxruntime: {ort.__version__} (" in result.stdout
    assert "execution providers: " + ", ".join(ort.get_available_providers()) in lines
    if "OpenVINOExecutionProvider" in ort.get_available_providers():
        assert any(line.startswith("OpenVINO in the EP: 20") for line in lines)


def test_python_dash_m_runs_the_hetero_command():
    result = python_m("devices")
    assert result.returncode == 0 and "[ INFO ] CPU" in result.stdout
    assert python_m("--version").stdout.startswith("hetero-cli ")


def test_shell_completion_as_documented():
    script = python_m(env={"_HETERO_COMPLETE": "bash_source"})
    assert "_hetero_completion()" in script.stdout
    words = {"COMP_WORDS": "hetero val", "COMP_CWORD": "1", "_HETERO_COMPLETE": "bash_complete"}
    assert python_m(env=words).stdout.split() == ["plain,validate"]
    assert "_HETERO_COMPLETE=bash_source" in (ROOT / "docs" / "cli.md").read_text()


@pytest.mark.parametrize("command", [(), ("benchmark",), ("query",), ("validate",), ("devices",)])
def test_help_ends_with_environment_variables_and_exit_statuses(command):
    text = sh("hetero", *command, "--help").stdout
    env, exits = text.index("Environment variables:"), text.index("Exit statuses:")
    assert env < exits
    for name in ("OPENVINO_HETERO_VISUALIZE", "HETERO_DEBUG", "_HETERO_COMPLETE"):
        assert name in text[env:exits]
    for status in ("0", "1", "2", "130"):
        assert f"\n  {status} " in text[exits:]


@pytest.mark.skipif("CUDAExecutionProvider" in ort.get_available_providers(), reason="GPU is there")
def test_install_hints_work_from_this_repository():
    result = sh("hetero", "devices")
    (gpu,) = [line for line in result.stdout.splitlines() if line.startswith("[ INFO ] GPU : ")]
    assert "`make FLAVOUR=gpu install` in hetero-cli's source tree" in gpu
    assert "install hetero-cli[" not in result.stdout + result.stderr  # not on PyPI
    makefile = (ROOT / "Makefile").read_text()
    assert "FLAVOUR ?=" in makefile and "install: $(STAMP)" in makefile


def test_hello_classification_says_which_channel_order_it_feeds():
    model = LIGHT / "light_squeezenet.onnx"
    fed = sh("hello_classification", model, "samples/images/digit_2.jpg", "CPU")
    assert fed.returncode == 0, fed.stderr
    (line,) = [x for x in fed.stdout.splitlines() if x.startswith("[ INFO ] Channel order: ")]
    assert line.startswith("[ INFO ] Channel order: RGB") and "--color bgr" in line
    bgr = sh("hello_classification", model, "samples/images/digit_2.jpg", "CPU", "--color", "bgr")
    assert bgr.returncode == 0 and "[ INFO ] Channel order" not in bgr.stdout
    assert "224x224 BGR" in bgr.stdout
    assert "--color bgr" in sh("hello_classification", "--help").stdout
    gray = sh("hello_classification", DIGITS, "samples/images/digit_3.png", "CPU")
    assert "Channel order" not in gray.stdout  # one channel: nothing to choose


@needs_openvino
def test_query_header_says_the_mode_that_applies_and_summary_leaves_the_rows_out():
    split = ("-d", "HETERO:OPENVINO,CPU")
    fixed = sh("hetero", "query", "-m", DIGITS, *split, "--affinity", "softmax=CPU", "--summary")
    assert fixed.returncode == 0, fixed.stderr
    assert "(automatic mode, then 1 node(s) fixed by --affinity)" in fixed.stdout
    assert "Affinities of" not in fixed.stdout and "Subgraphs (execution order)" in fixed.stdout
    full = sh("hetero", "query", "-m", DIGITS, *split)
    assert "(automatic mode)" in full.stdout and "Affinities of" in full.stdout


@needs_openvino
def test_query_shows_a_spinner_on_a_terminal_while_it_probes_and_compiles():
    text = on_a_terminal("query", "-m", DIGITS, "-d", "HETERO:OPENVINO,CPU", "--summary", "--compile")
    assert "Querying HETERO:OPENVINO,CPU (a probe session per device)" in text
    assert "Compiling the plan" in text
    assert "Subgraphs (execution order)" in text


def test_devices_help_shows_examples():
    text = sh("hetero", "devices", "--help").stdout
    assert "hello_query_device\n" in text and 'grep -A8 "not available here"' in text
