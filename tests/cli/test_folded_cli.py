"""Issue 29 on the command line: concat and shape of zero_out_model on OPENVINO (--affinity) make nothing a
later subgraph needs but a static shape value. validate failed with "subgraph2 on OPENVINO failed: ... At
least one output should be requested"; now that group, and the nodes that only feed it, are folded: the
commands run one CPU subgraph and name the folded nodes."""

from __future__ import annotations

import json

import onnx
import pytest
from support.helpers import needs_openvino
from support.robust import invoke
from support.shape_chains import zero_out_model

from hetero_cli.cli import hetero

SPLIT = ["-d", "HETERO:CPU,OPENVINO", "--affinity", "concat=OPENVINO", "--affinity", "shape=OPENVINO"]
FOLDED = (
    "4 node(s) folded, no session runs them (they only feed static shape values the subgraphs hold): "
    "sum, unsq, concat, shape"
)


@pytest.fixture
def zero_out(tmp_path):
    path = tmp_path / "zero_out.onnx"
    onnx.save(zero_out_model(), str(path))
    return path


def _clean(result) -> None:
    assert result.exit_code == 0, result.output
    assert "At least one output" not in result.output and "[ ERROR ]" not in result.output
    assert "HETERO_FALLBACK" not in result.output


@needs_openvino
def test_validate_passes(zero_out):
    result = invoke(hetero, "validate", "-m", zero_out, *SPLIT, "-data_shape", "x[2,3]")
    _clean(result)
    assert result.stdout.strip().splitlines()[-1] == "PASSED"


@needs_openvino
def test_query_shows_one_cpu_subgraph_and_names_the_folded_nodes(zero_out, tmp_path):
    result = invoke(hetero, "query", "-m", zero_out, *SPLIT, "--summary", "--dot-dir", tmp_path / "dots")
    _clean(result)
    assert "[ INFO ] 1 subgraph(s) on CPU; 0 tensor(s) cross devices" in result.output
    assert f"[ INFO ] {FOLDED}" in result.output
    dot = (tmp_path / "dots" / "hetero_subgraphs_zero_out.dot").read_text()
    assert "folded: no session" in dot
    doc = json.loads(invoke(hetero, "query", "-m", zero_out, *SPLIT, "--json").stdout)
    assert doc["plan"]["folded"] == ["sum", "unsq", "concat", "shape"]
    assert [(s["device"], s["outputs"]) for s in doc["plan"]["subgraphs"]] == [("CPU", ["y"])]


@needs_openvino
def test_benchmark_with_counters_runs_and_names_the_folded_nodes(zero_out):
    result = invoke(
        hetero, "benchmark", "-m", zero_out, *SPLIT, "-data_shape", "x[2,3]", "-niter", "4", "-pc"
    )
    _clean(result)
    assert f"[ INFO ]   {FOLDED}" in result.output
    assert "subgraph1: mul:" in result.stdout  # the counters of the one subgraph that runs
    assert "HETERO_NUMBER_OF_SUBMODELS: 1" in result.stdout
