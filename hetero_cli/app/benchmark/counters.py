"""Performance counters as benchmark_app shows and writes them: averaged over requests, the -pcsort table,
and the rows of the counter reports (CSV and JSON, benchmark_app's columns and keys).

    average = average_counters([request.get_profiling_info() for request in requests])
    print(sorted_counters(average, "sort"))

Names carry the subgraph as -pc prints it (``subgraph2: 2. OPENVINO execute time``): one name can occur in
several subgraphs. Statuses are OpenVINO's names (EXECUTED, NOT_RUN, OPTIMIZED_OUT), as -pc and the C++
benchmark_app write them (the Python benchmark_app writes its enum's text, ``Status.EXECUTED``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...runtime import NOT_RUN, ProfilingInfo

SORT_MODES = ("sort", "no_sort", "simple_sort")
_NAME_WIDTH = 20  # benchmark_app's max_print_length: longer names and op types are cut to 16 + "..."


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


def _cut(text: str, width: int = _NAME_WIDTH) -> str:
    """``text`` shortened as benchmark_app shortens it: 16 characters and '...' from ``width`` on."""
    return text[: width - 4] + "..." if len(text) >= width else text


def _ms(us: int) -> str:
    """Microseconds as the reports write milliseconds: 3 decimals."""
    return f"{us / 1000:.3f}"


def _share(us: int, total: int) -> float:
    """``us`` as a fraction of ``total``, rounded to 4 decimals as benchmark_app rounds it (0 when nothing
    was timed)."""
    return round(us / total, 4) if total else 0.0


def layer_name(info: ProfilingInfo) -> str:
    """A counter line's name in the tables and reports: ``subgraph<N>: <name>``, as -pc prints it."""
    return f"subgraph{info.subgraph}: {info.node_name}"


def sorted_rows(infos: Sequence[ProfilingInfo], mode: str) -> list[ProfilingInfo]:
    """The lines of a -pcsort table in benchmark_app's order: sort (by real time, longest first), no_sort
    (as measured), simple_sort (sorted, NOT_RUN lines left out). Raises ValueError for another mode."""
    if mode not in SORT_MODES:
        raise ValueError(f"-pcsort must be one of {', '.join(SORT_MODES)}, not {mode!r}")
    rows = list(infos)
    if mode in ("sort", "simple_sort"):
        rows.sort(key=lambda i: i.real_time_us, reverse=True)
    if mode == "simple_sort":
        rows = [i for i in rows if i.status != NOT_RUN]
    return rows


def sorted_counters(infos: Sequence[ProfilingInfo], mode: str) -> str:
    """benchmark_app's -pcsort table over the same lines -pc prints, in milliseconds.

    Takes the counters and the -pcsort mode (SORT_MODES); returns the table and its three total lines
    (Total time, Total CPU time, Total proportion), as benchmark_app prints them. Names (after the
    ``subgraph<N>: `` prefix) and op types are cut at 20 characters as benchmark_app cuts them; the exec
    type column is as wide as its longest value, so the columns stay aligned. Raises ValueError for an
    unknown mode.
    """
    total, total_cpu = _totals_us(infos)
    rows = sorted_rows(infos, mode)
    prefix_w = max((len(f"subgraph{i.subgraph}:") for i in rows), default=0) + 1
    exec_w = max([_NAME_WIDTH, *(len(i.exec_type) for i in rows)])
    lines = []
    for i in rows:
        pct = f"{_share(i.real_time_us, total) * 100:.2f}"
        lines.append(
            f"{f'subgraph{i.subgraph}:':<{prefix_w}}{_cut(i.node_name):<20} {i.status:<20} "
            f"layerType: {_cut(i.node_type):<20} execType: {i.exec_type:<{exec_w}} "
            f"realTime (ms): {i.real_time_us / 1000:<10.3f} cpuTime (ms): {i.cpu_time_us / 1000:<10.3f}"
            f"proportion: {(pct if pct != '0.00' else 'N/A') + '%':<8}"
        )
    lines.append(f"Total time:       {total / 1000:.3f} milliseconds")
    lines.append(f"Total CPU time:   {total_cpu / 1000:.3f} milliseconds")
    listed = sum(i.real_time_us for i in rows) / total if total else 0.0
    lines.append(f"Total proportion: {listed * 100:.2f} %")
    return "\n".join(line.rstrip() for line in lines)


def counter_rows(infos: Sequence[ProfilingInfo]) -> list[list[str]]:
    """The rows of a CSV counter report under benchmark_app's header (layerName;execStatus;layerType;
    execType;realTime (ms);cpuTime (ms)), then its ``Total`` row."""
    rows = [_row(i) for i in infos]
    total, total_cpu = _totals_us(infos)
    rows.append(["Total", "", "", "", _ms(total), _ms(total_cpu)])
    return rows


def sorted_report_rows(infos: Sequence[ProfilingInfo], mode: str) -> tuple[list[list[str]], int, int]:
    """benchmark_sorted_report.csv's rows (the -pcsort lines: name, status, type, exec type, real and CPU
    ms, proportion "12.34%") and the totals in µs. Raises ValueError for an unknown mode."""
    total = sum(i.real_time_us for i in infos)
    rows = sorted_rows(infos, mode)
    out = [[*_row(i), f"{_share(i.real_time_us, total) * 100:.2f}%"] for i in rows]
    return (out, *_totals_us(rows))


def _row(i: ProfilingInfo) -> list[str]:
    """A counter line's columns in the CSV reports: name, status, type, exec type, real and CPU ms."""
    return [layer_name(i), i.status, i.node_type, i.exec_type, _ms(i.real_time_us), _ms(i.cpu_time_us)]


def counters_json(infos: Sequence[ProfilingInfo], *, proportion: bool = False) -> dict[str, Any]:
    """A JSON counter report's group in benchmark_app's schema: {"nodes": [...], "total_real_time",
    "total_cpu_time"}.

    Each node has benchmark_app's keys (name, node_type, status, real_time, cpu_time, exec_type; times as
    text in ms with 3 decimals, as benchmark_app writes them), ``"%"`` (its share, "12.34%") when
    ``proportion`` (the sorted report), and two of its own: subgraph (the number) and node_name (the name
    without the ``subgraph<N>: `` prefix).
    """
    total, total_cpu = _totals_us(infos)
    nodes = []
    for i in infos:
        node: dict[str, Any] = {
            "name": layer_name(i),
            "node_type": i.node_type,
            "status": i.status,
            "real_time": _ms(i.real_time_us),
            "cpu_time": _ms(i.cpu_time_us),
            "exec_type": i.exec_type,
        }
        if proportion:
            node["%"] = f"{_share(i.real_time_us, total) * 100:.2f}%"
        node["subgraph"] = i.subgraph
        node["node_name"] = i.node_name
        nodes.append(node)
    return {"nodes": nodes, "total_real_time": _ms(total), "total_cpu_time": _ms(total_cpu)}
