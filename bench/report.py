"""What the harness writes: the machine's description, tables on stdout, the JSON file and the PNG plot."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from targets import Target

ROOT = Path(__file__).resolve().parent.parent


def console() -> Console:
    """A console as wide as the terminal, or 150 columns when stdout is a pipe or a file."""
    width = shutil.get_terminal_size((150, 40)).columns if sys.stdout.isatty() else 150
    return Console(width=max(width, 120), highlight=False)


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return found.group(1).strip() if found else platform.machine()


def _cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    found = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8", "avx_vnni")
    return [f for f in wanted if found and f in found.group(1).split()]


def _memory_gib() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    found = re.search(r"^MemTotal:\s*(\d+) kB", text, re.MULTILINE)
    return round(int(found.group(1)) / 2**20, 1) if found else None


def _ep_openvino_version() -> str | None:
    """The OpenVINO runtime bundled in onnxruntime-openvino (from its libopenvino.so.X.Y.Z)."""
    import onnxruntime

    capi = Path(onnxruntime.__file__).parent / "capi"
    for lib in sorted(capi.glob("libopenvino.so.*.*.*")):
        return lib.name.removeprefix("libopenvino.so.")
    return None


def _git() -> dict[str, Any]:
    def run(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()

    if os.environ.get("HETERO_BENCH_COMMIT"):  # a copy of the work tree without .git (a lent GPU machine)
        return {"commit": os.environ["HETERO_BENCH_COMMIT"], "dirty": None}
    try:
        commit = run("rev-parse", "HEAD")
        dirty = bool(run("status", "--porcelain", "--untracked-files=no"))
    except OSError:
        return {}
    return {"commit": commit or None, "dirty": dirty}


def machine() -> dict[str, Any]:
    """CPU, cores, memory, library versions: what the figures were measured on."""
    import numpy
    import onnx
    import onnxruntime

    import hetero_cli

    try:
        import openvino

        openvino_version = openvino.__version__
    except ImportError:
        openvino_version = None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": affinity,
        "memory_gib": _memory_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "onnxruntime_providers": onnxruntime.get_available_providers(),
        "openvino_in_onnxruntime": _ep_openvino_version(),
        "openvino": openvino_version,
        "onnx": onnx.__version__,
        "numpy": numpy.__version__,
        "hetero_cli": hetero_cli.__version__,
        "git": _git(),
    }


def now() -> str:
    """The current time, ISO 8601 in UTC."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages (other work on the machine skews timings)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# --- tables ---------------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.1f}" if value < 1000 else f"{value:.0f}"


def latency_table(model: str, entry: dict[str, Any]) -> Table:
    """One model's runtimes: medians, min, max and the ratio of medians to each row's baseline."""
    threads = f", {entry['threads']} thread(s) per session" if entry.get("threads") else ""
    table = Table(
        title=f"{model}: latency: {entry['iterations']} rounds, each runtime in its own process ({entry['wall_s']:.1f} s{threads})",
        title_justify="left",
    )
    for column in (
        "runtime",
        "subgraphs",
        "sessions",
        "boundaries",
        "median ms",
        "min ms",
        "max ms",
        "ratio",
        "baseline",
    ):
        table.add_column(column, justify="left" if column in ("runtime", "baseline") else "right")
    for rt in entry["runtimes"].values():
        stats = rt["stats"]
        ratio = "-" if rt.get("ratio") is None else f"{rt['ratio']:.3f}"
        table.add_row(
            rt["label"],
            str(rt["subgraphs"]),
            str(rt.get("sessions", "-")),
            str(rt["boundaries"]),
            _ms(stats["median_ms"]),
            _ms(stats["min_ms"]),
            _ms(stats["max_ms"]),
            ratio,
            rt.get("baseline_label", "-"),
        )
    for runtime, error in entry.get("errors", {}).items():
        table.add_row(runtime, "", "", "", "", "", "", "error", error[:80])
    return table


