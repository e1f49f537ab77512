"""The PNG chart of ``hetero tune --report``: per subgraph, its device and its time, the tuned placement
beside the automatic plan. Two horizontal stacked bars (automatic above, tuned below), one segment per
subgraph coloured by its device, widths in proportion to its milliseconds, each bar's total at its end and
a legend of the devices. Drawn with Pillow (a core dependency): no plotting library is needed to tune.

    write_chart(result.report, "out/tune_chart.png")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from ...errors import TuneError

#: the chart's size in pixels (width, height)
SIZE = (960, 300)
#: each device's colour (RGB); devices not listed take PALETTE's colours in order of appearance
DEVICE_COLOURS = {
    "CPU": (66, 133, 244),
    "OPENVINO": (234, 67, 53),
    "GPU": (52, 168, 83),
    "CUDA": (52, 168, 83),
    "NPU": (251, 188, 4),
}
PALETTE = ((155, 89, 182), (26, 188, 156), (230, 126, 34), (127, 140, 141), (241, 196, 15))
BACKGROUND = (255, 255, 255)
INK = (33, 33, 33)
FAINT = (120, 120, 120)
#: the two bars, top to bottom: (key in per_subgraph, label, the candidate whose end-to-end median is shown)
BARS = (("automatic", "automatic", "automatic"), ("winner", "tuned", None))

_LEFT = 110  # room for the bars' labels
_RIGHT = 175  # room for the totals
_TOP = 56
_BAR_HEIGHT = 64
_GAP = 28


def write_chart(report: Any, path: str | Path) -> Path:
    """Draw ``report`` (a TuneReport, or its ``to_dict()``: what is read is ``per_subgraph`` {"winner":
    [...], "automatic": [...]} of {"subgraph", "device", "nodes", "ms"} rows, and ``device``, ``winner``)
    as a PNG of SIZE at ``path``; returns the path. The widths are each subgraph's own time (the
    profiler's), so a bar's total is the sum of its subgraphs; the measured end-to-end median of each
    placement (``candidates``' ``median_ms``, where the report has them) is written under it.
    Raises TuneError for what is no report or one without per_subgraph rows, OSError where the file
    cannot be written."""
    if not hasattr(report, "to_dict") and not isinstance(report, Mapping):
        raise TuneError(f"write_chart draws a TuneReport (or its to_dict()), not {type(report).__name__}")
    doc = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    per_subgraph: Mapping[str, Sequence[Mapping[str, Any]]] = doc.get("per_subgraph") or {}
    bars = [(label, list(per_subgraph.get(key) or ())) for key, label, _ in BARS]
    medians = {c.get("name"): c.get("median_ms") for c in doc.get("candidates") or ()}
    ends = [medians.get(name or doc.get("winner")) for _, _, name in BARS]
    if not any(rows for _, rows in bars):
        raise TuneError("the report has no per-subgraph times to draw (per_subgraph is empty)")
    image = Image.new("RGB", SIZE, BACKGROUND)
    draw = ImageDraw.Draw(image)
    font, small = _font(15), _font(12)
    title = f"per subgraph: device and time, tuned ({doc.get('winner') or '?'}) beside automatic"
    if doc.get("device"):
        title += f", {doc['device']}"
    draw.text((12, 10), title, fill=INK, font=font)
    colours = device_colours([str(row.get("device")) for _, rows in bars for row in rows])
    totals = [sum(_ms(row) for row in rows) for _, rows in bars]
    scale = (SIZE[0] - _LEFT - _RIGHT) / max(max(totals), 1e-9)
    for k, ((label, rows), total, end) in enumerate(zip(bars, totals, ends, strict=True)):
        top = _TOP + k * (_BAR_HEIGHT + _GAP)
        _bar(draw, rows, top, scale, colours, small)
        draw.text((12, top + _BAR_HEIGHT // 2 - 8), label, fill=INK, font=font)
        right = _LEFT + total * scale + 8
        text = f"{total:.3g} ms in {len(rows)} subgraph(s)" if rows else "not measured"
        draw.text((right, top + _BAR_HEIGHT // 2 - 16), text, fill=INK, font=small)
        if isinstance(end, int | float):
            draw.text((right, top + _BAR_HEIGHT // 2 + 4), f"{end:.3g} ms end to end", fill=FAINT, font=small)
    _legend(draw, colours, SIZE[1] - 34, font)
    path = Path(path)
    image.save(path, format="PNG")
    return path


def device_colours(devices: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """Each distinct device of ``devices`` (in order of appearance) with its colour: DEVICE_COLOURS', else
    PALETTE's next."""
    out: dict[str, tuple[int, int, int]] = {}
    spare = iter(PALETTE * (1 + len(devices) // len(PALETTE)))
    for device in devices:
        if device not in out:
            out[device] = DEVICE_COLOURS.get(device.upper()) or next(spare)
    return out


def _ms(row: Mapping[str, Any]) -> float:
    """A row's milliseconds, 0 where it has none."""
    value = row.get("ms")
    return float(value) if isinstance(value, int | float) and value > 0 else 0.0


def _bar(
    draw: ImageDraw.ImageDraw,
    rows: Sequence[Mapping[str, Any]],
    top: int,
    scale: float,
    colours: Mapping[str, tuple[int, int, int]],
    font: Any,
) -> None:
    """One stacked bar: a segment per row, white lines between segments, the subgraph's name inside
    where it fits."""
    x = float(_LEFT)
    for row in rows:
        width = _ms(row) * scale
        if width <= 0:
            continue
        box = (round(x), top, max(round(x + width) - 1, round(x)), top + _BAR_HEIGHT)
        draw.rectangle(box, fill=colours[str(row.get("device"))], outline=BACKGROUND)
        name = str(row.get("subgraph", ""))
        if draw.textlength(name, font=font) + 6 < width:
            draw.text((box[0] + 4, top + 6), name, fill=BACKGROUND, font=font)
            ms = f"{_ms(row):.3g} ms"
            if draw.textlength(ms, font=font) + 6 < width:
                draw.text((box[0] + 4, top + _BAR_HEIGHT - 20), ms, fill=BACKGROUND, font=font)
        x += width


def _legend(
    draw: ImageDraw.ImageDraw, colours: Mapping[str, tuple[int, int, int]], top: int, font: Any
) -> None:
    """A swatch and the name of each device, in a row."""
    x = _LEFT
    for device, colour in colours.items():
        draw.rectangle((x, top, x + 16, top + 16), fill=colour)
        draw.text((x + 22, top), device, fill=INK, font=font)
        x += 22 + int(draw.textlength(device, font=font)) + 24
    draw.text(
        (x + 12, top + 2),
        "widths: each subgraph's own time (ms, from the profiler)",
        fill=FAINT,
        font=_font(12),
    )


def _font(size: int) -> Any:
    """Pillow's default font at ``size`` (a TrueType one on Pillow >= 10.1, the bitmap one before)."""
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one bitmap size
        return ImageFont.load_default()
