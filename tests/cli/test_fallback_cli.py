"""HETERO_FALLBACK on the command line: `hetero query --compile` shows where a failing subgraph went, and
a manual split's failure says that --config HETERO_FALLBACK=YES would move it."""

from __future__ import annotations

import json

import onnx
from click.testing import CliRunner
from runtime.test_fallback import compile_failure_model, run_failure_model
from support.helpers import needs_openvino

from hetero_cli import cli

SPLIT = "HETERO:OPENVINO,CPU"


def _saved(tmp_path, made, manual: bool):
    proto, _, affinities = made()
    if manual:
        for node in proto.graph.node:
            node.metadata_props.add(key="affinity", value=affinities.get(node.name, "OPENVINO"))
    path = tmp_path / "model.onnx"
    onnx.save(proto, path)
    return path


@needs_openvino
def test_query_compile_shows_the_nodes_fallback_moved(tmp_path):
    path = _saved(tmp_path, compile_failure_model, manual=False)
    result = CliRunner().invoke(cli.hetero, ["query", "-m", str(path), "-d", SPLIT, "--compile", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc["affinities"].values()) == {"CPU"}
    assert set(doc["set_by"].values()) == {"fallback from OPENVINO"}
    assert "HETERO_FALLBACK: subgraph1" in result.stderr
    plain = CliRunner().invoke(cli.hetero, ["query", "-m", str(path), "-d", SPLIT, "--json"])
    assert "OPENVINO" in json.loads(plain.stdout)["affinities"].values()  # without --compile: the query's


@needs_openvino
def test_a_manual_split_that_fails_says_fallback_would_move_it(tmp_path):
    path = _saved(tmp_path, run_failure_model, manual=True)
    args = ["benchmark", "-m", str(path), "-d", SPLIT, "-niter", "2", "-shape", "x_in[2,200,1,1]"]
    failed = CliRunner().invoke(cli.hetero, args)
    assert failed.exit_code == 1
    (error,) = [line for line in failed.stderr.splitlines() if line.startswith("[ ERROR ]")]
    assert "subgraph2 on OPENVINO failed" in error and "HETERO_FALLBACK=YES would move it to CPU" in error
    assert "Traceback" not in failed.output
    moved = CliRunner().invoke(cli.hetero, [*args, "--config", "HETERO_FALLBACK=YES"])
    assert moved.exit_code == 0, moved.output
    assert moved.stderr.count("[ WARNING ] HETERO_FALLBACK: subgraph2 (5 node(s))") == 1