def boundary_table(boundaries: dict[str, Any]) -> Table:
    """Per-boundary overhead of forced splits, hetero and the same sessions chained bare."""
    table = Table(
        title="forced splits: overhead per boundary, (median - baseline) / boundaries", title_justify="left"
    )
    for column in (
        "model",
        "k",
        "subgraphs",
        "boundaries",
        "hetero us/boundary",
        "bare sessions us/boundary",
    ):
        table.add_column(column, justify="left" if column == "model" else "right")
    for model, entry in boundaries.items():
        if model == "copy" or "per_k" not in entry:
            continue
        for k, row in entry["per_k"].items():
            bare = row.get("bare_us_per_boundary")
            table.add_row(
                model,
                str(k),
                str(row["subgraphs"]),
                str(row["boundaries"]),
                f"{row['hetero_us_per_boundary']:.1f}",
                "-" if bare is None else f"{bare:.1f}",
            )
        slope = entry.get("slope_us", {})
        if slope.get("hetero") is not None:
            bare = slope.get("bare")
            table.add_row(
                model,
                "fit",
                "",
                "",
                f"{slope['hetero']:.1f}",
                "-" if bare is None else f"{bare:.1f}",
                end_section=True,
            )
    return table


def crossing_table(section: dict[str, Any]) -> Table:
    """hetero-cli's forced split against ORT's own split of the sanitised chain, per cut count."""
    slopes = section["slope_us"]
    table = Table(
        title=f"crossings: {section['model']}, ORT's own split vs the same placement forced in hetero-cli, "
        f"{section['iterations']} rounds, each runtime in its own process; per boundary beyond ORT: {slopes['hetero']:.1f} us "
        f"(ORT's per-run cost {slopes['bare']:.1f}, hetero-cli's own {slopes['hetero_minus_bare']:.1f})",
        title_justify="left",
    )
    for column in ("cuts", "subgraphs", "boundaries", "ORT us", "hetero us", "bare us", "hetero - ORT us"):
        table.add_column(column, justify="right")
    for cuts, row in section["per_cut"].items():
        table.add_row(
            cuts,
            str(row["subgraphs"]),
            str(row["boundaries"]),
            f"{row['ort_median_us']:.1f}",
            f"{row['hetero_median_us']:.1f}",
            f"{row['bare_median_us']:.1f}",
            f"{row['hetero_minus_ort_us']:+.1f}",
        )
    return table


def concurrency_table(section: dict[str, Any], split: str = "OPENVINO|CPU") -> Table:
    """The branches' model's runtimes (medians) and the concurrent runtimes' paired ratios (``split``: the
    devices of the split's branches, where the section ran it in sequence too)."""
    ratios = {kind: section["ratios"].get(kind, {}) for kind in section["plan"]}
    lines = [
        f"{section['labels'][kind]}: {plan.get('schedule', '')}; / best ORT "
        f"{ratios[kind].get('vs_best_ort', {}).get('median', math.nan):.3f}, "
        f"/ ORT_PARALLEL {ratios[kind].get('vs_ort_parallel', {}).get('median', math.nan):.3f}"
        + (f", / the floor {ratios[kind]['vs_floor']['median']:.3f}" if "vs_floor" in ratios[kind] else "")
        for kind, plan in section["plan"].items()
    ]
    sequential = section["ratios"].get("hetero_conc", {}).get("vs_sequential", {}).get("median")
    table = Table(
        title=f"concurrency: {section['model']}, {section['rounds']} rounds, each runtime in its own process, "
        f"{section['cores']} cores"
        + (f"; {split} concurrent / sequential {sequential:.3f}" if sequential is not None else "")
        + "\n"
        + "\n".join(lines),
        title_justify="left",
    )
    for column in ("runtime", "median ms", "max abs diff"):
        table.add_column(column, justify="right")
    for kind, label in section["labels"].items():
        median = section["median_ms"].get(kind)
        table.add_row(
            label,
            f"{median:.3f}" if median is not None else section["errors"].get(kind, "-"),
            f"{section['max_abs_diff_vs_ort_default'].get(kind, float('nan')):.1e}",
        )
    return table


