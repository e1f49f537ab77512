"""Profiling: per-subgraph performance counters in the documented HETERO ``-pc`` format.

    subgraph1: 1. input transfer to OPENVINO:EXECUTED         layerType:          realTime: 12    cpu: 12   execType: ...
    subgraph2: prob:              EXECUTED                      layerType: Softmax  realTime: 10    cpu: 10   execType: ...
    Total time: 4212 microseconds

Counters come from ONNX Runtime's own profiler, switched on per session only when asked (PERF_COUNT):
kernel EPs (CPU, CUDA) give one line per node; EPs that compile their subgraph into one fused kernel
(OpenVINO, TensorRT) give numbered stage lines measured from the profiler's timestamps.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import threading
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..graph import Model
    from .compiled_subgraph import CompiledSubgraph

EXECUTED = "EXECUTED"
NOT_RUN = "NOT_RUN"
OPTIMIZED_OUT = "OPTIMIZED_OUT"
FUSED_EPS = frozenset({"OpenVINOExecutionProvider", "TensorrtExecutionProvider"})
ASYNC_EPS = frozenset({"CUDAExecutionProvider"})

# a profiled subgraph run: the subgraph (as compiled then), the thread, its start and end (microseconds)
Window = tuple["CompiledSubgraph", int, float, float]


@dataclass(frozen=True)
class ProfilingInfo:
    """One counter line: what ran, its status, and its real and CPU time in microseconds."""

    node_name: str
    node_type: str
    exec_type: str
    status: str
    real_time_us: int
    cpu_time_us: int
    subgraph: int

    @property
    def real_time(self) -> timedelta:
        """Real (wall) time, as OpenVINO's ProfilingInfo gives it."""
        return timedelta(microseconds=self.real_time_us)

    @property
    def cpu_time(self) -> timedelta:
        """CPU time, as OpenVINO's ProfilingInfo gives it."""
        return timedelta(microseconds=self.cpu_time_us)


@dataclass(frozen=True)
class NodeEvent:
    """One kernel from ORT's trace: node name, op type, EP, absolute start and duration (microseconds)."""

    name: str
    op_type: str
    provider: str
    start_us: float
    dur_us: int


@dataclass(frozen=True)
class Run:
    """One session run from ORT's trace: its window (absolute microseconds), thread and kernels."""

    tid: int
    start_us: float
    end_us: float
    nodes: tuple[NodeEvent, ...]


@dataclass
class SessionProfile:
    """The profiler of one subgraph session: ORT's trace of every run the session makes, ended once, when
    its counters are first read (``flush``), and kept as runs; the session is never made again for it.

    ONNX Runtime profiles a session from its creation until ``end_profiling``, and has no way to start
    again: runs after the first flush have no counters (``ended``). Safe with several threads:
    ``before_run`` / ``after_run`` bracket each run, and the flush waits for the runs still in flight, so
    the trace is only ended once every run it holds has finished (their counters stay findable).
    """

    session: Any
    runs: list[Run] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    ended: bool = False
    # when the trace was ended (absolute microseconds): no run after it is in it
    ended_us: float = float("inf")
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0

    def __post_init__(self) -> None:
        self.idle = threading.Condition(self.lock)

    def before_run(self) -> Any:
        """The session to run (its own, always)."""
        with self.lock:
            self.in_flight += 1
        return self.session

    def after_run(self, session: Any) -> None:
        """Mark one run on ``session`` (as returned by before_run) finished, failed or not."""
        with self.lock:
            self.in_flight -= 1
            self.idle.notify_all()

    def flush(self) -> None:
        """End ORT's trace of the session, once, and keep its runs; the trace file is removed. Later
        calls (another thread's too, once the first is done) find it ended."""
        with self.lock:
            if self.ended:
                return
            self.ended = True
            while self.in_flight:
                self.idle.wait()
            self.ended_us = time.time_ns() / 1e3
            start_ns = self.session.get_profiling_start_time_ns()
            path = self.session.end_profiling()
            if path:
                try:
                    self.runs = sorted(parse_trace(path, start_ns), key=lambda r: r.start_us)
                    self.starts = [r.start_us for r in self.runs]
                finally:
                    Path(path).unlink(missing_ok=True)

    def find(self, tid: int, start_us: float, end_us: float) -> Run | None:
        """The run made between ``start_us`` and ``end_us`` (absolute microseconds), this thread's first."""
        slack = 1000.0
        if start_us > self.ended_us:  # made after the trace ended: ORT profiled it no more
            return None
        with self.lock:
            runs, starts = list(self.runs), list(self.starts)
        k = bisect.bisect_left(starts, start_us - slack)
        best = None
        while k < len(runs) and runs[k].start_us <= end_us + slack:
            run = runs[k]
            if run.end_us <= end_us + slack:
                if run.tid == tid:
                    return run
                best = best or run
            k += 1
        return best


