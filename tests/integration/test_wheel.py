"""The built wheel carries the embedded default model, its labels and its sample image, and the defaults
work from an installed package, outside the source tree (no models/ or samples/ to fall back on)."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from support.helpers import PYTHON

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("hetero_cli/data/digits.onnx", "hetero_cli/data/digits.labels", "hetero_cli/data/digit_3.png")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the package's sources (the build writes nothing into the work tree)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "hetero_cli", src / "hetero_cli", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [PYTHON, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (found,) = dist.glob("hetero_cli-*.whl")
    return found


@pytest.mark.slow
def test_the_wheel_holds_the_default_model_its_labels_and_sample_image(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in SHIPPED:
        assert shipped in names
        data = zipfile.ZipFile(wheel).read(shipped)
        assert data == (ROOT / shipped).read_bytes(), shipped


@pytest.mark.slow
def test_hello_classification_with_no_arguments_works_from_the_unpacked_wheel(wheel, tmp_path):
    """The wheel's package first on the path, run from an empty folder: the default model classifies its
    sample image, with its labels, from the installed package's own files."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["PYTHONPATH"] = str(site)
    script = (
        "import hetero_cli, sys; print('from', hetero_cli.__file__, flush=True); "
        "from hetero_cli.cli import hello_classification; sys.argv = ['hello_classification']; "
        "hello_classification()"
    )
    result = subprocess.run(
        [PYTHON, "-c", script], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"from {site / 'hetero_cli' / '__init__.py'}" in result.stdout
    assert str(site / "hetero_cli" / "data" / "digits.onnx") in result.stdout
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "class_id probability label" in line)
    assert lines[header + 2].split()[-3::2] == ["3", "three"], result.stdout  # the top class, labelled