def concurrency_real_table(section: dict[str, Any]) -> Table:
    """The real model's runtimes (medians, or why one cannot run it) and the two ratios judged."""
    ratios = section["ratios"]
    lines = [
        f"{section['labels'][kind]}: {plan.get('schedule', '')}" for kind, plan in section["plan"].items()
    ]
    conc = ratios.get("conc_vs_turn", {})
    tuned = ratios.get("tuned_vs_fastest_single", {})
    table = Table(
        title=f"concurrency on a real model: {section['model']}, {section['rounds']} rounds, each runtime in its "
        f"own process; at once / in turn {conc.get('median', float('nan')):.3f} (noise "
        f"{conc.get('noise', float('nan')):.3f}); tuned ({section['tune'].get('winner')}) / fastest single device "
        f"({section.get('fastest_single')}) {tuned.get('median', float('nan')):.3f} (noise "
        f"{tuned.get('noise', float('nan')):.3f})\n" + "\n".join(lines),
        title_justify="left",
    )
    for column in ("runtime", "median ms", "max abs diff"):
        table.add_column(column, justify="right")
    for kind, label in section["labels"].items():
        median = section["median_ms"].get(kind)
        diff = section["max_abs_diff_vs_first"].get(kind)
        table.add_row(
            label,
            f"{median:.3f}" if median is not None else section["errors"].get(kind, "-")[:80],
            f"{diff:.1e}" if diff is not None else "-",
        )
    return table


def phases_table(phases: dict[str, Any]) -> Table:
    """Compile time split into its phases, next to one ORT session's creation."""
    table = Table(title="compile: where the time goes (medians, seconds)", title_justify="left")
    columns = (
        "model",
        "device",
        "subgraphs",
        "ORT session",
        "hetero compile",
        "ratio",
        "query (probe)",
        "partition",
        "export",
        "EP compile",
        "ORT sessions",
    )
    for column in columns:
        left = column in ("model", "device")
        table.add_column(column, justify="left" if left else "right", no_wrap=left)
    for model, by_device in phases.items():
        for device, ph in by_device.items():
            if "error" in ph:
                table.add_row(model, device, "", "", "", "", "error", ph["error"][:60])
                continue
            queries = " + ".join(
                f"{key[6:-2]} {ph[key]:.3f}" for key in ph if key.startswith("query_") and key != "query_s"
            )
            table.add_row(
                model,
                device,
                str(ph["subgraphs"]),
                f"{ph['ort_session_s']:.3f}",
                f"{ph['compile_s']:.3f}",
                f"{ph['compile_ratio']:.2f}",
                f"{ph['query_s']:.3f} ({queries})",
                f"{ph['partition_s']:.4f}",
                f"{ph['export_s']:.3f}",
                f"{ph['ep_compile_s']:.3f}",
                f"{ph['sessions_created']}, {ph['max_concurrent_sessions']} at once",
            )
    return table


def rss_table(rss: dict[str, Any]) -> Table:
    """Peak RSS per runtime, each in a fresh interpreter: total and increase over the imports."""
    table = Table(
        title="peak RSS (MiB), fresh process each: model loaded + compiled + one inference",
        title_justify="left",
    )
    runtimes = sorted({r for entry in rss.values() for r in entry if r != "none"}, key=_runtime_order)
    table.add_column("model")
    table.add_column("imports", justify="right")
    for runtime in runtimes:
        table.add_column(runtime, justify="right")
    for model, entry in rss.items():
        cells = []
        for runtime in runtimes:
            r = entry.get(runtime, {})
            cells.append(
                f"{r['peak_mib']:.0f} (+{r['increase_mib']:.0f})"
                if "increase_mib" in r
                else r.get("error", "-")[:30]
            )
        imports = entry.get("none", {}).get("peak_mib")
        table.add_row(model, "-" if imports is None else f"{imports:.0f}", *cells)
    return table


def _runtime_order(runtime: str) -> int:
    order = ["ort_cpu", "hetero_cpu", "ort_ov", "hetero_ov", "openvino"]
    return order.index(runtime) if runtime in order else len(order)


def scaling_table(scaling: dict[str, Any]) -> Table:
    """Partition time per graph kind and size."""
    table = Table(
        title="partition scaling (partition() only, random affinities over 2 devices)", title_justify="left"
    )
    for column in ("graph", "nodes", "subgraphs", "Model()", "partition", "growth"):
        table.add_column(column, justify="left" if column == "graph" else "right")
    for kind, entry in scaling.get("kinds", {}).items():
        if entry.get("error"):
            table.add_row(kind, "", "", "", f"error: {entry['error'][:70]}", "")
            continue
        for size, row in entry["sizes"].items():
            if "median_s" in row:
                part = f"{row['median_s']:.3f} s"
            else:
                part = f"{row.get('error', 'error')[:60]} after {row.get('failed_after_s', 0):.2f} s"
            growth = (
                f"{entry['ratio']:.1f}x" if entry.get("ratio") and size == str(scaling["sizes"][-1]) else ""
            )
            table.add_row(kind, size, str(row.get("subgraphs", "-")), f"{row['model_s']:.2f} s", part, growth)
    return table


