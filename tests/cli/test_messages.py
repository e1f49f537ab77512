"""Messages that misled (issue 29, item 11) and a .dot write that left half a set (item 12): each case is
run through the CLI and checked for its one error line and its exit status."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from support.helpers import chain_model
from support.robust import invoke, one_error_line

from hetero_cli import cli


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    """x[2,3] -> Relu -> Neg -> Abs -> Sigmoid -> y, nodes n0..n3."""
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(), str(path))
    return path


@pytest.mark.parametrize("device", ["X" * 10_000, "HETERO:" + "X" * 10_000, "X" * 10_000 + ":CPU"])
def test_a_long_device_string_is_echoed_once_and_shortened(chain, device):
    result = invoke(cli.query, "-m", chain, "-d", device)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "bad device string" in line
    assert line.count("XXXXXXXXXX") <= 6 and "X" * 61 not in line  # 60 characters at most, once
    assert f"({len(device)} characters)" in line