def parse_trace(path: str | os.PathLike[str], start_ns: int) -> list[Run]:
    """Runs of an ORT Chrome-trace profile, with absolute timestamps (microseconds since the epoch).

    Linear after sorting: a thread's runs do not overlap, so each thread's kernels are walked once.
    """
    events = json.loads(Path(path).read_text(encoding="utf-8"))
    base = start_ns / 1000.0
    runs: dict[Any, list[dict[str, Any]]] = {}
    kernels: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.setdefault(e.get("tid"), []).append(e)
        elif e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            kernels.setdefault(e.get("tid"), []).append(e)
    out = []
    for tid, thread_runs in runs.items():
        nodes = sorted(kernels.get(tid, []), key=lambda e: e["ts"])
        k = 0
        for r in sorted(thread_runs, key=lambda e: e["ts"]):
            lo, hi = r["ts"], r["ts"] + r["dur"]
            while k < len(nodes) and nodes[k]["ts"] < lo:
                k += 1
            inside = []
            while k < len(nodes) and nodes[k]["ts"] + nodes[k]["dur"] <= hi:
                n = nodes[k]
                args = n.get("args", {})
                inside.append(
                    NodeEvent(
                        str(n["name"])[: -len("_kernel_time")],
                        str(args.get("op_name", "")),
                        str(args.get("provider", "")),
                        base + n["ts"],
                        int(n["dur"]),
                    )
                )
                k += 1
            out.append(Run(int(tid or 0), base + lo, base + hi, tuple(inside)))
    out.sort(key=lambda r: r.start_us)
    return out


def inference_counters(
    model: Model, model_outputs: Collection[str], windows: Iterable[Window]
) -> list[ProfilingInfo]:
    """Counters of one inference of a compiled ``model`` (whose outputs are ``model_outputs``), subgraph by
    subgraph in the order ``windows`` (its profiled subgraphs' runs) lists them; a run the profiler's
    trace does not show gives none."""
    infos: list[ProfilingInfo] = []
    for sub, tid, start, end in windows:
        if sub.profiler is None:
            continue
        sub.profiler.flush()
        run = sub.profiler.find(tid, start, end)
        if run is None:
            continue
        outputs = [o for o in sub.outputs if o in model_outputs]
        nodes = {n: model.node(n).get_type_name() for n in sub.nodes}
        infos += subgraph_counters(sub.index + 1, sub.device, sub.target.ep, sub.on_host, nodes, run, outputs)
    return infos


