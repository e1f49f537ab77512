"""The installed console scripts as real subprocesses: hello_classification, hello_query_device, hetero."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnxruntime as ort
import pytest
from support.counters import parse_counters

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DIGITS = "models/digits.onnx"
HAS_OPENVINO = "OpenVINOExecutionProvider" in ort.get_available_providers()
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()
needs_openvino = pytest.mark.skipif(not HAS_OPENVINO, reason="needs the OpenVINO execution provider")


def script(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"console script {name} is not installed (pip install -e . installs it)")
    return found


def sh(name: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENVINO_HETERO_VISUALIZE", "HETERO_DEBUG")}
    result = subprocess.run(
        [script(name), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120, env=env
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def top1(stdout: str) -> int:
    lines = stdout.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("[ INFO ] class_id probability"))
    return int(re.match(r"\[ INFO \] (\d+)\s", lines[i + 2])[1])


def test_hello_classification_positional_form():
    result = sh("hello_classification", DIGITS, "samples/images/digit_3.png", "HETERO:GPU,CPU")
    assert result.returncode == 0, result.stderr
    assert top1(result.stdout) == 3
    assert "[ INFO ] Top 10 results:" in result.stdout
    if not HAS_CUDA:
        assert result.stderr.startswith("[ WARNING ] GPU is not available")
        assert len(result.stderr.splitlines()) == 1


@needs_openvino
def test_hello_classification_option_form_split_with_counters():
    result = sh(
        "hello_classification",
        "-m",
        DIGITS,
        "-i",
        "samples/images/digit_8.png",
        "-d",
        "HETERO:GPU,OPENVINO,CPU",
        "-pc",
    )
    assert result.returncode == 0, result.stderr
    assert top1(result.stdout) == 8
    assert "subgraph1: CPU (CPUExecutionProvider), 2 node(s)" in result.stdout
    assert "subgraph2: OPENVINO (OpenVINOExecutionProvider), 15 node(s)" in result.stdout
    infos, total = parse_counters(result.stdout)
    assert {i.subgraph for i in infos} == {1, 2}
    assert total == sum(i.real_time_us for i in infos)


def test_hello_query_device():
    result = sh("hello_query_device")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "[ INFO ] Available devices:\n[ INFO ] CPU :\n[ INFO ] \tSUPPORTED_PROPERTIES:"
    )


def test_hetero_group_and_commands(tmp_path):
    assert "classify" in sh("hetero", "--help").stdout
    query = sh("hetero", "query", "-m", DIGITS, "-d", "HETERO:CPU", "--save", tmp_path / "q.onnx")
    assert query.returncode == 0 and (tmp_path / "q.onnx").is_file()
    bench = sh("hetero", "benchmark", "-m", DIGITS, "-b", "1", "-niter", "20", "-api", "sync")
    assert bench.returncode == 0, bench.stderr
    assert re.search(r"\[ INFO \] Count:\s+20 iterations", bench.stdout)
    assert re.search(r"\[ INFO \] Throughput:\s+[\d.]+ FPS", bench.stdout)
    classify = sh(
        "hetero", "classify", tmp_path / "q.onnx", ROOT / "samples/images/digit_9.png", "HETERO:CPU"
    )
    assert classify.returncode == 0 and top1(classify.stdout) == 9


def test_no_benchmark_app_script_installed():
    assert not (BIN / "benchmark_app").exists() or "hetero" not in (BIN / "benchmark_app").read_text(
        errors="ignore"
    )


ERRORS = [
    (
        ("hello_classification", "missing.onnx", "samples/images/digit_3.png", "CPU"),
        2,
        "model file not found",
    ),
    (
        ("hello_classification", "README.md", "samples/images/digit_3.png", "CPU"),
        2,
        "not a readable ONNX model",
    ),
    (("hello_classification", DIGITS, "README.md", "CPU"), 2, "not an image"),
    (
        ("hello_classification", DIGITS, "samples/images/digit_3.png", "HETERO:TPU,CPU"),
        2,
        "unknown device 'TPU'",
    ),
    (
        ("hello_classification", DIGITS, "samples/images/digit_3.png", "CPU", "--config", "X=1"),
        2,
        "unknown config key",
    ),
    (("hello_classification", "--nope"), 2, "No such option"),
    (("hetero", "query", "-m", DIGITS, "-d", "HETERO:CPU", "--affinity", "ghost=CPU"), 2, "names no node"),
    (("hetero", "benchmark", "-m", DIGITS, "-shape", "[9,9,9,9]"), 2, "does not reshape"),
    (("hetero", "frobnicate"), 2, "No such command"),
    # an option missing its value: click gives no context, the help pointed at is still the command's
    (("hetero", "classify", "-m"), 2, "Option '-m' requires an argument. See 'hetero classify --help'"),
    (("hetero", "benchmark", "-m", DIGITS, "-d"), 2, "See 'hetero benchmark --help'"),
]
if not HAS_CUDA:
    ERRORS.append(
        (("hello_classification", DIGITS, "samples/images/digit_3.png", "GPU"), 1, "make FLAVOUR=gpu install")
    )


@pytest.mark.parametrize(("argv", "code", "text"), ERRORS, ids=[e[2] for e in ERRORS])
def test_errors_are_one_line_with_the_right_exit_status(argv, code, text):
    result = sh(*argv)
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[ ERROR ] ") and text in lines[0], result.stderr
