"""The benchmark reports in benchmark_app's formats: file names, CSV sections and columns, JSON keys and
nesting, compared with the files OpenVINO's own benchmark_app writes for the same model (where the openvino
package is installed), and the compiled-model property HETERO_NUMBER_OF_SUBMODELS.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.helpers import SPLIT, needs_openvino

import hetero_cli as hc
from hetero_cli.app import benchmark as bench
from hetero_cli.app.benchmark.reports import SORTED_HEADER
from hetero_cli.runtime import ProfilingInfo
from hetero_cli.runtime.profiling import EXECUTED, NOT_RUN

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "models" / "digits.onnx"
SHAPE = "image[1,1,32,32]"
BENCHMARK_APP = shutil.which("benchmark_app", path=str(Path(sys.executable).parent)) or shutil.which(
    "benchmark_app"
)
needs_benchmark_app = pytest.mark.skipif(
    BENCHMARK_APP is None or importlib.util.find_spec("openvino") is None,
    reason="compares with OpenVINO's own benchmark_app: needs the openvino package (hetero-cli[bench])",
)
# benchmark_app's "Configuration setup" keys, in its order (OpenVINO 2026.4, main.py, step 9)
BENCHMARK_APP_CONFIGURATION = [
    "topology",
    "target device",
    "API",
    "inference_only",
    "precision",
    "batch size",
    "number of iterations",
    "number of parallel infer requests",
    "duration (ms)",
]
# the four report sets compared: each counters report type, as CSV and as JSON, all with -pcsort sort
VARIANTS = [(rt, js) for rt in ("average_counters", "detailed_counters") for js in (False, True)]
NIREQ = 2


def _command_line(report_type: str, json_stats: bool, folder: Path, device: str) -> list[tuple[str, Any]]:
    """The options of one run, as (option, value) pairs: what benchmark_app records as its parameters."""
    pairs: list[tuple[str, Any]] = [
        ("-m", str(DIGITS)),
        ("-d", device),
        ("-shape", SHAPE),
        ("-niter", 2),
        ("-nireq", NIREQ),
        ("-pcsort", "sort"),
        ("-report_type", report_type),
        ("-report_folder", str(folder)),
    ]
    return [*pairs, ("-json_stats", True)] if json_stats else pairs


@pytest.fixture(scope="module")
def benchmark_app_reports(tmp_path_factory) -> dict[tuple[str, bool], Path]:
    """The folders benchmark_app wrote its reports into, one per VARIANTS entry (run side by side)."""
    base = tmp_path_factory.mktemp("benchmark_app")
    runs = {}
    for report_type, json_stats in VARIANTS:
        folder = base / f"{report_type}-{'json' if json_stats else 'csv'}"
        folder.mkdir()
        args = []
        for key, value in _command_line(report_type, json_stats, folder, "CPU"):
            args += [key] if value is True else [key, str(value)]
        runs[report_type, json_stats] = (
            folder,
            subprocess.Popen(
                [BENCHMARK_APP, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            ),
        )
    for _, process in runs.values():
        out, _ = process.communicate(timeout=300)
        assert process.returncode == 0, out
    return {key: folder for key, (folder, _) in runs.items()}


@pytest.fixture(scope="module")
def compiled_and_counters() -> tuple[hc.CompiledModel, list[list[ProfilingInfo]]]:
    """digits.onnx compiled with counters on the split devices, and NIREQ requests' counters."""
    compiled = hc.Core().compile_model(str(DIGITS), SPLIT, {"PERF_COUNT": "YES"})
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 32)).astype(np.float32)
    runs = []
    for _ in range(NIREQ):
        request = compiled.create_infer_request()
        request.infer({"image": x})
        runs.append(request.get_profiling_info())
    return compiled, runs


def _write_ours(compiled, runs, folder: Path, report_type: str, json_stats: bool) -> list[Path]:
    """Our reports for one variant, with the rows hetero benchmark gives them."""
    return bench.write_reports(
        folder,
        report_type,
        json_stats=json_stats,
        parameters=_command_line(report_type, json_stats, folder, SPLIT),
        configuration=bench.configuration_setup(
            compiled,
            topology=compiled.model.name,
            api="async",
            inference_only=True,
            batch_size=1,
            niter=2,
            nireq=NIREQ,
            duration_ms=0,
        ),
        results=[
            ("read model time (ms)", 5.678),
            ("compile model time (ms)", 31.5),
            ("first inference time (ms)", 1.25),
            ("total execution time (ms)", 0.41),
            ("total number of iterations", 2),
            ("latency (ms)", 0.06),
            ("throughput", 9815.814),
        ],
        per_request=runs,
        average=bench.average_counters(runs),
        pcsort="sort",
    )