def subgraph_counters(
    number: int,
    device: str,
    ep: str,
    device_on_host: bool,
    nodes: Mapping[str, str],
    run: Run,
    outputs: Iterable[str],
) -> list[ProfilingInfo]:
    """Counter lines of one subgraph run: per node (kernel EPs) or numbered stages (fused EPs); ``nodes``
    ({name: op type}) are the subgraph's, those the run shows no kernel for being OPTIMIZED_OUT.

    Where ORT ran part of a fused EP's subgraph on another EP, the lines follow the run's order: the EP's
    parts are stages of their own, the other EP's kernels sit between them, and no microsecond is counted
    twice (the transfer stages exclude those kernels' time): ``run`` holds one thread's kernels
    (parse_trace), which never overlap.
    """
    events = sorted(run.nodes, key=lambda e: e.start_us)
    fused = [e for e in events if e.provider == ep and ep in FUSED_EPS]
    others = [e for e in events if not (e.provider == ep and ep in FUSED_EPS)]
    if fused:
        lines = _fused_run(number, device, ep, device_on_host, run, events, others)
    else:
        lines = [_node_line(e, number) for e in others]
    if ep in ASYNC_EPS:
        launches = sum(e.dur_us for e in others)
        total = round(run.end_us - run.start_us)
        lines.append(
            ProfilingInfo(
                f"{device} execute time (synchronised run)", "", ep, EXECUTED, total, launches, number
            )
        )
    if not fused:
        seen = {e.name for e in others}
        lines += [
            ProfilingInfo(name, op_type, ep, OPTIMIZED_OUT, 0, 0, number)
            for name, op_type in nodes.items()
            if name not in seen
        ]
    lines += [ProfilingInfo(f"out_{out}", "Output", "unknown", NOT_RUN, 0, 0, number) for out in outputs]
    return lines


def _fused_run(
    number: int,
    device: str,
    ep: str,
    device_on_host: bool,
    run: Run,
    events: Sequence[NodeEvent],
    others: Sequence[NodeEvent],
) -> list[ProfilingInfo]:
    """A fused EP's run as numbered stages (input transfer, each part the EP ran, output transfer), with
    the kernels of other EPs in their place between them; transfers exclude those kernels' time."""
    fused = [e for e in events if e.provider == ep]
    stage = itertools.count(1)

    def stage_line(label: str, us: float, on_device: bool) -> ProfilingInfo:
        us = max(0, round(us))
        cpu = us if device_on_host or not on_device else 0
        return ProfilingInfo(f"{next(stage)}. {label}", "", ep, EXECUTED, us, cpu, number)

    first, last = fused[0].start_us, max(e.start_us + e.dur_us for e in fused)
    before = [e for e in others if e.start_us < first]
    after = [e for e in others if e.start_us >= last]
    lines = [_node_line(e, number) for e in before]
    spent_before = sum(e.dur_us for e in before)
    lines.append(stage_line(f"input transfer to {device}", first - run.start_us - spent_before, False))
    part = itertools.count(1)
    for e in events:
        if e.provider == ep:
            label = f" (part {next(part)} of {len(fused)})" if len(fused) > 1 else ""
            lines.append(stage_line(f"{device} execute time{label}", e.dur_us, True))
        elif first <= e.start_us < last:
            lines.append(_node_line(e, number))
    spent_after = sum(e.dur_us for e in after)
    lines.append(stage_line(f"output transfer from {device}", run.end_us - last - spent_after, False))
    return lines + [_node_line(e, number) for e in after]


def _node_line(e: NodeEvent, number: int) -> ProfilingInfo:
    """A kernel's line; an async EP's kernel only launches work, its time on the device is not its own."""
    launch_only = e.provider in ASYNC_EPS
    return ProfilingInfo(
        e.name,
        e.op_type,
        e.provider + (" (launch)" if launch_only else ""),
        EXECUTED,
        0 if launch_only else e.dur_us,
        e.dur_us,
        number,
    )


#: a name longer than this does not widen the name column (its own line shifts, the others stay aligned)
NAME_WIDTH_CAP = 100
_STATUS_WIDTH = max(len(EXECUTED), len(NOT_RUN), len(OPTIMIZED_OUT))


@dataclass(frozen=True)
class Span:
    """One subgraph run of an inference: its number (``subgraph<N>``), device, and start and end in
    microseconds from the inference's first subgraph run."""

    subgraph: int
    device: str
    start_us: float
    end_us: float


