"""The -pc text, its per-subgraph and per-device tables, and the -pcsort table, on hand-made counters.

-pc keeps the HETERO documentation's per-node format (tests/runtime/test_profiling.py reads the documented
example back) with columns as wide as their values; -pcsort is benchmark_app's sorted layout, compared
line by line with benchmark_app's own printing where the openvino package is installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from datetime import timedelta

import pytest
from support.counters import parse_counters

from hetero_cli.app.benchmark import counters as bench_counters
from hetero_cli.app.benchmark.counters import average_counters, sorted_counters, sorted_rows
from hetero_cli.runtime import SubgraphSummary, counter_tables, format_counters
from hetero_cli.runtime.profiling import (
    EXECUTED,
    NAME_WIDTH_CAP,
    NOT_RUN,
    OPTIMIZED_OUT,
    ProfilingInfo,
)

OV, CPU = "OpenVINOExecutionProvider", "CPUExecutionProvider"
HAS_OPENVINO_PACKAGE = importlib.util.find_spec("openvino") is not None
needs_openvino_package = pytest.mark.skipif(
    not HAS_OPENVINO_PACKAGE,
    reason="compares with benchmark_app's own printing: needs the openvino package (hetero-cli[bench])",
)

LONG = "backbone/stage3/block2/attention/MatMul_output_0_nchw_to_nhwc"
# a CPU subgraph, a 668-node OPENVINO subgraph shown as its stage lines, and subgraph 10 on the CPU
INFOS = [
    ProfilingInfo("sanitize_isinf", "IsInf", CPU, EXECUTED, 18, 18, 1),
    ProfilingInfo(LONG, "MatMul", CPU, EXECUTED, 40, 40, 1),
    ProfilingInfo("folded", "Identity", CPU, OPTIMIZED_OUT, 0, 0, 1),
    ProfilingInfo("1. input transfer to OPENVINO", "", OV, EXECUTED, 5, 5, 2),
    ProfilingInfo("2. OPENVINO execute time", "", OV, EXECUTED, 1920, 1920, 2),
    ProfilingInfo("3. output transfer from OPENVINO", "", OV, EXECUTED, 9, 9, 2),
    ProfilingInfo("softmax", "LayerNormalizationWithAVeryLongOpType", CPU, EXECUTED, 8, 8, 10),
    ProfilingInfo("out_probabilities", "Output", "unknown", NOT_RUN, 0, 0, 10),
]
SUBGRAPHS = [
    SubgraphSummary(1, "CPU", CPU, 3),
    SubgraphSummary(2, "OPENVINO", OV, 668),
    SubgraphSummary(3, "CPU", CPU, 4),  # not profiled: no counter line
    SubgraphSummary(10, "CPU", CPU, 2),
]


def _columns(lines: list[str], *labels: str) -> set[tuple[int, ...]]:
    """Where each label starts on each line: one tuple per distinct layout (one means aligned)."""
    return {tuple(line.index(label) for label in labels) for line in lines}


def test_pc_columns_stay_aligned_with_long_names_types_and_subgraph_numbers() -> None:
    text = format_counters(INFOS)
    lines = text.splitlines()
    assert lines[-1] == "Total time: 2000 microseconds"
    body = lines[:-1]
    assert len(_columns(body, "layerType:", "realTime:", "cpu:", "execType:")) == 1
    statuses = {re.search(r"(EXECUTED|NOT_RUN|OPTIMIZED_OUT)", line).start() for line in body}
    assert len(statuses) == 1
    # the documented shape: "subgraph<N>: <name>:<STATUS>", the longest name's colon against its status
    assert f"subgraph1:  {LONG}:EXECUTED" in text
    assert parse_counters(text) == (INFOS, 2000)


def test_pc_a_name_over_the_cap_shifts_only_its_own_line() -> None:
    huge = "n" * (NAME_WIDTH_CAP + 50)
    infos = [*INFOS[:3], ProfilingInfo(huge, "Add", CPU, EXECUTED, 3, 3, 1)]
    lines = format_counters(infos).splitlines()[:-1]
    assert len(_columns(lines[:3], "layerType:", "realTime:")) == 1
    assert lines[3].index("layerType:") > lines[0].index("layerType:")
    assert parse_counters("\n".join(lines))[0] == infos


def test_pc_of_no_counters_is_a_zero_total() -> None:
    assert format_counters([]) == "Total time: 0 microseconds"
    assert parse_counters(format_counters([])) == ([], 0)


def test_per_subgraph_and_per_device_tables() -> None:
    text = counter_tables(INFOS, SUBGRAPHS)
    lines = text.splitlines()
    sub_at, dev_at = lines.index("Per subgraph:"), lines.index("Per device:")
    per_subgraph = [line.split() for line in lines[sub_at + 1 : dev_at]]
    per_device = [line.split() for line in lines[dev_at + 1 :]]
    assert per_subgraph == [
        ["subgraph", "device", "nodes", "realTime", "(us)", "share", "%"],
        ["subgraph1", "CPU", "3", "58", "2.90"],
        ["subgraph2", "OPENVINO", "668", "1934", "96.70"],
        ["subgraph10", "CPU", "2", "8", "0.40"],
    ]
    assert per_device == [
        ["device", "subgraphs", "nodes", "realTime", "(us)", "share", "%"],
        ["CPU", "2", "5", "66", "3.30"],
        ["OPENVINO", "1", "668", "1934", "96.70"],
    ]
    # aligned: names left-aligned, numbers right-aligned, so every row ends where its header ends
    table = lines[sub_at + 1 : dev_at]
    assert all(line.startswith("  subgraph") for line in table)
    assert {len(line) for line in table} == {len(table[0])}
    assert {len(line) for line in lines[dev_at + 1 :]} == {len(lines[dev_at + 1])}


def test_a_fused_subgraph_gets_one_line_saying_its_nodes_are_one_kernel() -> None:
    text = counter_tables(INFOS, SUBGRAPHS)
    fused = [line for line in text.splitlines() if "one kernel" in line]
    assert fused == [
        "subgraph2: OPENVINO (OpenVINOExecutionProvider) compiles its 668 node(s) into one kernel, so they "
        "show as the numbered stage lines, with no time per node"
    ]
    assert "Not profiled, no counters: subgraph3 (CPU)" in text.splitlines()
    # nothing of the tables reads as a counter line or as -pc's total
    assert parse_counters(text) == ([], -1)


def test_tables_in_milliseconds_for_pcsort_and_units_checked() -> None:
    text = counter_tables(INFOS, SUBGRAPHS, unit="ms")
    assert "realTime (ms)" in text and "realTime (us)" not in text
    assert re.search(r"subgraph2 +OPENVINO +668 +1\.934 +96\.70", text)
    with pytest.raises(ValueError, match="unit"):
        counter_tables(INFOS, SUBGRAPHS, unit="s")


def test_tables_of_counters_from_a_subgraph_the_summaries_lack() -> None:
    text = counter_tables(INFOS, SUBGRAPHS[:1])
    assert re.search(r"subgraph2 +- +- +1934", text)


def test_pcsort_modes() -> None:
    assert [i.real_time_us for i in sorted_rows(INFOS, "sort")] == sorted(
        (i.real_time_us for i in INFOS), reverse=True
    )
    assert sorted_rows(INFOS, "no_sort") == INFOS
    assert all(i.status != NOT_RUN for i in sorted_rows(INFOS, "simple_sort"))
    assert len(sorted_rows(INFOS, "simple_sort")) == len(INFOS) - 1
    with pytest.raises(ValueError, match="-pcsort"):
        sorted_rows(INFOS, "random")


def test_pcsort_agrees_with_pc_line_for_line() -> None:
    """-pcsort lists the lines -pc prints (same subgraph prefix, status, times) and the same total."""
    pc, total_us = parse_counters(format_counters(INFOS))
    table = sorted_counters(INFOS, "no_sort").splitlines()
    rows = table[:-3]
    assert len(rows) == len(pc)
    for line, info in zip(rows, pc, strict=True):
        assert line.startswith(f"subgraph{info.subgraph}:")
        assert f" {info.status} " in line
        assert f"realTime (ms): {info.real_time_us / 1000:<10.3f}" in line
    assert table[-3] == f"Total time:       {total_us / 1000:.3f} milliseconds"
    assert table[-1] == "Total proportion: 100.00 %"
    # columns aligned even where exec types are longer than benchmark_app's 20 characters
    assert (
        len(_columns(rows, "layerType:", "execType:", "realTime (ms):", "cpuTime (ms):", "proportion:")) == 1
    )


def _benchmark_app_lines(infos: list[ProfilingInfo]) -> list[str]:
    """benchmark_app's own -pcsort printing (utils.print_perf_counters_sort) of the same counters, with
    OpenVINO's ProfilingInfo; its ``Status.EXECUTED`` (the enum's text) read as OpenVINO's name, EXECUTED,
    in a column of the same width."""
    from openvino import ProfilingInfo as OvInfo
    from openvino.tools.benchmark.utils import utils

    ov_infos = []
    for i in infos:
        p = OvInfo()
        p.node_name, p.node_type, p.exec_type = i.node_name, i.node_type, i.exec_type
        p.status = getattr(OvInfo.Status, i.status)
        p.real_time, p.cpu_time = (
            timedelta(microseconds=i.real_time_us),
            timedelta(microseconds=i.cpu_time_us),
        )
        ov_infos.append(p)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        utils.print_perf_counters_sort([ov_infos], sort_flag="sort")
    lines = [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]
    return [re.sub(r"Status\.(\w+)", lambda m: m[1] + " " * len("Status."), line) for line in lines]


@needs_openvino_package
def test_pcsort_is_benchmark_apps_layout_line_by_line() -> None:
    """With exec types of benchmark_app's width, each -pcsort line is benchmark_app's after the
    ``subgraph<N>: `` prefix, and the totals are its totals."""
    infos = [
        ProfilingInfo("conv1/WithoutBiases", "Convolution", "brgconv_avx512", EXECUTED, 55, 55, 1),
        ProfilingInfo("a_name_longer_than_twenty", "FullyConnected", "brgemm_avx512", EXECUTED, 17, 16, 1),
        ProfilingInfo("pool1", "MaxPool", "jit_avx512_bf16", EXECUTED, 6, 6, 1),
        ProfilingInfo("relu1", "Relu", "undef", NOT_RUN, 0, 0, 1),
    ]
    ours = sorted_counters(infos, "sort").splitlines()
    theirs = _benchmark_app_lines(infos)
    assert len(ours) == len(theirs) == len(infos) + 3
    for mine, app in zip(ours[: len(infos)], theirs[: len(infos)], strict=True):
        assert mine.startswith("subgraph1: ")
        assert mine[len("subgraph1: ") :] == app
    assert ours[len(infos) :] == theirs[len(infos) :]


def test_average_counters_keeps_lines_of_each_subgraph_apart() -> None:
    a = [ProfilingInfo("1. input transfer to OPENVINO", "", OV, EXECUTED, 10, 10, k) for k in (1, 3)]
    b = [ProfilingInfo("1. input transfer to OPENVINO", "", OV, EXECUTED, 20, 20, k) for k in (1, 3)]
    avg = average_counters([a, b])
    assert [(i.subgraph, i.real_time_us) for i in avg] == [(1, 15), (3, 15)]


def test_layer_names_carry_the_subgraph() -> None:
    assert bench_counters.layer_name(INFOS[3]) == "subgraph2: 1. input transfer to OPENVINO"
