"""The reports ``hetero benchmark`` writes, in benchmark_app's formats: benchmark_report.csv (or .json),
the counter reports, benchmark_sorted_report.csv (or .json) for -pcsort, and the configuration
-dump_config writes.

    write_reports("out", "average_counters", json_stats=False, parameters=[...],
                  configuration=configuration_setup(compiled, topology="digits", api="async", ...),
                  results=[...], per_request=runs, average=average_counters(runs), pcsort="sort")

File names, CSV sections and columns, JSON keys and nesting are benchmark_app's (OpenVINO 2026.4); values
are written as benchmark_app writes them (text, floats with 2 decimals in benchmark_report, times in ms with
3 decimals in the counter reports). Where benchmark_app's Python code departs from its own schema, these
files keep the schema: the average JSON report holds every node (benchmark_app 2026.4 writes only the
first).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import HeteroError
from ...runtime import CompiledModel, ProfilingInfo
from .counters import counter_rows, counters_json, sorted_report_rows, sorted_rows

REPORT_TYPES = ("no_counters", "average_counters", "detailed_counters")

_COUNTERS_HEADER = "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)"
#: benchmark_sorted_report.csv's header as benchmark_app writes it (its last field ends in a line break)
SORTED_HEADER = (
    "layerName", "execStatus", "layerType", "execType", "realTime (ms)", "cpuTime (ms)", "proportion (%)\n"
)  # fmt: skip


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
    pcsort: str | None = None,
) -> list[Path]:
    """benchmark_report.csv (or .json); for counter reports, benchmark_<type>_report.csv (or .json); for
    -pcsort, benchmark_sorted_report.csv (or .json), as benchmark_app writes them.

    Takes the folder (made if missing), one of REPORT_TYPES, the (key, value) pairs of the three sections
    (command line parameters: a flag given as True is written as benchmark_app writes a flag, ""), the
    counters (each request's for detailed_counters, their average for average_counters) and the -pcsort
    mode, whose report holds the last request's counters sorted, as benchmark_app's does (any report type,
    no_counters too). Returns the paths written. Raises HeteroError if a file cannot be written, after
    removing those already written: the reports come as a set.
    """
    out_dir = Path(folder)
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        written.append(_write_summary(out_dir, json_stats, parameters, configuration, results))
        if report_type in ("average_counters", "detailed_counters"):
            groups = [list(average)] if report_type == "average_counters" else [list(r) for r in per_request]
            written.append(_write_counters(out_dir, report_type, json_stats, groups))
        if pcsort and per_request:
            written.append(_write_sorted(out_dir, json_stats, per_request[-1], pcsort))
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
        doc = {
            "cmd_options": {k: _option_value(v) for k, v in parameters},
            "configuration_setup": {k: _json_value(v) for k, v in configuration},
            "execution_results": {k: _json_value(v) for k, v in results},
        }
        return _json_file(out_dir / "benchmark_report.json", doc)
    sections = (
        ("Command line parameters", [(k, _option_value(v)) for k, v in parameters]),
        ("Configuration setup", configuration),
        ("Execution results", results),
    )
    blocks = [[title, *(f"{k};{_csv_value(v)}" for k, v in pairs)] for title, pairs in sections]
    return _text_file(out_dir / "benchmark_report.csv", blocks)


def _write_counters(
    out_dir: Path, report_type: str, json_stats: bool, groups: Sequence[Sequence[ProfilingInfo]]
) -> Path:
    """benchmark_<report_type>_report.json or .csv: one table (or JSON group) per group of counters."""
    path = out_dir / f"benchmark_{report_type}_report.{'json' if json_stats else 'csv'}"
    if json_stats:
        if report_type == "average_counters":
            doc: dict[str, Any] = {"report_type": "average", "avg_performance": counters_json(groups[0])}
        else:
            doc = {"report_type": "detailed", "detailed_performance": [counters_json(g) for g in groups]}
        return _json_file(path, doc)
    return _text_file(path, [[_COUNTERS_HEADER, *(";".join(row) for row in counter_rows(g))] for g in groups])


def _write_sorted(out_dir: Path, json_stats: bool, infos: Sequence[ProfilingInfo], mode: str) -> Path:
    """benchmark_sorted_report.csv or .json: the -pcsort lines of one request's counters.

    The CSV is byte for byte benchmark_app's layout (Python's csv module, ',' and CRLF; its header's last
    field is "proportion (%)" with a line break inside, quoted, as benchmark_app writes it; totals in ms with
    2 decimals after a blank line); the JSON is {"report_type": "sorted", "avg_performance": {...}}.
    """
    path = out_dir / f"benchmark_sorted_report.{'json' if json_stats else 'csv'}"
    if json_stats:
        doc = {
            "report_type": "sorted",
            "avg_performance": counters_json(sorted_rows(infos, mode), proportion=True),
        }
        return _json_file(path, doc)
    rows, total, total_cpu = sorted_report_rows(infos, mode)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SORTED_HEADER)
        writer.writerows(rows)
        f.write("\n")
        writer.writerow([f"Total time: {total / 1000:.2f} milliseconds"])
        writer.writerow([f"Total CPU time: {total_cpu / 1000:.2f} milliseconds"])
        f.write("\n\n")
    return path


def _json_file(path: Path, doc: Any) -> Path:
    """Write ``doc`` to ``path`` as benchmark_app writes its JSON reports (indented by 4); returns ``path``."""
    path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
    return path


def _text_file(path: Path, blocks: Sequence[Sequence[str]]) -> Path:
    """Write ``blocks`` of lines to ``path``, each followed by a blank line, as the CSV reports' sections
    are; returns ``path``."""
    lines = [line for block in blocks for line in (*block, "")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _csv_value(value: Any) -> str:
    """A value on one CSV line: floats with 2 decimals, no ';' (the separator) and no line break."""
    return _text(value).replace(";", ",").replace("\n", " ")


def _text(value: Any) -> str:
    """A report value as benchmark_app writes it: floats with 2 decimals, anything else as str()."""
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(_jsonable(value))
    return str(value)


def _option_value(value: Any) -> Any:
    """A command line parameter's value as benchmark_app records it: "" for a flag given, else its text."""
    if value is True:
        return ""
    return "false" if value is False else _text(value)