@dataclass(frozen=True)
class Timeline:
    """When the profiled subgraphs of one inference ran: their ``spans`` in the order they started, and
    ``wall_us``, from the first one's start to the last one's end. Where subgraphs ran side by side
    (HETERO_CONCURRENCY), ``busy_us``, the sum of their times, exceeds the wall time."""

    spans: tuple[Span, ...]

    @property
    def wall_us(self) -> float:
        """Microseconds from the first subgraph run's start to the last one's end."""
        return max((s.end_us for s in self.spans), default=0.0)

    @property
    def busy_us(self) -> float:
        """The sum of the subgraph runs' times, in microseconds."""
        return sum(s.end_us - s.start_us for s in self.spans)

    def together(self) -> list[tuple[int, int]]:
        """Pairs of subgraph numbers whose runs overlapped in time."""
        return [
            (min(a.subgraph, b.subgraph), max(a.subgraph, b.subgraph))
            for k, a in enumerate(self.spans)
            for b in self.spans[k + 1 :]
            if b.start_us < a.end_us and a.start_us < b.end_us
        ]

    def lines(self) -> list[str]:
        """What -pc prints of it: a table of each run's start and end, then the wall time against the sum."""
        rows = [["subgraph", "device", "start (us)", "end (us)", "time (us)"]]
        for s in self.spans:
            rows.append(
                [
                    f"subgraph{s.subgraph}",
                    s.device,
                    f"{s.start_us:.0f}",
                    f"{s.end_us:.0f}",
                    f"{s.end_us - s.start_us:.0f}",
                ]
            )
        pairs = ", ".join(f"subgraph{a}+subgraph{b}" for a, b in self.together()) or "none"
        wall = self.wall_us
        ratio = f" ({self.busy_us / wall:.2f}x the wall time)" if wall else ""
        return [
            "Timeline (from the first subgraph run's start):",
            *_table(rows, names=2),
            f"  wall {wall:.0f} us, subgraphs' sum {self.busy_us:.0f} us{ratio}; ran side by side: {pairs}",
        ]


def inference_timeline(windows: Iterable[Window]) -> Timeline:
    """The Timeline of one inference from ``windows`` (its profiled subgraphs' runs)."""
    runs = sorted(windows, key=lambda w: w[2])
    if not runs:
        return Timeline(())
    origin = runs[0][2]
    return Timeline(
        tuple(Span(sub.index + 1, sub.device, start - origin, end - origin) for sub, _, start, end in runs)
    )


def format_counters(infos: Sequence[ProfilingInfo]) -> str:
    """The documented -pc text: one line per counter, then ``Total time: <us> microseconds``.

    Takes the counters (ProfilingInfo, times in µs); returns the text. Each column is as wide as its
    longest value (never narrower than the documentation's example), so long node names and op types keep
    the columns aligned; only a name over NAME_WIDTH_CAP characters shifts its own line.
    """
    if not infos:
        return "Total time: 0 microseconds"
    prefix_w = max(len(f"subgraph{i.subgraph}:") for i in infos) + 1
    name_w = max([19, *(len(i.node_name) + 1 for i in infos if len(i.node_name) < NAME_WIDTH_CAP)])
    type_w = max([8, *(len(i.node_type) for i in infos if len(i.node_type) < NAME_WIDTH_CAP)])
    real_w = max([5, *(len(str(i.real_time_us)) for i in infos)])
    cpu_w = max([4, *(len(str(i.cpu_time_us)) for i in infos)])
    lines = []
    for i in infos:
        line = (
            f"{f'subgraph{i.subgraph}:':<{prefix_w}}{i.node_name + ':':<{name_w}}{i.status:<{_STATUS_WIDTH}} "
            f"layerType: {i.node_type:<{type_w}} realTime: {i.real_time_us:<{real_w}} "
            f"cpu: {i.cpu_time_us:<{cpu_w}} execType: {i.exec_type}"
        )
        lines.append(line.rstrip())
    lines.append(f"Total time: {sum(i.real_time_us for i in infos)} microseconds")
    return "\n".join(lines)


@dataclass(frozen=True)
class SubgraphSummary:
    """What the counter tables need of one compiled subgraph: its number (from 1, as the counters'
    ``subgraph<N>``), its device, the EP that runs it and how many of the model's nodes it holds."""

    number: int
    device: str
    ep: str
    nodes: int


