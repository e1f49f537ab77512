"""``hetero compile -o OUT`` writes the export; ``hetero benchmark -m OUT`` and the other commands take it
where they take an .onnx (told by its first bytes, not its name) and import it instead of compiling;
``hetero benchmark -cdir DIR`` keeps the compiled split in a cache and says when it loaded it."""

from __future__ import annotations

import pytest
from cli.test_benchmark_app_options import DIGITS, IMAGES
from click.testing import CliRunner
from support.helpers import needs_openvino

import hetero_cli as hc
from hetero_cli.cli import hetero
from hetero_cli.runtime.artifacts import artifact

SPLIT = "HETERO:OPENVINO,CPU"
SHAPE = ["-shape", "[1,1,32,32]"]


def run(*args):
    return CliRunner().invoke(hetero, [str(a) for a in args])


def _compile(tmp_path, *extra, name="digits.bin"):
    out = tmp_path / name  # not .hetero: an export is told by its first bytes
    result = run("compile", "-m", DIGITS, "-d", SPLIT, "-o", out, *extra)
    assert result.exit_code == 0, result.output
    assert f"Wrote {out}" in result.output
    return out


@needs_openvino
def test_compile_writes_an_export_benchmark_loads(tmp_path):
    out = _compile(tmp_path, "--config", "PERFORMANCE_HINT=THROUGHPUT")
    header = artifact.unpack(out.read_bytes(), "it").header
    assert header["device_name"] == SPLIT and header["config"]["hetero"]["PERFORMANCE_HINT"] == "THROUGHPUT"
    result = run("benchmark", "-m", out, "-niter", "4", *SHAPE)
    assert result.exit_code == 0, result.output
    assert "(loaded from the cache)" in result.output
    assert "subgraph2: OPENVINO" in result.output  # the export's own device string, as -d was not given
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.bin"]


@needs_openvino
def test_the_other_commands_take_an_export(tmp_path):
    out = _compile(tmp_path)
    validated = run("validate", "-m", out, "-d", SPLIT, *SHAPE)
    assert validated.exit_code == 0, validated.output
    assert "PASSED" in validated.output
    queried = run("query", "-m", out, "-d", SPLIT, "--summary")
    assert queried.exit_code == 0, queried.output
    classified = run("classify", "-m", out, "-i", IMAGES / "digit_3.png")
    assert classified.exit_code == 0, classified.output


def test_a_damaged_export_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "bad.onnx"
    out.write_bytes(artifact.MAGIC + str(artifact.FORMAT_VERSION).encode() + b"\n" + b"\0" * 40)
    result = run("benchmark", "-m", out, "-niter", "1", *SHAPE)
    assert result.exit_code == 2, result.output
    (line,) = [text for text in result.output.splitlines() if "[ ERROR ]" in text]
    assert "bad.onnx is truncated" in line or "bad.onnx is damaged" in line


def test_an_output_that_is_a_link_writes_the_file_it_leads_to(tmp_path):
    """-o LINK, LINK a symbolic link to a file: that file gets the export, the link stays."""
    target = tmp_path / "target.hetero"
    target.write_bytes(b"old")
    link = tmp_path / "link.hetero"
    link.symlink_to(target)
    result = run("compile", "-m", DIGITS, "-d", "CPU", "-o", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and link.readlink() == target
    assert artifact.unpack(target.read_bytes(), "it").header["device_name"] == "CPU"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.hetero", "target.hetero"]


@needs_openvino
def test_an_export_takes_no_affinity(tmp_path):
    out = _compile(tmp_path)
    result = run("benchmark", "-m", out, "-niter", "1", "--affinity", "softmax=CPU", *SHAPE)
    assert result.exit_code == 2
    assert "an export's placement is fixed" in result.output


@pytest.mark.parametrize("out", ["missing/out.hetero", "."])
def test_an_output_that_cannot_be_written_is_refused_before_compiling(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "missing").write_text("a file where a folder would be")
    result = run("compile", "-m", DIGITS, "-d", "CPU", "-o", out)
    assert result.exit_code == 2, result.output
    assert "Invalid value for -o" in result.output and "Compiling" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["missing"]


def test_benchmark_cdir_loads_the_second_run_from_the_cache(tmp_path):
    first = run("benchmark", "-m", DIGITS, "-cdir", tmp_path / "cache", "-niter", "2", *SHAPE)
    assert first.exit_code == 0, first.output
    assert "Compile model took" in first.output and "(loaded from the cache)" not in first.output
    second = run("benchmark", "-m", DIGITS, "-cdir", tmp_path / "cache", "-niter", "2", *SHAPE)
    assert second.exit_code == 0, second.output
    assert "(loaded from the cache)" in second.output
    assert "WARNING ] the entry" not in second.output
    names = [p.name for p in (tmp_path / "cache").iterdir()]  # one entry, and the model file's digest
    assert sum(n.endswith(".hetero") for n in names) == 1 and all(
        n.endswith((".hetero", ".digest")) for n in names
    )


@needs_openvino
def test_compile_shape_fixes_the_exports_dynamic_dimensions(tmp_path):
    """-shape / -data_shape as benchmark takes them: the export's model (and so its subgraphs) declares
    the given dimensions, and benchmark runs it without a -shape of its own."""
    out = _compile(tmp_path, "-shape", "[2,1,32,32]")
    imported = hc.Core().import_model(out)
    assert imported.model.inputs[0].shape == (2, 1, 32, 32)
    result = run("benchmark", "-m", out, "-niter", "2")
    assert result.exit_code == 0, result.output
    assert "image: data [2,1,32,32]" in result.output
    kept = _compile(tmp_path, "-data_shape", "image[?,1,32,32]", name="kept.bin")
    assert hc.Core().import_model(kept).model.inputs[0].shape[1:] == (1, 32, 32)
    assert not isinstance(hc.Core().import_model(kept).model.inputs[0].shape[0], int)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["-shape", "[2,3,32,32]"], "dimension 1 of the model's input [batch,1,32,32] is fixed at 1"),
        (["-data_shape", "picture[2,1,32,32]"], "-data_shape names unknown input 'picture'"),
        (["-shape", "[2,1,32]"], "-shape gives 'image' rank 3"),
    ],
)
def test_a_bad_compile_shape_is_one_line_exit_2_and_no_file(tmp_path, option, message):
    result = run("compile", "-m", DIGITS, "-d", "CPU", "-o", tmp_path / "out.hetero", *option)
    assert result.exit_code == 2, result.output
    (line,) = [text for text in result.output.splitlines() if "[ ERROR ]" in text]
    assert message in line and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []
