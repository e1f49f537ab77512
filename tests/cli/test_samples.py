"""Every samples/*.py script runs to completion and prints what it promises."""

from __future__ import annotations

import subprocess
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from support.helpers import HAS_OPENVINO, PYTHON, ROOT, hardmax_model

SAMPLES = ROOT / "samples"
SCRIPTS = sorted(p.name for p in SAMPLES.glob("*.py") if not p.name.startswith("_"))
NO_CUDA = "CUDAExecutionProvider" not in ort.get_available_providers()
SQUEEZENET = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"

# Lines (substrings of stdout) each script must print on any machine.
EXPECTED: dict[str, list[str]] = {
    "automatic_mode.py": [],
    "manual_affinities.py": [
        "HETERO:GPU,CPU: 1 subgraph(s)",
        "subgraph1: CPU (CPUExecutionProvider), 6 node(s)",
    ],
    "query_then_fix.py": ["query_model: {"],
    "device_properties.py": [],
    "hetero_demo.py": ["== automatic HETERO:GPU,OPENVINO,CPU", "== forced split", "plan of "],
    "performance_hint.py": [],
    "concurrent_branches.py": [
        "AUTO: 1 subgraph(s); the subgraphs run one after another",
        "CONCURRENT: 2 subgraph(s); subgraphs whose inputs are ready run at the same time",
        "wall ",
    ],
}
# Without CUDA, GPU is skipped: HETERO:GPU,CPU is the CPU alone.
EXPECTED_NO_CUDA: dict[str, list[str]] = {
    "automatic_mode.py": ["HETERO:GPU,CPU: 1 subgraph(s)"],
    "device_properties.py": ["HETERO:GPU,CPU: 1 subgraph(s)"],
}
# With CUDA (onnxruntime-gpu), the GPU takes all but Hardmax, which the CUDA EP refuses.
EXPECTED_CUDA: dict[str, list[str]] = {
    "automatic_mode.py": [
        "HETERO:GPU,CPU: 3 subgraph(s)",
        "subgraph1: GPU (CUDAExecutionProvider), 3 node(s)",
        "nodes ['hardmax'], inputs ['relu_out'], outputs ['onehot']",
        "subgraph3: GPU (CUDAExecutionProvider), 2 node(s)",
    ],
    "device_properties.py": [
        "HETERO:GPU,CPU: 3 subgraph(s)",
        "subgraph1: GPU execute time (synchronised run) EXECUTED",
    ],
    # ORT's own [CUDA, CPU] session places the nodes as the plan does: LATENCY runs the split in it
    "performance_hint.py": [
        "LATENCY: 3 subgraph(s) on GPU, CPU in 1 ONNX Runtime session(s)",
        "THROUGHPUT: 3 subgraph(s) on GPU, CPU in 3 ONNX Runtime session(s)",
    ],
}
# With the OpenVINO EP (onnxruntime-openvino, which has no CUDA EP).
EXPECTED_OPENVINO: dict[str, list[str]] = {
    "automatic_mode.py": [
        "HETERO:GPU,OPENVINO,CPU: 3 subgraph(s)",
        "subgraph1: OPENVINO (OpenVINOExecutionProvider), 3 node(s)",
        "nodes ['hardmax'], inputs ['relu_out'], outputs ['onehot']",
        "subgraph3: OPENVINO (OpenVINOExecutionProvider), 2 node(s)",
    ],
    "manual_affinities.py": [
        "HETERO:OPENVINO,CPU: 2 subgraph(s)",
        "nodes ['matmul', 'add_bias', 'relu'], inputs ['x'], outputs ['relu_out']",
    ],
    "query_then_fix.py": [
        "moved sigmoid to CPU by hand",
        "'hardmax': 'CPU'",
        "'matmul': 'OPENVINO'",
        "HETERO:GPU,OPENVINO,CPU: 4 subgraph(s)",
    ],
    "device_properties.py": [
        "HETERO:GPU,OPENVINO,CPU: 3 subgraph(s)",
        "subgraph1: 2. OPENVINO execute time EXECUTED",
    ],
    "hetero_demo.py": ["OPENVINO (OpenVINOExecutionProvider)"],
    "performance_hint.py": [
        "LATENCY: 3 subgraph(s) on OPENVINO, CPU in 1 ONNX Runtime session(s)",
        "THROUGHPUT: 3 subgraph(s) on OPENVINO, CPU in 3 ONNX Runtime session(s)",
    ],
    "concurrent_branches.py": [],  # HETERO:CPU: the same with or without the OpenVINO EP
}
MATCHES = {
    "automatic_mode.py": 3,
    "manual_affinities.py": 2,
    "query_then_fix.py": 1,
    "device_properties.py": 2,
    "hetero_demo.py": 2,
    "performance_hint.py": 2,
    "concurrent_branches.py": 2,
}


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, str(SAMPLES / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_sample_is_covered():
    assert set(SCRIPTS) == set(EXPECTED), "add the new sample's expected lines to EXPECTED"


@pytest.mark.parametrize("script", SCRIPTS)
def test_sample_runs(script):
    result = run(script)
    out = result.stdout
    assert result.returncode == 0, f"{script} failed:\n{out}\n{result.stderr}"
    assert "MISMATCH" not in out
    assert out.count("match one onnxruntime session") == MATCHES[script], out
    expected = EXPECTED[script] + (EXPECTED_NO_CUDA if NO_CUDA else EXPECTED_CUDA).get(script, [])
    for line in expected + (EXPECTED_OPENVINO[script] if HAS_OPENVINO else []):
        assert line in out, f"{script}: {line!r} missing from:\n{out}"
    # Nothing runs silently elsewhere: the tiny model's subgraphs run wholly on their devices.
    if script != "hetero_demo.py":
        assert "instead" not in out, out
    if NO_CUDA and "GPU" in (SAMPLES / script).read_text():
        assert "GPU is not available, skipping it" in result.stderr
        assert "make FLAVOUR=gpu install" in result.stderr


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s != "hetero_demo.py"])
def test_sample_takes_a_model_path(script, tmp_path):
    path = tmp_path / "given.onnx"
    onnx.save(hardmax_model(), str(path))
    result = run(script, str(path))
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    assert result.stdout.count("match one onnxruntime session") == MATCHES[script]


@pytest.mark.skipif(not SQUEEZENET.exists(), reason="the onnx wheel has no light_squeezenet")
def test_demo_on_squeezenet():
    result = run("hetero_demo.py", str(SQUEEZENET))
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "plan of squeezenet" in result.stdout
    assert result.stdout.count("match one onnxruntime session") == 2


def test_demo_default_model():
    result = run("hetero_demo.py")
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    digits = ROOT / "models" / "digits.onnx"
    assert str(digits if digits.exists() else SQUEEZENET) in first


def test_sample_exits_nonzero_on_a_bad_model(tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"not an onnx model")
    result = run("automatic_mode.py", str(path))
    assert result.returncode != 0
    assert "ModelError" in result.stderr
