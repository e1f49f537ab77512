"""HETERO_FALLBACK on the command line: `hetero query --compile` shows where a failing subgraph went, and
a manual split's failure says that --config HETERO_FALLBACK=YES would move it."""

from __future__ import annotations

import json

import onnx
from click.testing import CliRunner
from quirks.test_openvino_limits import attention_model, attention_splits
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
    # an inference makes no probe session: the next device of the priority list is named
    assert "subgraph2 on OPENVINO failed" in error and "HETERO_FALLBACK=YES would try it on CPU next" in error
    assert "Traceback" not in failed.output
    moved = CliRunner().invoke(cli.hetero, [*args, "--config", "HETERO_FALLBACK=YES"])
    assert moved.exit_code == 0, moved.output
    assert moved.stderr.count("[ WARNING ] HETERO_FALLBACK: subgraph2 (5 node(s))") == 1


@needs_openvino
def test_validate_and_benchmark_get_a_self_attention_right_where_openvino_splits_it(tmp_path):
    """openvino-attention-output-shape: the subgraph moves to CPU (one warning citing it), validate
    PASSES; on OPENVINO alone validate ends in one error line, not a FAILED table of a wrong shape."""
    path = tmp_path / "attention.onnx"
    onnx.save(attention_model(), path)
    model = ["-m", str(path)]
    validated = CliRunner().invoke(cli.hetero, ["validate", *model, "-d", SPLIT])
    assert validated.exit_code == 0, validated.output
    assert validated.stdout.rstrip().endswith("PASSED")
    timed = CliRunner().invoke(
        cli.hetero, ["benchmark", *model, "-d", SPLIT, "-niter", "4", "-hint", "latency"]
    )
    assert timed.exit_code == 0, timed.output
    for result in (validated, timed):
        moved = [line for line in result.stderr.splitlines() if "HETERO_FALLBACK: subgraph1" in line]
        assert len(moved) == (1 if attention_splits() else 0), result.stderr
        assert all("openvino-attention-output-shape" in line for line in moved)
    alone = CliRunner().invoke(cli.hetero, ["validate", *model, "-d", "OPENVINO"])
    if not attention_splits():
        assert alone.exit_code == 0, alone.output
        return
    assert alone.exit_code == 1
    (error,) = [line for line in alone.stderr.splitlines() if line.startswith("[ ERROR ]")]
    assert "subgraph1 on OPENVINO failed: output y came back in shape" in error
    assert "openvino-attention-output-shape" in error and "Traceback" not in alone.output
    assert "FAILED" not in alone.stdout