def subgraph_summaries(subgraphs: Iterable[CompiledSubgraph]) -> list[SubgraphSummary]:
    """One SubgraphSummary per compiled subgraph (a compiled model's ``subgraphs``, in execution order),
    for counter_tables."""
    return [SubgraphSummary(s.index + 1, s.device, s.target.ep, len(s.nodes)) for s in subgraphs]


def counter_tables(
    infos: Sequence[ProfilingInfo],
    subgraphs: Sequence[SubgraphSummary],
    *,
    unit: str = "us",
    timeline: Timeline | None = None,
) -> str:
    """What -pc prints after the counter lines: a note per fused subgraph, then "Per subgraph" and
    "Per device" tables of real time and share.

    Takes the counters, the compiled model's subgraphs (subgraph_summaries) and the time unit, "us" (as
    -pc's lines: whole microseconds) or "ms" (as -pcsort's: milliseconds, 3 decimals). Returns the text.
    A subgraph of a fused EP (OpenVINO, TensorRT: the whole subgraph is one kernel) gets one line saying
    why its nodes show as a few stage lines; subgraphs with no counter line (their device not profiled)
    are named on one line rather than shown as taking no time; with a ``timeline`` of more than one
    subgraph run (InferRequest.get_timeline), when each ran and the wall time against their sum.
    Raises ValueError for another unit.
    """
    if unit not in ("us", "ms"):
        raise ValueError(f"unit must be 'us' or 'ms', not {unit!r}")
    by_number = {s.number: s for s in subgraphs}
    real: dict[int, int] = {}
    for i in infos:
        real[i.subgraph] = real.get(i.subgraph, 0) + i.real_time_us
    total = sum(real.values())
    lines = []
    for number in real:
        sub = by_number.get(number)
        if sub and sub.ep in FUSED_EPS and any(i.exec_type == sub.ep for i in infos if i.subgraph == number):
            lines.append(
                f"subgraph{number}: {sub.device} ({sub.ep}) compiles its {sub.nodes} node(s) into one kernel, "
                "so they show as the numbered stage lines, with no time per node"
            )
    missing = [f"subgraph{s.number} ({s.device})" for s in subgraphs if s.number not in real]
    if missing:
        lines.append(f"Not profiled, no counters: {', '.join(missing)}")
    time_head = f"realTime ({unit})"
    rows = [["subgraph", "device", "nodes", time_head, "share %"]]
    devices: dict[str, list[int]] = {}  # device -> [subgraphs, nodes, real time]
    for number, us in real.items():
        sub = by_number.get(number)
        device, nodes = (sub.device, sub.nodes) if sub else ("-", 0)
        rows.append(
            [f"subgraph{number}", device, str(nodes) if sub else "-", _time(us, unit), _share(us, total)]
        )
        tally = devices.setdefault(device, [0, 0, 0])
        tally[0] += 1
        tally[1] += nodes
        tally[2] += us
    lines += ["Per subgraph:", *_table(rows, names=2)]
    rows = [["device", "subgraphs", "nodes", time_head, "share %"]]
    for device, (count, nodes, us) in devices.items():
        rows.append([device, str(count), str(nodes), _time(us, unit), _share(us, total)])
    lines += ["Per device:", *_table(rows, names=1)]
    if timeline is not None and len(timeline.spans) > 1:
        lines += timeline.lines()
    return "\n".join(lines)


def _time(us: int, unit: str) -> str:
    """A time in the tables' unit: whole microseconds, or milliseconds with 3 decimals."""
    return str(us) if unit == "us" else f"{us / 1000:.3f}"


def _share(us: int, total: int) -> str:
    """``us`` as a percentage of ``total``, 2 decimals (0.00 when nothing was timed)."""
    return f"{us * 100 / total:.2f}" if total else "0.00"


def _table(rows: Sequence[Sequence[str]], names: int) -> list[str]:
    """Rows as aligned lines, indented by 2: the first ``names`` columns left-aligned, the numbers right."""
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [
            c.ljust(w) if k < names else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  " + "  ".join(cells))
    return out