def _shape(value: Any) -> Any:
    """A JSON document's schema: keys and nesting, a list as its first item's shape, scalars by type."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


def _within(theirs: Any, ours: Any, where: str = "") -> None:
    """Every key of ``theirs`` is in ``ours`` at the same place, with the same kind of value."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        for key, value in theirs.items():
            assert key in ours, f"{where}/{key} missing"
            _within(value, ours[key], f"{where}/{key}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and (ours or not theirs), where
        if theirs:
            _within(theirs[0], ours[0], f"{where}[0]")
    else:
        assert theirs == ours, f"{where}: {ours} where benchmark_app has {theirs}"


@needs_benchmark_app
@pytest.mark.parametrize(("report_type", "json_stats"), VARIANTS)
def test_same_files_and_json_schema_as_benchmark_app(
    benchmark_app_reports, compiled_and_counters, tmp_path, report_type, json_stats
) -> None:
    theirs = benchmark_app_reports[report_type, json_stats]
    written = _write_ours(*compiled_and_counters, tmp_path, report_type, json_stats)
    assert sorted(p.name for p in written) == sorted(p.name for p in theirs.iterdir())
    if not json_stats:
        return
    for path in written:
        mine, app = json.loads(path.read_text()), json.loads((theirs / path.name).read_text())
        if path.name == "benchmark_report.json":
            # which execution results there are is hetero benchmark's to give (it reshapes nothing: no
            # "reshape model time (ms)"); their values are text here as there
            mine.pop("execution_results")
            app.pop("execution_results")
        _within(_shape(app), _shape(mine), path.name)
        assert mine.get("report_type") == app.get("report_type"), path.name
    mine = json.loads((tmp_path / "benchmark_report.json").read_text())
    app = json.loads((theirs / "benchmark_report.json").read_text())
    assert list(mine) == list(app) == ["cmd_options", "configuration_setup", "execution_results"]
    assert list(mine["configuration_setup"])[: len(BENCHMARK_APP_CONFIGURATION)] == list(
        app["configuration_setup"]
    )
    assert list(app["configuration_setup"]) == BENCHMARK_APP_CONFIGURATION
    assert set(mine["cmd_options"]) == set(app["cmd_options"])
    for key in ("-shape", "-niter", "-nireq", "-pcsort", "-report_type", "-json_stats"):
        assert mine["cmd_options"][key] == app["cmd_options"][key], key
    assert all(isinstance(v, str) for v in mine["execution_results"].values())
    for key in ("API", "inference_only", "precision", "batch size", "number of iterations"):
        assert mine["configuration_setup"][key] == app["configuration_setup"][key], key


def _sections(path: Path) -> list[tuple[str, list[str]]]:
    """benchmark_report.csv's sections: (title, [keys]) in order."""
    sections: list[tuple[str, list[str]]] = []
    for block in path.read_text().split("\n\n"):
        lines = block.strip("\n").splitlines()
        if lines:
            sections.append((lines[0], [line.split(";")[0] for line in lines[1:]]))
    return sections


def _counter_tables(path: Path) -> list[list[list[str]]]:
    """A CSV counter report's tables, each a list of ';'-split lines (header first, Total last)."""
    return [
        [line.split(";") for line in block.splitlines()] for block in path.read_text().split("\n\n") if block
    ]


def _sorted_template(path: Path) -> tuple[bytes, int, bytes]:
    """benchmark_sorted_report.csv as a layout: its header's bytes, the row count, and what follows the
    rows with each number as '#'."""
    raw = path.read_bytes()
    header_end = raw.index(b'"\r\n') + 3
    rows = list(csv.reader(raw[header_end:].decode().splitlines()))
    count = sum(1 for r in rows if len(r) == len(SORTED_HEADER))
    after = raw[raw.index(b"\nTotal time") :]
    return raw[:header_end], count, re.sub(rb"\d+", b"#", after)


@needs_benchmark_app
@pytest.mark.parametrize("report_type", ["average_counters", "detailed_counters"])
def test_same_csv_sections_and_columns_as_benchmark_app(
    benchmark_app_reports, compiled_and_counters, tmp_path, report_type
) -> None:
    theirs = benchmark_app_reports[report_type, False]
    _write_ours(*compiled_and_counters, tmp_path, report_type, False)
    mine, app = _sections(tmp_path / "benchmark_report.csv"), _sections(theirs / "benchmark_report.csv")
    assert [title for title, _ in mine] == [title for title, _ in app]
    assert [title for title, _ in app] == [
        "Command line parameters",
        "Configuration setup",
        "Execution results",
    ]
    assert mine[0][1] == app[0][1]
    assert mine[1][1][: len(BENCHMARK_APP_CONFIGURATION)] == app[1][1] == BENCHMARK_APP_CONFIGURATION
    name = f"benchmark_{report_type}_report.csv"
    mine_tables, app_tables = _counter_tables(tmp_path / name), _counter_tables(theirs / name)
    assert len(mine_tables) == len(app_tables) == (1 if report_type == "average_counters" else NIREQ)
    for table, app_table in zip(mine_tables, app_tables, strict=True):
        assert table[0] == app_table[0]
        assert table[-1][:4] == app_table[-1][:4] == ["Total", "", "", ""]
        assert {len(row) for row in table} == {len(row) for row in app_table} == {6}
        assert all(re.fullmatch(r"\d+\.\d{3}", value) for row in table[1:] for value in row[4:])
    mine_sorted, app_sorted = (
        _sorted_template(tmp_path / "benchmark_sorted_report.csv"),
        _sorted_template(theirs / "benchmark_sorted_report.csv"),
    )
    assert mine_sorted[0] == app_sorted[0]
    assert mine_sorted[1] == len(compiled_and_counters[1][-1])
    assert mine_sorted[2] == app_sorted[2]


def _infos(real: list[int], subgraph: int = 1) -> list[ProfilingInfo]:
    return [
        ProfilingInfo(f"n{k}", "Relu", "CPUExecutionProvider", EXECUTED if us else NOT_RUN, us, us, subgraph)
        for k, us in enumerate(real)
    ]


def _write(tmp_path: Path, report_type: str, json_stats: bool, **kwargs: Any) -> list[Path]:
    return bench.write_reports(
        tmp_path,
        report_type,
        json_stats=json_stats,
        parameters=[("-m", "m.onnx"), ("-pc", True), ("-niter", 4)],
        configuration=[("API", "sync"), ("inference_only", True), ("number of iterations", "4")],
        results=[("throughput", 123.456), ("total number of iterations", 4)],
        **kwargs,
    )


def test_json_reports_in_benchmark_apps_schema(tmp_path) -> None:
    runs = [_infos([30, 10, 0]), _infos([10, 30, 0])]
    _write(tmp_path, "average_counters", True, per_request=runs, average=bench.average_counters(runs))
    doc = json.loads((tmp_path / "benchmark_average_counters_report.json").read_text())
    assert doc["report_type"] == "average"
    group = doc["avg_performance"]
    assert [n["name"] for n in group["nodes"]] == ["subgraph1: n0", "subgraph1: n1", "subgraph1: n2"]
    assert group["nodes"][0] == {
        "name": "subgraph1: n0",
        "node_type": "Relu",
        "status": "EXECUTED",
        "real_time": "0.020",
        "cpu_time": "0.020",
        "exec_type": "CPUExecutionProvider",
        "subgraph": 1,
        "node_name": "n0",
    }
    assert (group["total_real_time"], group["total_cpu_time"]) == ("0.040", "0.040")
    summary = json.loads((tmp_path / "benchmark_report.json").read_text())
    assert summary == {
        "cmd_options": {"-m": "m.onnx", "-pc": "", "-niter": "4"},
        "configuration_setup": {"API": "sync", "inference_only": True, "number of iterations": "4"},
        "execution_results": {"throughput": "123.46", "total number of iterations": "4"},
    }
    _write(tmp_path, "detailed_counters", True, per_request=runs)
    detailed = json.loads((tmp_path / "benchmark_detailed_counters_report.json").read_text())
    assert detailed["report_type"] == "detailed"
    assert [g["total_real_time"] for g in detailed["detailed_performance"]] == ["0.040", "0.040"]


def test_the_sorted_report_holds_the_last_requests_counters_sorted(tmp_path) -> None:
    runs = [_infos([30, 10, 0]), _infos([10, 50, 0])]
    written = _write(tmp_path, "no_counters", False, per_request=runs, pcsort="simple_sort")
    assert [p.name for p in written] == ["benchmark_report.csv", "benchmark_sorted_report.csv"]
    text = (tmp_path / "benchmark_sorted_report.csv").read_bytes().decode()
    assert text == (
        'layerName,execStatus,layerType,execType,realTime (ms),cpuTime (ms),"proportion (%)\n"\r\n'
        "subgraph1: n1,EXECUTED,Relu,CPUExecutionProvider,0.050,0.050,83.33%\r\n"
        "subgraph1: n0,EXECUTED,Relu,CPUExecutionProvider,0.010,0.010,16.67%\r\n"
        "\nTotal time: 0.06 milliseconds\r\nTotal CPU time: 0.06 milliseconds\r\n\n\n"
    )
    _write(tmp_path, "no_counters", True, per_request=runs, pcsort="sort")
    doc = json.loads((tmp_path / "benchmark_sorted_report.json").read_text())
    assert doc["report_type"] == "sorted"
    assert [(n["name"], n["%"]) for n in doc["avg_performance"]["nodes"]] == [
        ("subgraph1: n1", "83.33%"),
        ("subgraph1: n0", "16.67%"),
        ("subgraph1: n2", "0.00%"),
    ]
    written = _write(tmp_path / "plain", "average_counters", False, per_request=runs, average=runs[0])
    assert "benchmark_sorted_report.csv" not in [p.name for p in written]


def test_csv_counter_report_as_benchmark_app_writes_it(tmp_path) -> None:
    runs = [_infos([30, 10]), _infos([10, 30])]
    _write(tmp_path, "detailed_counters", False, per_request=runs)
    assert (tmp_path / "benchmark_detailed_counters_report.csv").read_text() == (
        "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)\n"
        "subgraph1: n0;EXECUTED;Relu;CPUExecutionProvider;0.030;0.030\n"
        "subgraph1: n1;EXECUTED;Relu;CPUExecutionProvider;0.010;0.010\n"
        "Total;;;;0.040;0.040\n"
        "\n"
        "layerName;execStatus;layerType;execType;realTime (ms);cpuTime (ms)\n"
        "subgraph1: n0;EXECUTED;Relu;CPUExecutionProvider;0.010;0.010\n"
        "subgraph1: n1;EXECUTED;Relu;CPUExecutionProvider;0.030;0.030\n"
        "Total;;;;0.040;0.040\n"
        "\n"
    )
    assert (tmp_path / "benchmark_report.csv").read_text() == (
        "Command line parameters\n-m;m.onnx\n-pc;\n-niter;4\n\n"
        "Configuration setup\nAPI;sync\ninference_only;True\nnumber of iterations;4\n\n"
        "Execution results\nthroughput;123.46\ntotal number of iterations;4\n\n"
    )


def test_hetero_number_of_submodels_answers_as_in_openvino() -> None:
    compiled = hc.Core().compile_model(str(DIGITS), SPLIT)
    count = compiled.get_property("HETERO_NUMBER_OF_SUBMODELS")
    assert isinstance(count, int) and count == len(compiled.subgraphs)
    assert compiled.get_property("NUMBER_OF_SUBGRAPHS") == count
    assert {"HETERO_NUMBER_OF_SUBMODELS", "NUMBER_OF_SUBGRAPHS"} <= set(
        compiled.get_property("SUPPORTED_PROPERTIES")
    )
    rows = dict(
        bench.configuration_setup(
            compiled,
            topology="digits",
            api="sync",
            inference_only=True,
            batch_size=1,
            niter=None,
            nireq=1,
            duration_ms=10000,
        )
    )
    assert list(rows)[: len(BENCHMARK_APP_CONFIGURATION)] == BENCHMARK_APP_CONFIGURATION
    assert rows["HETERO_NUMBER_OF_SUBMODELS"] == count
    assert (rows["number of iterations"], rows["duration (ms)"], rows["target device"]) == (
        "0",
        "10000",
        SPLIT,
    )


@needs_openvino
def test_openvino_streams_are_reported_as_benchmark_app_reports_streams() -> None:
    compiled = hc.Core().compile_model(str(DIGITS), "HETERO:OPENVINO,CPU", {"OPENVINO": {"num_streams": 2}})
    rows = dict(
        bench.configuration_setup(
            compiled,
            topology="digits",
            api="async",
            inference_only=True,
            batch_size=1,
            niter=8,
            nireq=2,
            duration_ms=0,
        )
    )
    assert rows["number of OPENVINO streams"] == "2"