def throughput_table(section: dict[str, Any]) -> Table:
    """Async throughput per model and thread setting: sync, then each nireq, median inferences/s and the
    speed-up over nireq 1."""
    settings = section.get("settings", {})
    table = Table(
        title=f"async throughput (median of {settings.get('repeats', '?')} runs of {settings.get('budget_s', '?')} s; "
        "AsyncInferQueue on the device pipeline)",
        title_justify="left",
    )
    for column in (
        "model",
        "threads",
        "subgraphs",
        "requests",
        "inferences/s",
        "median latency ms",
        "vs nireq 1",
    ):
        table.add_column(column, justify="left" if column == "model" else "right")
    for entry in section.get("runs", []):
        threads = "default" if not entry.get("threads") else str(entry["threads"])
        if "error" in entry:
            table.add_row(entry["model"], threads, "", "", f"error: {entry['error'][:70]}", "", "")
            continue
        for config, row in entry["configs"].items():
            speedup = row.get("speedup_vs_nireq1")
            table.add_row(
                entry["model"],
                threads,
                str(entry["subgraphs"]),
                "sync infer()" if config == "sync" else f"nireq {config}",
                f"{row['median_fps']:.1f}",
                _ms(row["median_latency_ms"]),
                "-" if speedup is None else f"{speedup:.2f}x",
                end_section=config == list(entry["configs"])[-1],
            )
    return table


def placement_table(section: dict[str, Any]) -> Table:
    """Per model: the tuning's time and winner, each runtime's median, and the tuned placement's paired
    ratio to the fastest single-device runtime and to the automatic plan."""
    table = Table(
        title=f"placement: hetero tune on {section.get('device')} (budget {section.get('tune_budget_s', 0):g} s per "
        "model) against the automatic plan and each single device, medians of per-process medians (each runtime "
        f"alone in its own process), ms; the tuned placement and its contenders (other sessions within "
        f"2 % of it or faster) timed in {section.get('contender_rounds', 0)} more rounds",
        title_justify="left",
    )
    ids = ("tuned", "hetero_ov", "hetero_cpu", "hetero_openvino", "ort_cpu", "ort_ov", "openvino")
    heads = ("tuned", "auto", "h CPU", "h OV", "ORT CPU", "ORT OV", "native OV")
    for column in ("model", "tuning s", "winner", *heads, "tuned / fastest single", "tuned / auto"):
        table.add_column(column, justify="left" if column in ("model", "winner") else "right")
    for model, entry in section.get("models", {}).items():
        if "error" in entry:
            table.add_row(model, "", "error", *[""] * len(heads), "", escape(entry["error"][:60]))
            continue
        tune = entry.get("tune", {})
        winner = next((c for c in tune.get("candidates", []) if c.get("name") == tune.get("winner")), {})
        medians = [
            _ms(entry["runtimes"][rid]["stats"]["median_ms"]) if rid in entry.get("runtimes", {}) else "-"
            for rid in ids
        ]
        fastest = entry.get("fastest_single")
        vs_single = (
            f"{entry['vs_fastest_single']:.3f} ({heads[ids.index(fastest)]})"
            if entry.get("vs_fastest_single") is not None and fastest
            else "-"
        )
        vs_auto = f"{entry['vs_automatic']:.3f}" if entry.get("vs_automatic") is not None else "-"
        table.add_row(
            model,
            f"{tune.get('wall_s', 0):.1f}",
            f"{tune.get('winner', '?')} ({winner.get('subgraphs', '?')} sg)",
            *medians,
            vs_single,
            vs_auto,
        )
    return table


def print_targets(out: Console, targets: list[Target]) -> None:
    """PASS / FAIL / SKIP lines, with one indented line per case: issue 6's, then issue 21's (placement)."""
    placement = [t for t in targets if t.key.startswith("placement_")]
    for header, shown in (
        ("Targets of issue 6", [t for t in targets if t not in placement]),
        ("Targets of issue 21 (hetero tune's placement)", placement),
    ):
        if shown:
            print_target_lines(out, header, shown)