def _json_value(value: Any) -> Any:
    """A value of benchmark_report.json: booleans kept (benchmark_app's inference_only), else the text
    the CSV holds (benchmark_app writes numbers as text: "4", "12.34")."""
    return value if isinstance(value, bool) or value is None else _text(value)


def _jsonable(value: Any) -> Any:
    """``value`` as JSON holds it: scalars kept, mappings and sequences converted, anything else as text."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def configuration_setup(
    compiled: CompiledModel,
    *,
    topology: str,
    api: str,
    inference_only: bool,
    batch_size: int,
    niter: int | None,
    nireq: int,
    duration_ms: int,
    precision: str = "UNSPECIFIED",
) -> list[tuple[str, Any]]:
    """The "Configuration setup" section (configuration_setup in JSON): benchmark_app's keys, then ours.

    Takes the compiled model and the run's settings: topology (the model's name), api ("sync" or
    "async"), inference_only, the batch size, the iterations (None or 0 when only a time limit applies),
    the infer requests, the time limit in ms (0 without one) and the inference precision. Returns
    (key, value) pairs: topology, target device, API, inference_only, precision, batch size, number of
    iterations, number of parallel infer requests, duration (ms), "number of <DEVICE> streams" for each
    device with streams set, as benchmark_app writes them; then EXECUTION_DEVICES,
    HETERO_NUMBER_OF_SUBMODELS, PERFORMANCE_HINT and each device's configuration as "<DEVICE>: <KEY>".
    """
    rows: list[tuple[str, Any]] = [
        ("topology", topology),
        ("target device", compiled.device_name),
        ("API", api),
        ("inference_only", inference_only),
        ("precision", precision),
        ("batch size", str(batch_size)),
        ("number of iterations", str(niter or 0)),
        ("number of parallel infer requests", str(nireq)),
        ("duration (ms)", str(duration_ms)),
    ]
    document = config_document(compiled)
    for device, values in document.items():
        rows += [
            (f"number of {device} streams", str(v)) for k, v in values.items() if k.upper() == "NUM_STREAMS"
        ]
    rows += [
        ("EXECUTION_DEVICES", ",".join(compiled.execution_devices)),
        ("HETERO_NUMBER_OF_SUBMODELS", compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")),
        ("PERFORMANCE_HINT", str(compiled.get_property("PERFORMANCE_HINT"))),
    ]
    for device, values in document.items():
        rows += [(f"{device}: {key}", value) for key, value in values.items()]
    return rows


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
