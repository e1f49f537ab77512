"""The reports ``hetero benchmark`` writes, in benchmark_app's formats: benchmark_report.csv (or .json),
the counter reports, and the configuration -dump_config writes.

    write_reports("out", "average_counters", json_stats=False, parameters=[...], configuration=[...],
                  results=[...], average=average_counters(runs))
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import HeteroError
from ...runtime import CompiledModel, ProfilingInfo
from .counters import counter_rows, counters_json

REPORT_TYPES = ("no_counters", "average_counters", "detailed_counters")

_COUNTERS_HEADER = "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)"


def write_reports(
    folder: str | os.PathLike[str],
    report_type: str,
    *,
    json_stats: bool,
    parameters: Sequence[tuple[str, Any]],
    configuration: Sequence[tuple[str, Any]],
    results: Sequence[tuple[str, Any]],
    per_request: Sequence[Sequence[ProfilingInfo]] = (),
    average: Sequence[ProfilingInfo] = (),
) -> list[Path]:
    """benchmark_report.csv (or .json) and, for counter reports, benchmark_<type>_report.csv (or .json).

    Takes the folder (made if missing), one of REPORT_TYPES, the (key, value) pairs of the three sections,
    and the counters: each request's for detailed_counters, their average for average_counters. Returns
    the paths written. Raises HeteroError if a file cannot be written, after removing those already written:
    the reports come as a set.
    """
    out_dir = Path(folder)
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        written.append(_write_summary(out_dir, json_stats, parameters, configuration, results))
        if report_type in ("average_counters", "detailed_counters"):
            groups = [list(average)] if report_type == "average_counters" else [list(r) for r in per_request]
            written.append(_write_counters(out_dir, report_type, json_stats, groups))
    except OSError as exc:
        for path in written:  # the reports come as a set: none rather than part of it
            path.unlink(missing_ok=True)
        raise HeteroError(f"cannot write the report into {out_dir}: {exc.strerror or exc}") from None
    return written


def _write_summary(
    out_dir: Path,
    json_stats: bool,
    parameters: Sequence[tuple[str, Any]],
    configuration: Sequence[tuple[str, Any]],
    results: Sequence[tuple[str, Any]],
) -> Path:
    """benchmark_report.json (one object per section) or .csv (key;value lines under each section's title)."""
    if json_stats:
        path = out_dir / "benchmark_report.json"
        doc = {
            "cmd_options": {k: _jsonable(v) for k, v in parameters},
            "configuration_setup": {k: _jsonable(v) for k, v in configuration},
            "execution_results": {k: _jsonable(v) for k, v in results},
        }
        path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
        return path
    path = out_dir / "benchmark_report.csv"
    lines = []
    for title, pairs in (
        ("Command line parameters", parameters),
        ("Configuration setup", configuration),
        ("Execution results", results),
    ):
        lines.append(title)
        lines += [f"{k};{_csv_value(v)}" for k, v in pairs]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _write_counters(
    out_dir: Path, report_type: str, json_stats: bool, groups: Sequence[Sequence[ProfilingInfo]]
) -> Path:
    """benchmark_<report_type>_report.json or .csv: one table (or JSON group) per group of counters."""
    path = out_dir / f"benchmark_{report_type}_report.{'json' if json_stats else 'csv'}"
    if json_stats:
        key = "avg_performance" if report_type == "average_counters" else "detailed_performance"
        doc = {key: [counters_json(g) for g in groups]}
        path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
        return path
    lines = []
    for g in groups:
        lines.append(_COUNTERS_HEADER)
        lines += [";".join(row) for row in counter_rows(g)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _csv_value(value: Any) -> str:
    """A value on one CSV line: floats with 2 decimals, no ';' (the separator) and no line break."""
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value).replace(";", ",").replace("\n", " ")


def _jsonable(value: Any) -> Any:
    """``value`` as JSON holds it: scalars kept, mappings and sequences converted, anything else as text."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def config_document(compiled: CompiledModel) -> dict[str, dict[str, Any]]:
    """The compiled model's configuration as -dump_config writes it: {"HETERO": {...}, device: {...}}.

    HETERO's section only where the model has HETERO properties; then one section per device, the
    execution devices first.
    """
    config = compiled.config
    doc: dict[str, dict[str, Any]] = {}
    if config.hetero:
        doc["HETERO"] = {k: _jsonable(v) for k, v in config.hetero.items()}
    devices = list(dict.fromkeys([*compiled.execution_devices, *config.devices]))
    for name in devices:
        doc[name] = {k: _jsonable(v) for k, v in config.devices.get(name, {}).items()}
    return doc
