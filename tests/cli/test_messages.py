"""Messages that misled (issue 29, item 11) and a .dot write that left half a set (item 12): each case is
run through the CLI and checked for its one error line and its exit status."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from support.helpers import chain_model
from support.robust import external_model, invoke, nothing_left_behind, one_error_line

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


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [("offset", "-16", "negative offset (-16)"), ("length", "-8", "negative length (-8)")],
)
def test_a_negative_external_data_offset_is_called_invalid(tmp_path, key, value, words):
    path = external_model(tmp_path / "ext")
    proto = onnx.load(str(path), load_external_data=False)
    entries = {e.key: e for e in proto.graph.initializer[0].external_data}
    if key in entries:
        entries[key].value = value
    else:
        proto.graph.initializer[0].external_data.add(key=key, value=value)
    onnx.save(proto, str(path))
    with nothing_left_behind(tmp_path):
        result = invoke(cli.query, "-m", path, "-d", "CPU")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert words in line and "invalid" in line
    assert "truncated" not in line and "needs bytes" not in line


@pytest.mark.parametrize(("device", "value"), [("OPENVINO", "null"), ("CPU", "3"), ("cpu", '"YES"')])
def test_load_config_says_a_devices_configuration_is_an_object(chain, tmp_path, device, value):
    config = tmp_path / "config.json"
    config.write_text(f'{{"{device}": {value}}}')
    result = invoke(cli.query, "-m", chain, "-d", "CPU", "-load_config", config)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f'"{device}" is a device, so its configuration must be an object of key/values' in line
    assert f"not {value}" in line and "unknown HETERO config key" not in line
