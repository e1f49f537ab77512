"""hetero tune's chart (app/tune/chart.py): a PNG of the tuned placement's subgraphs beside the automatic
plan's, drawn with Pillow. Checked by reading the PNG back: its size, and each device's colour in it."""

from __future__ import annotations

import pytest
from PIL import Image

from hetero_cli.app.tune.chart import DEVICE_COLOURS, SIZE, device_colours, write_chart


def _report(winner, automatic):
    return {
        "device": "HETERO:OPENVINO,CPU",
        "winner": "cost-model-1",
        "per_subgraph": {"winner": winner, "automatic": automatic},
    }


def _row(name, device, ms, nodes=3):
    return {"subgraph": name, "device": device, "nodes": nodes, "ms": ms}


def _colours(path):
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == SIZE
        return {colour for _, colour in image.convert("RGB").getcolors(maxcolors=SIZE[0] * SIZE[1])}


def test_a_split_shows_both_devices_colours(tmp_path):
    report = _report(
        [_row("subgraph_0", "OPENVINO", 3.0), _row("subgraph_1", "CPU", 2.0)],
        [_row("subgraph_0", "OPENVINO", 6.5)],
    )
    path = write_chart(report, tmp_path / "chart.png")
    colours = _colours(path)
    assert DEVICE_COLOURS["OPENVINO"] in colours
    assert DEVICE_COLOURS["CPU"] in colours


def test_the_tuned_bar_is_drawn_below_the_automatic_one_in_its_own_colours(tmp_path):
    # automatic all on CPU, tuned all on OPENVINO: each bar's row of pixels has only its own device's colour
    report = _report([_row("subgraph_0", "OPENVINO", 4.0)], [_row("subgraph_0", "CPU", 8.0)])
    path = write_chart(report, tmp_path / "chart.png")
    with Image.open(path) as image:
        rgb = image.convert("RGB")
        rows = {y: {rgb.getpixel((x, y)) for x in range(SIZE[0])} for y in range(SIZE[1])}
    cpu = [y for y, seen in rows.items() if DEVICE_COLOURS["CPU"] in seen]
    ov = [y for y, seen in rows.items() if DEVICE_COLOURS["OPENVINO"] in seen]
    # the legend's swatches sit at the bottom: the bars are the rows above it
    legend_top = SIZE[1] - 34
    cpu_bar = [y for y in cpu if y < legend_top]
    ov_bar = [y for y in ov if y < legend_top]
    assert cpu_bar and ov_bar
    assert max(cpu_bar) < min(ov_bar)


def test_a_report_object_is_drawn_through_its_to_dict(tmp_path):
    class Report:
        def to_dict(self):
            return _report([_row("subgraph_0", "GPU", 1.0)], [_row("subgraph_0", "GPU", 1.0)])

    colours = _colours(write_chart(Report(), tmp_path / "chart.png"))
    assert DEVICE_COLOURS["GPU"] in colours


def test_devices_without_a_colour_of_their_own_get_distinct_ones():
    colours = device_colours(["CPU", "FPGA", "DSP", "FPGA"])
    assert list(colours) == ["CPU", "FPGA", "DSP"]
    assert len(set(colours.values())) == 3


def test_a_report_without_subgraph_times_is_refused(tmp_path):
    with pytest.raises(ValueError, match="per_subgraph"):
        write_chart({"per_subgraph": {"winner": [], "automatic": []}}, tmp_path / "chart.png")
    assert not (tmp_path / "chart.png").exists()
