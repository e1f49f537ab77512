"""Performance counters as benchmark_app shows them: averaged over requests, the -pcsort table, and the
rows of the counter reports.

    average = average_counters([request.get_profiling_info() for request in requests])
    print(sorted_counters(average, "sort"))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...runtime import NOT_RUN, ProfilingInfo


def average_counters(runs: Sequence[Sequence[ProfilingInfo]]) -> list[ProfilingInfo]:
    """Counters averaged over runs, line by line (same subgraph and name), in first-seen order.

    Takes each run's counters (one run per infer request); returns one ProfilingInfo per line, its times
    the sum over the runs divided by the number of runs (rounded to whole µs), its status the last run's.
    """
    order: dict[tuple[int, str], list[ProfilingInfo]] = {}
    for run in runs:
        for info in run:
            order.setdefault((info.subgraph, info.node_name), []).append(info)
    out = []
    n = max(len(runs), 1)
    for infos in order.values():
        first = infos[0]
        out.append(
            ProfilingInfo(
                first.node_name,
                first.node_type,
                first.exec_type,
                infos[-1].status,
                round(sum(i.real_time_us for i in infos) / n),
                round(sum(i.cpu_time_us for i in infos) / n),
                first.subgraph,
            )
        )
    return out


def _totals_us(infos: Sequence[ProfilingInfo]) -> tuple[int, int]:
    """The real and CPU time of every line together, in µs."""
    return sum(i.real_time_us for i in infos), sum(i.cpu_time_us for i in infos)


def _cut(text: str, width: int = 20) -> str:
    """``text`` shortened to fit a column of ``width`` characters, ending in '...' where cut."""
    return text[: width - 4] + "..." if len(text) >= width else text


def sorted_counters(infos: Sequence[ProfilingInfo], mode: str) -> str:
    """benchmark_app's -pcsort table: sort (by real time), no_sort, simple_sort (EXECUTED rows only).

    Takes the counters and the -pcsort mode; returns the table's lines and its totals as one text.
    """
    total, total_cpu = _totals_us(infos)
    rows = list(infos)
    if mode in ("sort", "simple_sort"):
        rows.sort(key=lambda i: i.real_time_us, reverse=True)
    if mode == "simple_sort":
        rows = [i for i in rows if i.status != NOT_RUN]
    lines = []
    proportion_sum = 0.0
    for i in rows:
        share = i.real_time_us / total if total else 0.0
        proportion_sum += share
        pct = f"{share * 100:.2f}"
        lines.append(
            f"subgraph{i.subgraph}: {_cut(i.node_name):<20} {i.status:<20} layerType: {_cut(i.node_type):<20} "
            f"execType: {i.exec_type:<20} realTime (ms): {i.real_time_us / 1000:<10.3f} "
            f"cpuTime (ms): {i.cpu_time_us / 1000:<10.3f}proportion: {(pct if pct != '0.00' else 'N/A') + '%':<8}"
        )
    lines.append(f"Total time:       {total / 1000:.3f} milliseconds")
    lines.append(f"Total CPU time:   {total_cpu / 1000:.3f} milliseconds")
    lines.append(f"Total proportion: {proportion_sum * 100:.2f} %")
    return "\n".join(line.rstrip() for line in lines)


def counter_rows(infos: Sequence[ProfilingInfo]) -> list[list[str]]:
    """The rows of a CSV counter report: layer name, status, type, exec type, real and CPU time (ms), then
    a Total row."""
    rows = [
        [
            f"subgraph{i.subgraph}: {i.node_name}",
            i.status,
            i.node_type,
            i.exec_type,
            f"{i.real_time_us / 1000:.3f}",
            f"{i.cpu_time_us / 1000:.3f}",
        ]
        for i in infos
    ]
    total, total_cpu = _totals_us(infos)
    rows.append(["Total", "", "", "", f"{total / 1000:.3f}", f"{total_cpu / 1000:.3f}"])
    return rows


def counters_json(infos: Sequence[ProfilingInfo]) -> dict[str, Any]:
    """A JSON counter report's group: {"nodes": [one object per line], "total_real_time", "total_cpu_time"},
    times in ms rounded to µs."""
    total, total_cpu = _totals_us(infos)
    return {
        "nodes": [
            {
                "name": f"subgraph{i.subgraph}: {i.node_name}",
                "subgraph": i.subgraph,
                "node_name": i.node_name,
                "status": i.status,
                "node_type": i.node_type,
                "exec_type": i.exec_type,
                "real_time": round(i.real_time_us / 1000, 3),
                "cpu_time": round(i.cpu_time_us / 1000, 3),
            }
            for i in infos
        ],
        "total_real_time": round(total / 1000, 3),
        "total_cpu_time": round(total_cpu / 1000, 3),
    }