def print_target_lines(out: Console, header: str, targets: list[Target]) -> None:
    """``header``, then each target's line and its details."""
    out.print(f"\n[bold]{header}[/bold]")
    for target in targets:
        colour = {"PASS": "green", "FAIL": "red"}.get(target.status, "yellow")
        out.print(f"[{colour}]{escape(target.line())}[/{colour}]", soft_wrap=True)
        for detail in target.details:
            out.print(f"    {detail}", soft_wrap=True, markup=False)


# --- files ----------------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """NaN / inf become null, so the file is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_json(results: dict[str, Any], path: Path) -> None:
    """The whole run as one JSON document (written atomically)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(results), indent=2, allow_nan=False) + "\n")
    tmp.replace(path)


def plot(boundaries: dict[str, Any], crossing: dict[str, Any], path: Path, limit_us: float) -> bool:
    """PNG of boundary costs; False if matplotlib is missing.

    Left: the crossing section (hetero-cli minus ORT's own split of the same model, against the
    boundaries), the target's figure, with its fitted line and the limit's slope. Middle: forced
    CPU/OPENVINO alternation of the 256 B chain, per boundary against k, hetero and the same sessions bare
    (this also counts the OpenVINO EP's cost of every extra OpenVINO subgraph). Right: the same for the
    1 MiB chain and the light/ models.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (first, middle, right) = plt.subplots(1, 3, figsize=(18, 5), dpi=100)
    per_cut = crossing.get("per_cut", {})
    if per_cut:
        xs = [row["boundaries"] for row in per_cut.values()]
        for key, label, style in (
            ("hetero_minus_ort_us", "hetero-cli - ORT's own split", "-o"),
            ("bare_minus_ort_us", "same sessions, bare loop - ORT's own split", "--s"),
        ):
            first.plot(xs, [row[key] for row in per_cut.values()], style, label=label)
        slope = crossing["slope_us"]["hetero"]
        intercept = statistics.fmean(
            r["hetero_minus_ort_us"] for r in per_cut.values()
        ) - slope * statistics.fmean(xs)
        top = max(xs)
        for per_boundary, color, label in ((slope, "C0", "fit"), (limit_us, "red", "limit")):
            first.plot(
                [0, top],
                [intercept, intercept + per_boundary * top],
                ":",
                color=color,
                label=f"{label}: {per_boundary:.1f} us per boundary",
            )
        first.set_xlabel("boundaries (2 per IsInf sanitiser ORT itself cuts at)")
        first.set_ylabel("median per-iteration difference (us)")
        first.set_title(f"crossings beyond ORT's own split: {crossing.get('model', '')}", fontsize=9)
        first.grid(True, alpha=0.3)
        first.legend(fontsize=7, loc="best")
    for model, entry in boundaries.items():
        if model == "copy" or not entry.get("per_k"):
            continue
        ax = middle if model == "chain_small" else right
        ks = [int(k) for k in entry["per_k"]]
        shape = f" {entry['shape']}" if "shape" in entry else ""
        for series, key, style in (
            ("hetero-cli", "hetero_us_per_boundary", "-o"),
            ("same sessions, bare loop", "bare_us_per_boundary", "--s"),
        ):
            ys = [row.get(key) for row in entry["per_k"].values()]
            if any(y is None for y in ys):
                continue
            ax.plot(ks, ys, style, label=f"{model}{shape} ({series})")
    middle.set_ylim(bottom=0)
    middle.set_title("forced CPU/OPENVINO alternation, 256 B boundary tensor", fontsize=9)
    right.set_title("forced alternation, 1 MiB boundary tensor and light/ models", fontsize=9)
    for ax in (middle, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks([2, 4, 8, 16], labels=["2", "4", "8", "16"])
        ax.set_xlabel("k: contiguous chunks alternating CPU / OPENVINO")
        ax.set_ylabel(
            "(median - mean of one ORT [CPU] and [OpenVINO, CPU] session) / boundaries (us)", fontsize=7
        )
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, loc="best")
    fig.suptitle("Boundary costs (bench/results/results.json: crossing, boundaries)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True
