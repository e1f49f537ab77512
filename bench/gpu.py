"""CUDA rows of the harness: hetero-cli against one ORT session with [CUDA, CPU], on an NVIDIA GPU.

    make FLAVOUR=gpu bench-gpu          # where onnxruntime-gpu sees a GPU: bench/results/gpu/
    python bench/gpu.py --quick         # SqueezeNet + mlp_sanitised, a few iterations: bench/results/gpu/tmp/

Timed as run.py's latency section is (interleaved short blocks, bench/measure.py), on the light/ models
and mlp_sanitised, every session with its runtime's default threads (a GPU machine has cores to spare):

1. auto: one ORT session [CUDA, CPU] with automatic HETERO:GPU,CPU (query, partition, compile for the
   GPU). The ratio is reported, not judged: issue 6 sets its 1.05 limit for the OpenVINO analogue.
2. splits: forced splits into k = 2 and 4 chunks alternating GPU and CPU (manual affinities) with ORT
   [CUDA, CPU] and ORT [CPU]: what a crossing between GPU and host memory costs, its copies included.
3. throughput: a light/ model cut in two, GPU then CPU: async requests overlapping on two real devices
   (nireq 1, 2, 4: ``hetero benchmark -api async``'s loop, bench/throughput.py).
4. compile: compiling automatic HETERO:GPU,CPU against creating one ORT [CUDA, CPU] session, split into
   query, partition, export and EP compile (bench/phases.py), and how far a Python thread gets while ORT
   initialises a CUDA session (whether this binding lets the GIL go).
5. concurrency (issue 45, bench/concurrency.py's section, each runtime alone in its process at its own
   threads): ``split``, the two-branch LSTM model with branch a on GPU and b on CPU, HETERO:GPU,CPU at once
   (AUTO) against in turn (SEQUENTIAL), beside ORT [CPU] and HETERO:CPU CONCURRENT on it; ``branchy``, a
   model of one such branch per core (at most 16) on the CPU alone: HETERO:CPU CONCURRENT against one ORT
   CPU session (the faster of default threads and one thread) and ORT_PARALLEL.

Issue 45's GPU targets (targets.check_gpu, printed and in results.json): automatic HETERO:GPU,CPU at most
1.02x ORT [CUDA, CPU] (the auto group); the GPU|CPU split at once, and the branchy model on HETERO:CPU
CONCURRENT against each ORT session, faster by more than the noise. ``--sections`` runs some of the five.

Without a CUDA device it says so and exits 0, writing nothing.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import concurrency
import phases
import report
import run as harness
import runtimes
import targets
import throughput
from rich.table import Table

from hetero_cli.placement import devices as registry

HERE = Path(__file__).resolve().parent
DEVICE, PROVIDERS = "HETERO:GPU,CPU", "CUDA,CPU"
SPLITS = (2, 4)
GROUPS = {
    "auto": ["ort_cuda", "hetero_gpu"],
    "splits": ["ort_cuda", "ort_cpu", *(f"gsplit_k{k}" for k in SPLITS)],
}
PIPELINED = ("squeezenet", "resnet50")  # cut in two for the throughput rows, when in the run
SECTIONS = ("latency", "throughput", "compile", "concurrency")
#: the devices of the two-branch model's branches a and b in the concurrency rows
BRANCHES = ("GPU", "CPU")
#: the most branches of the branchy model: one per core, the GPU machine's 16
MOST_BRANCHES = 16


def gpu_description() -> str | None:
    """The GPU, its driver and memory as nvidia-smi reports them (None without nvidia-smi)."""
    if shutil.which("nvidia-smi") is None:
        return None
    done = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


def split_rows(entry: dict[str, Any]) -> dict[str, Any]:
    """Per forced split: boundaries, (median - mean of the two one-session medians) per boundary, and the
    slope between the splits (what one more crossing adds, the compute on each device about the same)."""
    rts = entry["groups"].get("splits", {}).get("runtimes", {})
    if "ort_cuda" not in rts or "ort_cpu" not in rts:
        return {}
    mix = statistics.fmean([rts["ort_cuda"]["stats"]["median_ms"], rts["ort_cpu"]["stats"]["median_ms"]])
    points = []
    out: dict[str, Any] = {"baseline_ms": mix, "per_k": {}}
    for k in SPLITS:
        row = rts.get(f"gsplit_k{k}")
        if row is None or not row["boundaries"]:
            continue
        median = row["stats"]["median_ms"]
        out["per_k"][str(k)] = {
            "subgraphs": row["subgraphs"],
            "boundaries": row["boundaries"],
            "median_ms": median,
            "us_per_boundary_vs_mix": (median - mix) * 1e3 / row["boundaries"],
        }
        points.append((row["boundaries"], median * 1e3))
    if len({b for b, _ in points}) > 1:
        (b0, t0), (b1, t1) = points[0], points[-1]
        out["slope_us"] = (t1 - t0) / (b1 - b0)
    return out


def summary_table(results: dict[str, Any]) -> Table:
    """One line per model: automatic split against ORT's, and what a GPU <-> CPU crossing costs."""
    table = Table(title="CUDA rows: hetero-cli against one ORT session [CUDA, CPU]", title_justify="left")
    for column in (
        "model",
        "ORT [CUDA, CPU] ms",
        "HETERO:GPU,CPU ms",
        "subgraphs",
        "ratio (paired)",
        "k=2 / k=4 split ms",
        "us per extra boundary",
    ):
        table.add_column(column, justify="left" if column == "model" else "right")
    for name, entry in results.get("latency", {}).items():
        auto = entry.get("groups", {}).get("auto", {}).get("runtimes", {})
        ort, hetero = auto.get("ort_cuda"), auto.get("hetero_gpu")
        splits = results.get("splits", {}).get(name, {})
        per_k = splits.get("per_k", {})
        table.add_row(
            name,
            f"{ort['stats']['median_ms']:.3f}" if ort else "-",
            f"{hetero['stats']['median_ms']:.3f}" if hetero else "-",
            str(hetero["subgraphs"]) if hetero else "-",
            f"{hetero['paired_ratio']['median']:.3f}" if hetero and "paired_ratio" in hetero else "-",
            " / ".join(f"{per_k[k]['median_ms']:.3f}" for k in per_k) or "-",
            f"{splits['slope_us']:.0f}" if "slope_us" in splits else "-",
        )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CUDA rows; 0 also where there is no CUDA device (nothing is measured then)."""
    parser = harness.base_parser(__doc__, "bench/results/gpu")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}"
    )
    args = parser.parse_args(argv)
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    if set(sections) - set(SECTIONS):
        parser.error(f"unknown section(s) in {args.sections}: choose from {','.join(SECTIONS)}")
    gpu = registry.lookup("GPU")
    if not registry.is_available(gpu):
        print(f"no CUDA device here, nothing measured: {registry.unavailable_reason(gpu)}")
        return 0
    light = harness.light_models(args)
    # each runtime timed alone in its own process, in rounds (bench/measure.py per_process), as run.py's
    settings = (harness.Settings.fast if args.quick else harness.Settings.full)(light, sections)
    out = args.out or (HERE / "results" / "gpu" / "tmp" if args.quick else HERE / "results" / "gpu")
    out.mkdir(parents=True, exist_ok=True)
    run = harness.Run(settings, out, report.console())
    machine = report.machine() | {"gpu": gpu_description()}
    run.results.update(
        {
            "schema": 1,
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "quick": settings.quick,
            "started": report.now(),
            "machine": machine,
            "settings": dataclasses.asdict(settings),
        }
    )
    run.console.print(
        f"[bold]hetero-cli bench, CUDA rows[/bold] on {machine['gpu']}; {machine['cpu']}, "
        f"{machine['usable_cpus']} CPUs; ORT {machine['onnxruntime']}; threads per session: runtime defaults",
        soft_wrap=True,
    )
    with tempfile.TemporaryDirectory(prefix="hetero_bench_gpu_") as tmp:
        models = [s for s in harness.subjects(settings, Path(tmp)) if s.kind != "chain"]
        if "latency" in sections:
            run.results["latency"] = {}
            for subject in models:
                try:
                    run.results["latency"][subject.name] = harness.latency(run, subject, GROUPS, "ort_cuda")
                except Exception as exc:  # one model failing is a result, not the end of the run
                    run.results["latency"][subject.name] = {"error": run.error(subject.name, exc)}
            run.results["splits"] = {
                name: split_rows(entry) for name, entry in run.results["latency"].items() if "groups" in entry
            }
        if "throughput" in sections:
            run.results["throughput"] = pipelining(run, models)
            run.console.print(report.throughput_table(run.results["throughput"]))
        if "compile" in sections:
            run.results["phases"] = compile_rows(run, models)
            run.console.print(report.phases_table(run.results["phases"]))
    if "concurrency" in sections:
        run.results["concurrency"] = concurrency_rows(run)
    if "latency" in sections:
        run.console.print(summary_table(run.results))
    checked = targets.check_gpu(run.results)
    run.results["targets"] = [t.to_dict() for t in checked]
    report.print_target_lines(run.console, "Targets of issue 45 on the GPU", checked)
    run.results["finished"] = report.now()
    run.results["duration_s"] = time.perf_counter() - run.began
    path = out / "results.json"
    report.write_json(run.results, path)
    run.console.print(
        f"\n{sum(t.status == 'PASS' for t in checked)} PASS, {sum(t.status == 'FAIL' for t in checked)} FAIL, "
        f"{sum(t.status == 'SKIP' for t in checked)} SKIP; {len(run.results.get('errors', []))} error(s) in "
        f"{run.results['duration_s']:.0f} s; wrote {path}"
    )
    return 0


def concurrency_rows(run: harness.Run) -> dict[str, Any]:
    """Issue 45's rows (concurrency.section): ``split``, the two-branch model's branches on GPU and CPU at
    once and in turn (and the CPU runtimes on it); ``branchy``, one branch per core (at most MOST_BRANCHES)
    on the CPU alone, HETERO:CPU CONCURRENT against one ORT session. Each printed as a table."""
    branches = max(2, min(MOST_BRANCHES, len(os.sched_getaffinity(0))))
    rows = {
        "split": {"devices": BRANCHES},
        "branchy": {"kinds": concurrency.CPU_KINDS, "branches": branches},
    }
    out: dict[str, Any] = {}
    for name, arguments in rows.items():
        try:
            out[name] = concurrency.section(run, **arguments)
        except Exception as exc:  # one row failing is a result, not the end of the run
            out[name] = {"error": run.error(f"concurrency {name}", exc)}
            continue
        run.console.print(report.concurrency_table(out[name], "|".join(BRANCHES)))
    return out


def compile_rows(run: harness.Run, models: Sequence[harness.Subject]) -> dict[str, Any]:
    """Compile time of automatic HETERO:GPU,CPU against one ORT [CUDA, CPU] session's creation, by phase;
    and the GIL probe on a CUDA session's initialisation (recorded as ``gil``)."""
    out: dict[str, Any] = {}
    if not models:
        return out
    phases.warm_up(models[0].path, [(DEVICE, PROVIDERS)])
    for subject in models:
        run.progress(f"compile: {subject.name}")
        try:
            measured = phases.phases(subject.path, DEVICE, PROVIDERS, run.settings.phase_repeats)
        except Exception as exc:
            measured = {"error": run.error(f"compile {subject.name}", exc)}
        out[subject.name] = {DEVICE: measured}
    try:
        run.results["gil"] = {PROVIDERS: phases.gil_during_session_init(models[0].path, PROVIDERS)}
    except Exception as exc:
        run.error("gil probe", exc)
    return out


def pipelining(run: harness.Run, models: Sequence[harness.Subject]) -> dict[str, Any]:
    """Async throughput of light/ models cut in two, GPU then CPU, with each session's default threads."""
    plan = throughput.Plan.of(run.settings.quick)
    section: dict[str, Any] = {
        "settings": {"nireq": list(throughput.NIREQ), "repeats": plan.repeats, "budget_s": plan.budget_s},
        "runs": [],
    }
    for m in models:
        if m.name not in PIPELINED:
            continue
        subject = throughput.Subject(
            f"{m.name}_gpu_cpu", m.path, 2, "HETERO:GPU,CPU", runtimes.GPU_SPLIT_DEVICES
        )
        run.progress(f"throughput: {subject.name}, sync and nireq {', '.join(map(str, throughput.NIREQ))}")
        try:
            section["runs"].append(throughput.measure_subject(subject, plan))
        except Exception as exc:
            section["runs"].append(
                {"model": subject.name, "threads": 0, "error": run.error(subject.name, exc)}
            )
    return section


if __name__ == "__main__":
    sys.exit(main())
