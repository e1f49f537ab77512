"""The performance targets of issues 6 and 21 (hetero tune's placement), checked against a run's results (never by timed unit tests).

Each check gives one :class:`Target`: PASS or FAIL with the measured figure next to the limit, SKIP when
the run did not measure it (a ``--quick`` run, or a section that failed), and one detail line per case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import reuse

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

LATENCY_CPU = 1.02
LATENCY_OV = 1.05
BOUNDARY_US = 20.0
COPY_SHARE = 0.5  # a size-dependent boundary cost above half a memcpy of the tensor means a copy
PARTITION_S = 5.0
PARTITION_NODES = 100_000
PARTITION_GROWTH = 12.0
RSS = 1.2
COMPILE = 1.3
LOOP_COMPILE = (
    3.0  # first compile of a model whose OpenVINO probe fails on part of it / one ORT [CPU] session
)
PARALLEL_SPEEDUP = 1.2  # a split's sessions created on the pool against one after another
THROUGHPUT_NIREQ = (2, 4)  # async throughput with these many requests in flight must beat one request's
PLACEMENT_RATIO = 1.02  # tuned / the fastest single-device runtime, and tuned / automatic, on every model
PLACEMENT_WIN = 0.95  # tuned / every single-device runtime on at least one real model
TUNE_OVER_BUDGET = 1.10  # tuning's wall time / its budget
CONCURRENT_REAL = 0.90  # a real model's split at once / the same split in turn: at least 10 % faster
CONCURRENT = 0.65  # the two-branch model concurrent / one ORT session (its best threads) and / ORT_PARALLEL
GPU_AUTO = 1.02  # automatic HETERO:GPU,CPU / one ORT [CUDA, CPU] session (bench/gpu.py, issue 45)


@dataclass
class Target:
    """One checked target."""

    key: str
    title: str
    limit: str
    status: str
    figure: str
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    def line(self) -> str:
        """``[PASS] title: figure (target: limit)``."""
        return f"[{self.status}] {self.title}: {self.figure} (target: {self.limit})"


def _ratio_target(
    key: str,
    title: str,
    limit: float,
    cases: list[tuple[str, float | None, str]],
    unit: str = "x",
    judged: Mapping[str, bool] | None = None,
) -> Target:
    """A target met when every case's ratio is at most ``limit``; the figure is the worst case.
    ``judged``: {case: met} for cases judged otherwise than by the limit (said in their detail line)."""
    judged = judged or {}
    measured = [(name, value, note) for name, value, note in cases if value is not None]
    details = [
        f"{name}: {value:.3f}{unit}{(' ' + note) if note else ''}" if value is not None else f"{name}: {note}"
        for name, value, note in cases
    ]
    if not measured:
        return Target(key, title, f"<= {limit}{unit}", SKIP, "not measured", details)

    def over(name: str, value: float) -> bool:
        return not judged[name] if name in judged else value > limit

    by_limit = [c for c in measured if c[0] not in judged] or measured
    worst = max(by_limit, key=lambda c: c[1])
    overs = sum(1 for name, value, _ in measured if over(name, value))
    failed = len(measured) < len(cases) or overs > 0
    status = FAIL if failed else PASS
    figure = f"worst {worst[1]:.3f}{unit} ({worst[0]}), {overs}/{len(cases)} over the limit"
    if judged:
        figure += f"; {len(judged)} against the same runtime, judged by their noise"
    if len(measured) < len(cases):
        figure += f", {len(cases) - len(measured)} not measured"
    return Target(key, title, f"<= {limit}{unit} on each", status, figure, details)


def _latency_ratio(
    latency: dict[str, Any], runtime: str, kinds: tuple[str, ...]
) -> list[tuple[str, float | None, str]]:
    cases = []
    for model, entry in latency.items():
        if entry.get("kind") not in kinds:
            continue
        group = next(
            (
                g
                for name, g in entry.get("groups", {}).items()
                if name != "splits" and runtime in g.get("runtimes", {})
            ),
            next((g for name, g in entry.get("groups", {}).items() if name != "splits" and "error" in g), {}),
        )
        rt = group.get("runtimes", {}).get(runtime)
        if rt is None or rt.get("ratio") is None:
            error = (
                group.get("errors", {}).get(runtime)
                or group.get("error")
                or entry.get("error")
                or "not measured"
            )
            cases.append((model, None, f"error: {error}"))
            continue
        delta_us = (rt["stats"]["median_ms"] - rt["baseline_median_ms"]) * 1e3
        paired = rt.get("paired_ratio")
        note = (
            f"(ratio of medians {rt['ratio']:.3f}, {delta_us:+.0f} us; {rt['subgraphs']} subgraph(s), "
            f"n={rt['stats']['n']}"
        )
        if paired:
            note += f"; paired quartiles {paired['p25']:.3f}-{paired['p75']:.3f}"
        # the verdict: the median of the block ratios (the processes time their blocks in turns, so the
        # machine's drift cancels); the ratio of the two medians is shown beside it
        cases.append((model, paired["median"] if paired else rt["ratio"], note + ")"))
    return cases


def check(results: dict[str, Any]) -> list[Target]:
    """Every target of issues 6 and 21 against ``results`` (the harness's JSON document)."""
    checks: list[Callable[[dict[str, Any]], Target]] = [
        _hetero_cpu,
        _hetero_ov,
        _boundary,
        _copy,
        _partition_time,
        _partition_growth,
        _parallel_compile,
        _rss,
        _compile,
        _loop_compile,
        _throughput,
        _concurrency,
        _concurrency_real,
        _placement_single,
        _placement_automatic,
        _placement_win,
        _placement_budget,
        _placement_validation,
        _reuse_split,
        _reuse_real,
    ]
    return _judged(checks, results)


def check_gpu(results: dict[str, Any]) -> list[Target]:
    """Issue 45's GPU targets against bench/gpu.py's ``results``: automatic HETERO:GPU,CPU against one ORT
    [CUDA, CPU] session, a GPU|CPU split at once against in turn, a many-branch model on the CPU at once
    against one ORT session."""
    return _judged([_gpu_auto, _gpu_split_concurrency, _gpu_branchy], results)


def _judged(checks: list[Callable[[dict[str, Any]], Target]], results: dict[str, Any]) -> list[Target]:
    out = []
    for fn in checks:
        try:
            out.append(fn(results))
        except Exception as exc:  # a target that cannot be evaluated is reported, never fatal
            out.append(Target(fn.__name__.strip("_"), fn.__name__, "-", SKIP, f"not evaluated: {exc!r}"))
    return out


def _hetero_cpu(results: dict[str, Any]) -> Target:
    cases = _latency_ratio(results.get("latency", {}), "hetero_cpu", ("light",))
    return _ratio_target(
        "latency_hetero_cpu",
        "HETERO:CPU / one ORT CPU session, median of the paired latency ratios, light/ models",
        LATENCY_CPU,
        cases,
    )


def _hetero_ov(results: dict[str, Any]) -> Target:
    latency = results.get("latency", {})
    cases = _latency_ratio(latency, "hetero_ov", ("light", "synthetic"))
    target = _ratio_target(
        "latency_hetero_ov",
        "automatic HETERO:OPENVINO,CPU (default PERFORMANCE_HINT=LATENCY) / one ORT [OpenVINO, CPU] session, "
        "median of the paired latency ratios",
        LATENCY_OV,
        cases,
    )
    # the same split with a session per subgraph (PERFORMANCE_HINT=THROUGHPUT), shown beside it, not judged
    for model, value, note in _latency_ratio(latency, "hetero_ov_stages", ("synthetic",)):
        shown = f"{value:.3f}x " if value is not None else ""
        target.details.append(
            f"{model} with a session per subgraph (PERFORMANCE_HINT=THROUGHPUT, not judged): {shown}{note}"
        )
    return target


def _boundary(results: dict[str, Any]) -> Target:
    title = (
        "per-boundary crossing cost of a forced split between host-memory devices, beyond ORT's own split "
        "of the same model (slope over boundaries, sanitised chain)"
    )
    limit = f"<= {BOUNDARY_US:.0f} us per boundary"
    crossing = results.get("crossing", {})
    slope = crossing.get("slope_us", {}).get("hetero")
    details = []
    if crossing.get("per_cut"):
        slopes = crossing["slope_us"]
        details.append(
            f"of which ORT's per-run cost of the extra sessions {slopes['bare']:.1f} us and hetero-cli's own "
            f"bookkeeping {slopes['hetero_minus_bare']:.1f} us (the same sessions chained bare)"
        )
        details.append(
            "; ".join(
                f"{cuts} cut(s) ({row['boundaries']} boundaries): hetero {row['hetero_median_us']:.0f} us, "
                f"ORT's own split {row['ort_median_us']:.0f} us, hetero - ORT {row['hetero_minus_ort_us']:+.1f} us"
                for cuts, row in crossing["per_cut"].items()
            )
        )
    for name, chain in results.get("boundaries", {}).items():
        if name == "copy" or chain.get("slope_us", {}).get("hetero") is None:
            continue
        per_k = ", ".join(
            f"k={k} ({v['boundaries']} boundaries): {v['hetero_us_per_boundary']:.1f} us"
            + (
                f" (bare {v['bare_us_per_boundary']:.1f})"
                if v.get("bare_us_per_boundary") is not None
                else ""
            )
            for k, v in chain["per_k"].items()
        )
        slopes = chain["slope_us"]
        shape = f" {chain['shape']}" if "shape" in chain else ""
        text = (
            f"forced CPU/OPENVINO alternation against one session, {name}{shape}: slope "
            f"{slopes['hetero']:.1f} us/boundary"
        )
        if slopes.get("bare") is not None:
            text += f" (bare sessions {slopes['bare']:.1f})"
        if slopes.get("hetero_minus_bare") is not None:
            text += f", hetero-cli's own part {slopes['hetero_minus_bare']:.1f} (paired)"
        if chain.get("hetero_fixed_us") is not None:
            text += f"; HETERO:CPU over one ORT session {chain['hetero_fixed_us']:+.1f} us"
        details.append(f"{text}; {per_k}")
    if slope is None:
        return Target("boundary_overhead", title, limit, SKIP, "not measured", details)
    status = PASS if slope <= BOUNDARY_US else FAIL
    figure = f"{slope:.1f} us per boundary beyond ORT's own split"
    return Target("boundary_overhead", title, limit, status, figure, details)


def _copy(results: dict[str, Any]) -> Target:
    title = "no copy at host-memory boundaries (hetero-cli's size-dependent per-boundary cost)"
    copy = results.get("boundaries", {}).get("copy")
    limit = f"< {COPY_SHARE:.1f} x one memcpy of the boundary tensor"
    if not copy or copy.get("extra_us") is None:
        return Target("boundary_copy", title, limit, SKIP, "not measured")
    share = copy["extra_us"] / copy["memcpy_us"]
    status = PASS if share < COPY_SHARE else FAIL
    figure = (
        f"{copy['extra_us']:+.1f} us per boundary for a {copy['tensor_bytes'] / 2**20:.2f} MiB tensor over a "
        f"{copy['small_tensor_bytes']} B one, beyond the same sessions chained bare = {share:.2f} memcpy "
        f"({copy['memcpy_us']:.1f} us)"
    )
    details = [
        f"inside the EPs' sessions (the bare chain, large tensor minus small): {copy['ep_extra_us']:+.1f} us "
        f"per boundary = {copy['ep_extra_us'] / copy['memcpy_us']:.2f} memcpy"
    ]
    return Target("boundary_copy", title, limit, status, figure, details)


def _partition_time(results: dict[str, Any]) -> Target:
    title = f"partition of a {PARTITION_NODES:,}-node graph (query excluded)"
    limit = f"<= {PARTITION_S:.0f} s"
    scaling = results.get("partition_scaling", {})
    cases: list[tuple[str, float | None, str]] = []
    for kind, entry in scaling.get("kinds", {}).items():
        big = entry.get("sizes", {}).get(str(PARTITION_NODES))
        if entry.get("error"):
            cases.append((kind, None, f"error: {entry['error']}"))
        elif big is None:
            continue
        elif "median_s" in big:
            cases.append((kind, big["median_s"], f"({big.get('subgraphs', '?')} subgraphs)"))
        else:
            cases.append((kind, None, f"error: {big.get('error')}"))
    if not cases:
        return Target("partition_time", title, limit, SKIP, f"no {PARTITION_NODES:,}-node graph in this run")
    target = _ratio_target("partition_time", title, PARTITION_S, cases, unit=" s")
    target.limit = f"<= {PARTITION_S:.0f} s on each graph kind"
    return target


def _partition_growth(results: dict[str, Any]) -> Target:
    scaling = results.get("partition_scaling", {})
    small, big = scaling.get("sizes", [0, 0])
    title = f"partition growth from {small:,} to {big:,} nodes"
    cases: list[tuple[str, float | None, str]] = []
    for kind, entry in scaling.get("kinds", {}).items():
        if entry.get("error"):
            cases.append((kind, None, f"error: {entry['error']}"))
            continue
        ratio = entry.get("ratio")
        sizes = entry.get("sizes", {})
        if ratio is None:
            errors = [v["error"] for v in sizes.values() if "error" in v]
            cases.append((kind, None, f"error: {errors[0] if errors else 'not measured'}"))
            continue
        a, b = sizes[str(small)]["median_s"], sizes[str(big)]["median_s"]
        note = f"(medians {a * 1e3:.0f} ms -> {b * 1e3:.0f} ms"
        fastest = [sizes[str(n)].get("min_s") for n in (small, big)]
        if all(fastest):
            note += f"; fastest runs {fastest[0] * 1e3:.0f} -> {fastest[1] * 1e3:.0f} ms = {fastest[1] / fastest[0]:.1f}x"
        n_small, n_big = (len(sizes[str(n)].get("times_s", ())) for n in (small, big))
        cases.append((kind, ratio, f"{note}; {n_small} and {n_big} runs)"))
    limit = PARTITION_GROWTH * big / small / 10 if small else PARTITION_GROWTH
    target = _ratio_target("partition_growth", title, limit, cases)
    target.limit = f"<= {limit:g}x for {big // small if small else 0}x the nodes, on each graph kind"
    return target


def _parallel_compile(results: dict[str, Any]) -> Target:
    title = (
        "subgraph sessions compiled in parallel (session creation of a split plan, pool against one by one)"
    )
    limit = f">= {PARALLEL_SPEEDUP:g}x faster than creating the sessions one by one"
    cases = []
    for model, by_device in results.get("phases", {}).items():
        for device, ph in by_device.items():
            # a split run in one session (one_session) creates no subgraph sessions: nothing to pool
            if isinstance(ph, dict) and ph.get("subgraphs", 0) > 1 and not ph.get("one_session"):
                cases.append((f"{model} {device}", ph))
    if not cases:
        return Target("parallel_compile", title, limit, SKIP, "no split plan was compiled")
    details = []
    speedups = []
    for name, ph in cases:
        speedup = ph["serial_sessions_s"] / ph["ep_compile_s"] if ph.get("ep_compile_s") else 0.0
        speedups.append((name, speedup))
        details.append(
            f"{name}: {ph['subgraphs']} subgraphs, {ph['sessions_created']} sessions created, at most "
            f"{ph['max_concurrent_sessions']} constructors at once; session creation in the compile "
            f"{ph['ep_compile_s']:.3f} s vs {ph['serial_sessions_s']:.3f} s one by one = {speedup:.2f}x"
        )
    for providers, gil in results.get("gil", {}).items():
        details.append(
            f"a Python thread kept {gil['python_pace_share']:.0%} of its pace while ORT "
            f"{results.get('machine', {}).get('onnxruntime', '?')} initialised a [{providers}] session "
            "(near 0%: its binding holds the GIL, so sessions cannot be created at once from threads)"
        )
    worst = min(speedups, key=lambda c: c[1])
    status = PASS if worst[1] >= PARALLEL_SPEEDUP else FAIL
    figure = f"worst {worst[1]:.2f}x ({worst[0]})"
    return Target("parallel_compile", title, limit, status, figure, details)


def _rss(results: dict[str, Any]) -> Target:
    cases: list[tuple[str, float | None, str]] = []
    for model, entry in results.get("rss", {}).items():
        for hetero, base in (("hetero_cpu", "ort_cpu"), ("hetero_ov", "ort_ov")):
            h, b = entry.get(hetero, {}), entry.get(base, {})
            name = f"{model} {hetero}/{base}"
            if "increase_mib" not in h or "increase_mib" not in b:
                cases.append((name, None, f"error: {h.get('error') or b.get('error') or 'not measured'}"))
                continue
            ratio = h["increase_mib"] / b["increase_mib"] if b["increase_mib"] > 0 else None
            cases.append(
                (
                    name,
                    ratio,
                    f"(+{h['increase_mib']:.0f} vs +{b['increase_mib']:.0f} MiB over the imports; "
                    f"total {h['peak_mib']:.0f} vs {b['peak_mib']:.0f} MiB = {h['peak_mib'] / b['peak_mib']:.2f}x)",
                )
            )
    return _ratio_target(
        "rss",
        "peak RSS of a compiled hetero model over one session's (increase over the imports)",
        RSS,
        cases,
    )


def _compile_case(model: str, ph: Any) -> tuple[str, float | None, str]:
    """A compile-time case from one phases entry: its median paired ratio and how the time was spent."""
    if not isinstance(ph, dict) or "compile_ratio" not in ph:
        return (model, None, f"error: {ph.get('error') if isinstance(ph, dict) else 'not measured'}")
    return (
        model,
        ph.get("paired_compile_ratio", ph["compile_ratio"]),
        f"(medians {ph['compile_s']:.2f} s vs {ph['ort_session_s']:.2f} s = {ph['compile_ratio']:.3f}x; "
        f"probe sessions {ph['query_s']:.2f} s, EP compile {ph['ep_compile_s']:.2f} s, "
        f"{ph.get('sessions_created', '?')} sessions created; {ph.get('repeats', '?')} paired repetitions)",
    )


def _compile(results: dict[str, Any]) -> Target:
    kinds = {model: entry.get("kind") for model, entry in results.get("latency", {}).items()}
    cases = [
        _compile_case(model, by_device.get("HETERO:OPENVINO,CPU"))
        for model, by_device in results.get("phases", {}).items()
        if kinds.get(model, "light") == "light"
    ]
    return _ratio_target(
        "compile_time",
        "compiling automatic HETERO:OPENVINO,CPU / one ORT [OpenVINO, CPU] session, median of the paired "
        "ratios, light/ models",
        COMPILE,
        cases,
    )


def _loop_compile(results: dict[str, Any]) -> Target:
    cases = [
        _compile_case(model, next(iter(by_device.values()), None))
        for model, by_device in results.get("loop_compile", {}).items()
    ]
    return _ratio_target(
        "loop_compile",
        "first compile of automatic HETERO:OPENVINO,CPU / one ORT [CPU] session, median of the paired ratios, "
        "table recognisers whose OpenVINO probe fails on a Loop (ORT's [OpenVINO, CPU] session cannot load "
        "them)",
        LOOP_COMPILE,
        cases,
    )


def _reuse_cases(results: dict[str, Any], real: bool) -> tuple[float, list[tuple[str, float | None, str]]]:
    """(limit, cases) of the reuse section's rows reuse.limit judges by one limit: real models whose fresh
    compile takes over reuse.REAL_SLOW_S (``real``), or the plans of several subgraphs, synthetic or real
    (a model whose row failed counts where its kind does: real models under ``real``)."""
    cases: list[tuple[str, float | None, str]] = []
    wanted = reuse.REAL_SLOW if real else reuse.SEVERAL_SUBGRAPHS
    section = results.get("reuse", {})
    if "skipped" in section:  # no OpenVINO EP: nothing measured, the target is SKIP
        return wanted, cases
    for model, row in section.items():
        if "error" in row:
            if (row.get("kind") == "real") == real:
                cases.append((model, None, f"error: {row['error']}"))
            continue
        if reuse.limit(row, row["kind"]) != wanted:
            continue
        note = f"(fresh {row['fresh_s']:.2f} s, {row['subgraphs']} subgraph(s), {row['repeats']} paired repetitions)"
        cases.append((f"{model} import", row["import_ratio"], note))
        cases.append((f"{model} CACHE_DIR", row["cached_ratio"], note))
    return wanted, cases


def _reuse_split(results: dict[str, Any]) -> Target:
    limit, cases = _reuse_cases(results, real=False)
    return _ratio_target(
        "reuse_split",
        "import, and a compile CACHE_DIR loads / a fresh automatic HETERO:OPENVINO,CPU compile, plans of "
        "several subgraphs (median of paired ratios)",
        limit,
        cases,
    )


def _reuse_real(results: dict[str, Any]) -> Target:
    limit, cases = _reuse_cases(results, real=True)
    return _ratio_target(
        "reuse_real",
        "import, and a compile CACHE_DIR loads / a fresh automatic HETERO:OPENVINO,CPU compile, PyPI models "
        f"whose fresh compile takes over {reuse.REAL_SLOW_S:g} s (median of paired ratios)",
        limit,
        cases,
    )


def _throughput(results: dict[str, Any]) -> Target:
    title = (
        "async pipelining: throughput with nireq 2 and 4 above nireq 1 on the split models, one core per "
        "device (1 thread per session)"
    )
    limit = "> 1.00x nireq 1's inferences/s, each model and nireq"
    cases: list[tuple[str, float | None, str]] = []
    details: list[str] = []
    for entry in results.get("throughput", {}).get("runs", []):
        judged = entry.get("threads") == 1
        configs = entry.get("configs", {})
        for n in THROUGHPUT_NIREQ:
            name = f"{entry['model']} nireq {n}"
            row = configs.get(str(n))
            if row is None or row.get("speedup_vs_nireq1") is None:
                note = f"error: {entry.get('error', 'not measured')}"
                if judged:
                    cases.append((name, None, note))
                details.append(f"{name}, threads {entry.get('threads')}: {note}")
                continue
            one = configs["1"]["median_fps"]
            note = f"({row['median_fps']:.1f} vs {one:.1f} inferences/s, {entry.get('subgraphs', '?')} subgraphs)"
            if judged:
                cases.append((name, row["speedup_vs_nireq1"], note))
                details.append(f"{name}, 1 thread per session: {row['speedup_vs_nireq1']:.2f}x {note}")
            else:
                details.append(
                    f"{name}, default threads (every stage already uses every core; not judged): "
                    f"{row['speedup_vs_nireq1']:.2f}x {note}"
                )
    measured = [(name, value) for name, value, _ in cases if value is not None]
    if not measured:
        return Target("async_throughput", title, limit, SKIP, "not measured", details)
    worst = min(measured, key=lambda c: c[1])
    failed = len(measured) < len(cases) or worst[1] <= 1.0
    figure = f"worst speed-up {worst[1]:.2f}x ({worst[0]}, 1 thread per session)"
    if len(measured) < len(cases):
        figure += f", {len(cases) - len(measured)} not measured"
    return Target("async_throughput", title, limit, FAIL if failed else PASS, figure, details)


def _concurrency(results: dict[str, Any]) -> Target:
    """Judged on the concurrent plan that does best against ORT (a user, or tune, would run that one); the
    other plan's ratios are listed, not judged."""
    section = results.get("concurrency", {})
    title = "two independent recurrent branches run at once inside one inference (issue 45)"
    comparisons = (
        ("vs_best_ort", f"/ {section.get('best_ort', 'ORT')}"),
        ("vs_ort_parallel", "/ ORT_PARALLEL"),
    )
    by_plan: dict[str, list[tuple[str, float | None, str]]] = {}
    for kind, ratios in section.get("ratios", {}).items():
        label = section.get("labels", {}).get(kind, kind)
        for key, name in comparisons:
            ratio = ratios.get(key, {})
            median = ratio.get("median")
            note = f"(noise {ratio.get('noise', float('nan')):.3f})"
            value = None if median is None or median != median else median
            by_plan.setdefault(kind, []).append((f"{label} {name}", value, note))

    def worst(kind: str) -> float:
        return max((v if v is not None else float("inf")) for _, v, _ in by_plan[kind])

    best = min(by_plan, key=worst) if by_plan else None
    cases = by_plan.get(best, []) if best else [("concurrent", None, "not measured")]
    target = _ratio_target("concurrency", title, CONCURRENT, cases)
    for kind, others in by_plan.items():
        if kind != best:
            target.details += [f"{n}: {v:.3f}x {note} (not judged)" for n, v, note in others if v is not None]
    floor = section.get("ratios", {}).get("hetero_cpu_conc", {}).get("vs_floor", {})
    if floor.get("median") is not None:
        target.details.append(
            f"CPU|CPU concurrent / a session per branch at once, run bare (the floor): {floor['median']:.3f}x "
            f"(noise {floor.get('noise', float('nan')):.3f}; not judged)"
        )
    sequential = section.get("ratios", {}).get("hetero_conc", {}).get("vs_sequential", {})
    if sequential.get("median") is not None:
        target.details.append(
            f"OPENVINO|CPU concurrent / the same split in sequence: {sequential['median']:.3f}x (not judged)"
        )
    target.details += _issue_shape(results.get("concurrency_issue_shape", {}))
    return target


def _issue_shape(section: dict[str, Any]) -> list[str]:
    """Lines on issue 45's own shape of the model (concurrency.ISSUE_SHAPE), timed and shown, not judged:
    the CPU cut against ORT's best session, and the floor's medians against it."""
    ratio = section.get("ratios", {}).get("hetero_cpu_conc", {}).get("vs_best_ort", {})
    medians = section.get("median_ms", {})
    best = section.get("best_ort", "")
    if ratio.get("median") is None or "ort_branches" not in medians or best not in medians:
        return []
    return [
        f"{section['model']} (not judged): CPU|CPU concurrent / {best} {ratio['median']:.3f}x "
        f"(noise {ratio.get('noise', float('nan')):.3f}); the floor's median / {best}'s "
        f"{medians['ort_branches'] / medians[best]:.3f}x"
    ]


def _concurrency_real(results: dict[str, Any]) -> Target:
    """A real model's split run at once against the same split in turn (at most CONCURRENT_REAL), and hetero
    tune's placement against the fastest single-device runtime (faster by more than the noise)."""
    section = results.get("concurrency_real", {})
    title = "a real model (madmom's BLSTM beat tracker): its directions at once, and tuned, beat in turn and every single device (issue 45)"
    ratios = section.get("ratios", {})
    cases = []
    conc = ratios.get("conc_vs_turn", {})
    value = conc.get("median")
    cases.append(
        (
            "at once / the same split in turn",
            None if value is None or value != value else value,
            f"(noise {conc.get('noise', float('nan')):.3f})" if value is not None else "not measured",
        )
    )
    tuned = ratios.get("tuned_vs_fastest_single", {})
    value, noise = tuned.get("median"), tuned.get("noise", float("nan"))
    faster = value is not None and value == value and noise == noise and value < 1.0 - noise
    name = f"tuned / the fastest single device ({section.get('fastest_single')})"
    cases.append(
        (
            name,
            None if value is None or value != value else value,
            f"(noise {noise:.3f}: faster by more than the noise: {'yes' if faster else 'no'})"
            if value is not None
            else "not measured",
        )
    )
    target = _ratio_target("concurrency_real", title, CONCURRENT_REAL, cases, judged={name: faster})
    errors = section.get("errors", {})
    target.details += [f"{section.get('labels', {}).get(k, k)} not timed: {why}" for k, why in errors.items()]
    return target


def _gpu_auto(results: dict[str, Any]) -> Target:
    return _ratio_target(
        "gpu_auto",
        "automatic HETERO:GPU,CPU / one ORT [CUDA, CPU] session, median of the paired latency ratios",
        GPU_AUTO,
        _latency_ratio(results.get("latency", {}), "hetero_gpu", ("light", "synthetic")),
    )


def _faster_target(
    key: str, title: str, section: dict[str, Any], cases: list[tuple[str, str, str]]
) -> Target:
    """Met where every case, (name, runtime, comparison) of ``section`` (concurrency.section's), is faster
    than its baseline by more than the noise: the paired ratio's median, raised by its noise (a fraction of
    it), still under 1. SKIP where the section did not run; a section that failed, or a case it did not
    measure, fails the target."""
    limit = "< 1.00x by more than the noise, on each"
    if not section:
        return Target(key, title, limit, SKIP, "not measured")
    if "error" in section:
        return Target(key, title, limit, FAIL, f"error: {section['error']}")
    medians = section.get("median_ms", {})
    details: list[str] = []
    measured: list[tuple[str, float, bool]] = []
    for name, kind, comparison in cases:
        ratio = section.get("ratios", {}).get(kind, {}).get(comparison, {})
        value, noise = ratio.get("median", math.nan), ratio.get("noise", math.nan)
        if value != value:
            details.append(f"{name}: not measured")
            continue
        faster = value * (1 + noise) < 1.0
        measured.append((name, value, faster))
        times = " vs ".join(
            f"{medians[k]:.3f}" for k in (kind, _baseline(section, comparison)) if k in medians
        )
        details.append(
            f"{name}: {value:.3f}x (noise {noise:.3f}, faster by more than it: {'yes' if faster else 'no'}; "
            f"medians {times} ms)"
        )
    labels = section.get("labels", {})
    details += [f"{labels.get(k, k)} not timed: {why}" for k, why in section.get("errors", {}).items()]
    if not measured:
        return Target(key, title, limit, FAIL, "not measured", details)
    worst = max(measured, key=lambda c: c[1])
    slower = sum(not faster for *_, faster in measured)
    missing = len(cases) - len(measured)
    figure = f"worst {worst[1]:.3f}x ({worst[0]}), {slower}/{len(cases)} not faster by more than the noise"
    figure += f", {missing} not measured" if missing else ""
    return Target(key, title, limit, FAIL if slower or missing else PASS, figure, details)


def _baseline(section: dict[str, Any], comparison: str) -> str:
    """The runtime a concurrency section's ``comparison`` (vs_best_ort, ...) is against."""
    return {
        "vs_best_ort": section.get("best_ort", ""),
        "vs_ort_parallel": "ort_parallel",
        "vs_sequential": "hetero_seq",
        "vs_floor": "ort_branches",
    }[comparison]


def _gpu_split_concurrency(results: dict[str, Any]) -> Target:
    section = results.get("concurrency", {}).get("split", {})
    return _faster_target(
        "gpu_concurrency_split",
        "a split of a CPU branch beside a GPU branch run at once inside one inference / the same split in "
        "turn (HETERO:GPU,CPU, two-branch model)",
        section,
        [("GPU|CPU at once / in turn", "hetero_conc", "vs_sequential")],
    )


def _gpu_branchy(results: dict[str, Any]) -> Target:
    section = results.get("concurrency", {}).get("branchy", {})
    best = section.get("best_ort", "ORT")
    return _faster_target(
        "gpu_concurrency_branchy",
        "a model of as many recurrent branches as cores (at most 16) on HETERO:CPU, CONCURRENT / one ORT CPU "
        "session",
        section,
        [
            (
                f"HETERO:CPU CONCURRENT / {best} (the faster of default threads and 1)",
                "hetero_cpu_conc",
                "vs_best_ort",
            ),
            ("HETERO:CPU CONCURRENT / ORT_PARALLEL", "hetero_cpu_conc", "vs_ort_parallel"),
        ],
    )


def _placement_models(results: dict[str, Any]) -> dict[str, Any]:
    return results.get("placement", {}).get("models", {})


def _placement_ratio(
    results: dict[str, Any], key: str
) -> tuple[list[tuple[str, float | None, str]], dict[str, bool]]:
    """Per placement model, its ``key`` ratio (block by block: app.measure.paired) with the runtimes'
    medians, the ratios' quartiles and the comparison's noise; and {model: met} for the models whose
    compared runtime runs what the tuned file runs (placement.py's same_placement: the same subgraphs,
    devices and sessions). The tuned placement cannot be slower than itself: such a ratio shows the method's
    noise, and counts as met where it is within that noise of 1 or within the limit (the note says where it
    is beyond its noise: a check of the noise the method reports, never a stricter limit)."""
    cases: list[tuple[str, float | None, str]] = []
    judged: dict[str, bool] = {}
    for model, entry in _placement_models(results).items():
        value = entry.get(key)
        if value is None:
            errors = entry.get("errors", {})
            why = entry.get("error") or errors.get("tuned") or "; ".join(errors.values()) or "not measured"
            cases.append((model, None, f"error: {why}"))
            continue
        rows = entry["runtimes"]
        against = entry["fastest_single"] if key == "vs_fastest_single" else "hetero_ov"
        tuned, base = rows["tuned"], rows[against]
        paired = base["tuned_paired_ratio"]
        winner = entry.get("tune", {}).get("winner", "?")
        note = (
            f"(tuned {winner}, {tuned['subgraphs']} subgraph(s), {tuned['stats']['median_ms']:.3f} ms vs "
            f"{base['label']} {base['stats']['median_ms']:.3f} ms; n={tuned['stats']['n']}"
        )
        if paired:
            note += f"; block quartiles {paired['p25']:.3f}-{paired['p75']:.3f}"
        noise = entry.get(f"{key}_noise")
        if noise is not None:
            note += f"; noise {noise:.1%}"
        if against in entry.get("same_placement", ()) and noise is not None:
            within = abs(value - 1.0) <= noise * value
            judged[model] = within or value <= PLACEMENT_RATIO
            verdict = "within" if within else "beyond"
            note += f"; the same runtime as the tuned one: {verdict} its noise of 1"
        cases.append((model, value, note + ")"))
    return cases, judged


def _placement_single(results: dict[str, Any]) -> Target:
    cases, judged = _placement_ratio(results, "vs_fastest_single")
    return _ratio_target(
        "placement_vs_single",
        "hetero tune's placement / the fastest single-device runtime (hetero CPU, hetero OPENVINO, ORT CPU, "
        "ORT [OpenVINO, CPU]), block by block, each runtime alone in its own process",
        PLACEMENT_RATIO,
        cases,
        judged=judged,
    )


def _placement_automatic(results: dict[str, Any]) -> Target:
    cases, judged = _placement_ratio(results, "vs_automatic")
    return _ratio_target(
        "placement_vs_automatic",
        "hetero tune's placement / automatic HETERO:OPENVINO,CPU, block by block, each alone in its process",
        PLACEMENT_RATIO,
        cases,
        judged=judged,
    )


def _placement_win(results: dict[str, Any]) -> Target:
    title = "hetero tune's placement faster than every single-device runtime on at least one real model"
    limit = f"<= {PLACEMENT_WIN:g}x the slowest-to-beat single device, on one real model at least"
    details = []
    best: tuple[str, float] | None = None
    for model, entry in _placement_models(results).items():
        if entry.get("kind") != "real":
            continue
        every = entry.get("vs_every_single")
        if not every:
            details.append(f"{model}: error: {entry.get('error') or 'not measured'}")
            continue
        worst = max(every.values())  # the single device the tuned placement beats by the least
        shown = ", ".join(f"{rid} {ratio:.3f}" for rid, ratio in every.items())
        winner = entry.get("tune", {}).get("winner", "?")
        details.append(f"{model}: {worst:.3f}x at worst (tuned {winner}; against each: {shown})")
        if best is None or worst < best[1]:
            best = (model, worst)
    if best is None:
        return Target("placement_win", title, limit, SKIP, "no real model measured", details)
    status = PASS if best[1] <= PLACEMENT_WIN else FAIL
    return Target("placement_win", title, limit, status, f"best {best[1]:.3f}x ({best[0]})", details)


def _placement_budget(results: dict[str, Any]) -> Target:
    cases: list[tuple[str, float | None, str]] = []
    for model, entry in _placement_models(results).items():
        tune = entry.get("tune")
        if not tune or tune.get("wall_s") is None:
            cases.append((model, None, f"error: {entry.get('error') or 'not tuned'}"))
            continue
        budget = entry.get("tune_budget_s") or tune.get("budget_s")
        cases.append(
            (
                model,
                tune["wall_s"] / budget,
                f"({tune['wall_s']:.1f} s of {budget:g} s; the search's own clock {tune.get('elapsed_s', 0):.1f} s, "
                f"{len(tune.get('candidates', []))} candidates)",
            )
        )
    return _ratio_target(
        "placement_tuning_time",
        "hetero tune's wall time / its budget, per model",
        TUNE_OVER_BUDGET,
        cases,
    )


def _placement_validation(results: dict[str, Any]) -> Target:
    title = "the tuned placement's outputs pass validation against one CPU session of the whole model"
    limit = "PASSED on every model"
    details = []
    passed = total = 0
    for model, entry in _placement_models(results).items():
        total += 1
        validation = entry.get("tune", {}).get("validation")
        if not validation:
            details.append(f"{model}: error: {entry.get('error') or 'not validated'}")
            continue
        worst = max((o.get("max_abs") or 0.0 for o in validation.get("outputs", [])), default=0.0)
        diff = entry.get("runtimes", {}).get("tuned", {}).get("max_abs_diff_vs_ort_cpu")
        extra = (
            f"; the bench's own run of the saved model vs ORT [CPU] {diff:.3g}" if diff is not None else ""
        )
        details.append(
            f"{model}: {'PASSED' if validation.get('passed') else 'FAILED'} (max abs error {worst:.3g}{extra})"
        )
        passed += bool(validation.get("passed"))
    if not total:
        return Target("placement_validation", title, limit, SKIP, "not measured", details)
    status = PASS if passed == total else FAIL
    return Target("placement_validation", title, limit, status, f"{passed}/{total} models passed", details)
