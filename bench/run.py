"""hetero-cli benchmark harness: hetero-cli against one ORT session and native OpenVINO, in one run.

    .venv/bin/python bench/run.py                 # full run (make bench): bench/results/
    .venv/bin/python bench/run.py --quick         # a few iterations, 2 models: bench/results/tmp/

Sections (each also in the JSON file):

1. latency - per model, every runtime compiled once here (its outputs checked), then timed each alone in a
   worker process of its own, in rounds of a seeded order (bench/measure.py per_process: hetero-cli's one
   measuring method, hetero_cli.app.measure) with seeded uniform [0, 1) inputs, in
   groups: one ORT session [CPU] with HETERO:CPU; one ORT session [OpenVINO, CPU] with automatic
   HETERO:OPENVINO,CPU and native OpenVINO (f32); forced splits into k = 2, 4, 8, 16 subgraphs, and on the
   synthetic chains the split's own sessions chained bare. Median, min, max, ratio to the baseline.
2. crossing - a forced split against ORT's own split of the same model (bench/crossing.py): what one
   boundary crossing costs beyond ORT's in-session crossing (the target's figure).
3. boundaries - per-boundary overhead of the forced splits, (median - baseline) / boundaries, with the
   mean of the two one-session medians as the compute-matched baseline (half the nodes run on each EP),
   and the slope of latency against boundaries; a large-tensor chain against a small one tells whether a
   boundary copies its tensor. Plotted to boundary_overhead.png.
4. phases - compile time split into query (probe sessions), partition, subgraph export and EP compile;
   loop_compile - the same for table recognisers from PyPI wheels whose OpenVINO probe fails on part of
   them (a Loop the EP cannot compile), against one ORT [CPU] session (``--sections loop_compile`` alone).
   reuse - a fresh automatic compile against importing its export and a compile CACHE_DIR loads, as paired
   ratios, on mlp_sanitised and the placement section's real models (bench/reuse.py; issue 31).
5. rss - peak RSS per runtime, each in a fresh interpreter.
6. partition scaling - partition() alone on 10k- and 100k-node synthetic graphs.
7. throughput - inferences/s with 1, 2 and 4 async requests in flight on split models (bench/throughput.py).
   concurrency - two independent recurrent branches on OPENVINO and CPU run at once inside one inference,
   against the same split in turn and one ORT session (default threads, 1 thread, ORT_PARALLEL;
   bench/concurrency.py; issue 45): judged at hidden 64, 800 steps; issue 45's hidden 128, 200 steps shown.
8. placement - ``hetero tune``'s placement against the automatic plan and each single-device runtime, with
   the tuning time, on light/ models and real models from PyPI wheels (bench/placement.py).

Then every target of issues 6, 21 and 31 is checked: one PASS / FAIL / SKIP line each, with the figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import concurrency
import concurrency_real
import crossing
import graphs
import measure
import numpy as np
import onnx
import onnxruntime as ort
import phases
import placement
import report
import reuse
import rss
import runtimes
import scaling
import targets
import throughput
from rich.markup import escape

HERE = Path(__file__).resolve().parent
BASE = ("ort_cpu", "hetero_cpu", "ort_ov", "hetero_ov", "openvino")
# each comparison of a target timed on its own: twice the iterations of one group of five in the same time
BASE_GROUPS = {"cpu": ("ort_cpu", "hetero_cpu"), "openvino": ("ort_ov", "hetero_ov", "openvino")}
SPLITS = (2, 4, 8, 16)
CHAINS = {"chain_small": (1, 64), "chain_large": (256, 1024)}
CHAIN_LENGTH = 16
HEAVY = ("vgg19", "resnet50", "densenet121")
SECTIONS = (
    "latency",
    "crossing",
    "phases",
    "loop_compile",
    "reuse",
    "rss",
    "partition",
    "throughput",
    "concurrency",
    "placement",
)
DEVICE_STRINGS = (("HETERO:OPENVINO,CPU", "OPENVINO,CPU"), ("HETERO:CPU", "CPU"))
# where the default compile ran a split plan in one session, the same compile with a session per subgraph:
# what the parallel session pool is measured on
STAGES = " THROUGHPUT"


@dataclass(frozen=True)
class Settings:
    """How much of everything a run measures."""

    quick: bool
    light: tuple[str, ...]
    synthetic: tuple[str, ...] = ("mlp_sanitised",)
    light_splits: tuple[int, ...] = (2, 16)  # a process per split and round: the chains keep all of SPLITS
    chain_splits: tuple[int, ...] = SPLITS
    rounds: int = 3  # the comparisons' rounds: each runtime timed in this many worker processes
    phase_repeats: int = 7
    rss_models: int = 0  # measure peak RSS on the first N non-chain models (0: all)
    partition_sizes: tuple[int, int] = (10_000, 100_000)
    partition_repeats: tuple[int, int] = (15, 5)
    partition_timeout_s: float = 150.0
    sections: tuple[str, ...] = SECTIONS
    threads: int = 0  # threads per session, 0: each runtime's default
    tune_budget_s: float = placement.TUNE_BUDGET_S  # hetero tune's budget per model (placement section)
    placement_rounds: int = 3  # the placement section's rounds: each runtime timed in 3 processes
    #: more rounds of the tuned placement and its contenders (placement.py: CONTENDER); 0: none
    contender_rounds: int = placement.CONTENDER_ROUNDS
    placement_models: tuple[str, ...] = ()  # the placement section's models (empty: its defaults)

    @classmethod
    def full(cls, light: Sequence[str], sections: Sequence[str], threads: int = 0) -> Settings:
        """The ``make bench`` run: every light/ model, each runtime timed in 3 worker processes."""
        return cls(quick=False, light=tuple(light), sections=tuple(sections), threads=threads)

    @classmethod
    def fast(cls, light: Sequence[str], sections: Sequence[str], threads: int = 0) -> Settings:
        """``--quick``: 1 light/ model plus the synthetic one, 1 round, small partition graphs."""
        return cls(
            quick=True,
            light=tuple(light),
            light_splits=(2, 16),
            chain_splits=(2, 16),
            phase_repeats=1,
            rss_models=1,
            partition_sizes=(500, 5_000),
            partition_repeats=(1, 1),
            partition_timeout_s=60.0,
            sections=tuple(sections),
            threads=threads,
            tune_budget_s=placement.QUICK_TUNE_BUDGET_S,
            placement_rounds=1,  # --quick checks the plumbing: one process per runtime
            contender_rounds=1,
            rounds=1,
        )


@dataclass
class Run:
    """A run in progress: settings, output, the results document, and a clock for progress lines."""

    settings: Settings
    out: Path
    console: Any
    results: dict[str, Any] = field(default_factory=dict)
    began: float = field(default_factory=time.perf_counter)

    def progress(self, text: str) -> None:
        """A dim progress line with the time since the start."""
        self.console.print(f"[dim][{time.perf_counter() - self.began:6.1f} s] {text}[/dim]", soft_wrap=True)

    def error(self, where: str, exc: BaseException) -> str:
        """Record a failure (the run goes on) and return its one-line description."""
        text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
        self.results.setdefault("errors", []).append(
            {"where": where, "error": text, "traceback": traceback.format_exc(limit=6)}
        )
        self.console.print(f"[red]{escape(where)}: {escape(text)}[/red]", soft_wrap=True)
        return text


# --- models ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subject:
    """A model the harness measures: where its file is, and which groups of runtimes it gets."""

    name: str
    path: Path
    kind: str  # "light", "synthetic" (automatic split) or "chain" (forced splits, k exact)
    threads: int | None = None  # threads per session for this model whatever --threads says

    def groups(self, settings: Settings) -> dict[str, list[str]]:
        """Runtime groups, each timed interleaved on its own, in rotation order.

        Forced splits (many sessions, each with its own threads) are timed apart from the base runtimes,
        so their threads never run next to the base comparisons; each group has its own baselines.
        """
        if self.kind == "chain":
            ks = settings.chain_splits
            splits = [*(f"split_k{k}" for k in ks), *(f"chain_k{k}" for k in ks)]
            return {"splits": ["ort_cpu", "hetero_cpu", "ort_ov", *splits]}
        groups = {name: list(ids) for name, ids in BASE_GROUPS.items()}
        if self.kind == "synthetic":  # the automatic split also as one session per subgraph, not judged
            groups["openvino"].append("hetero_ov_stages")
        if self.kind == "light" and settings.light_splits:
            groups["splits"] = ["ort_cpu", "ort_ov", *(f"split_k{k}" for k in settings.light_splits)]
        return groups


def subjects(settings: Settings, tmp: Path) -> list[Subject]:
    """Light/ models by path; synthetic ones written to ``tmp`` (native OpenVINO reads a file too)."""
    out = [Subject(name, graphs.light_path(name), "light") for name in settings.light]
    if "mlp_sanitised" in settings.synthetic:
        path = tmp / "mlp_sanitised.onnx"
        onnx.save(graphs.mlp_sanitised(), path)
        out.append(Subject("mlp_sanitised", path, "synthetic"))
    for name, shape in CHAINS.items():
        path = tmp / f"{name}.onnx"
        onnx.save(graphs.softmax_chain(CHAIN_LENGTH, shape), path)
        # The 1 MiB chain only asks whether a boundary's cost grows with its tensor: one thread per session
        # keeps the answer out of reach of thread-pool contention, which on a loaded machine swamps it.
        out.append(Subject(name, path, "chain", threads=1 if name == "chain_large" else None))
    return out


# --- latency --------------------------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200] if text else ''}"


def latency_group(
    run: Run,
    subject: Subject,
    name: str,
    ids: list[str],
    feeds: dict[str, np.ndarray],
    reference: str = "ort_cpu",
) -> dict[str, Any]:
    """Compile the runtimes ``ids`` for ``subject``, check they agree with ``reference``'s outputs, then
    time each alone in its own worker process, in rounds (measure.per_process)."""
    settings = run.settings
    prepared: dict[str, runtimes.Prepared] = {}
    errors: dict[str, str] = {}
    splits: dict[int, runtimes.Prepared] = {}
    for rid in ids:
        try:
            prepared[rid] = runtimes.prepare(rid, subject.path, feeds, splits)
        except Exception as exc:  # one runtime failing is a result, not the end of the run
            errors[rid] = _first_line(exc)
            continue
        if rid.startswith("split_k"):
            splits[int(rid[7:])] = prepared[rid]
    expected = prepared[reference].outputs() if reference in prepared else None
    diffs = {
        rid: runtimes.max_abs_diff(p.outputs(), expected) if expected else None for rid, p in prepared.items()
    }
    guesses = {rid: measure.guess_ms(p.infer) for rid, p in prepared.items()}
    shapes = {rid: (p.subgraphs, p.boundaries, p.sessions, p.compile_s) for rid, p in prepared.items()}
    prepared.clear()  # nothing of this process runs while the workers time
    splits.clear()
    gc.collect()
    found, wall = measure.per_process(
        {rid: measure.spec(rid, subject.path) for rid in shapes},
        feeds,
        rounds=settings.rounds,
        guesses=guesses,
    )
    errors.update({rid: m.error for rid, m in found.items() if m.error and not m.process_ms})
    samples = {rid: m for rid, m in found.items() if m.process_ms}
    stats = {rid: measure.stats_of(m) for rid, m in samples.items()}
    group: dict[str, Any] = {
        "iterations": settings.rounds,
        "method": "alone in its process, blocks in turns",
        "wall_s": wall,
        "runtimes": {},
        "errors": errors,
    }
    for rid, m in samples.items():
        spec = runtimes.spec(rid)
        subgraphs, boundaries, sessions, compile_s = shapes[rid]
        row: dict[str, Any] = {
            "label": spec.label,
            "subgraphs": subgraphs,
            "boundaries": boundaries,
            "sessions": sessions,
            "compile_s": compile_s,
            "stats": stats[rid].to_dict(),
            "process_ms": m.process_ms,
            "noise": m.noise,
            f"max_abs_diff_vs_{reference}": diffs[rid],
            "baseline": list(spec.baseline),
            "ratio": None,
        }
        bases = [stats[b].median_ms for b in spec.baseline if b in stats]
        if spec.baseline and len(bases) == len(spec.baseline):
            row["baseline_median_ms"] = statistics.fmean(bases)
            labels = [runtimes.spec(b).label for b in spec.baseline]
            row["baseline_label"] = labels[0] if len(labels) == 1 else "mean(" + ", ".join(labels) + ")"
            row["ratio"] = stats[rid].median_ms / row["baseline_median_ms"]
            row["paired_ratio"] = measure.block_ratios(m, [samples[b] for b in spec.baseline])
        bare = f"chain_k{rid[7:]}" if rid.startswith("split_k") else None
        if bare in samples:  # hetero-cli over the same sessions chained bare, block by block
            row["minus_bare_us"] = measure.block_differences_us(m, samples[bare])
        group["runtimes"][rid] = row
    return group


def latency(
    run: Run, subject: Subject, groups: dict[str, list[str]] | None = None, reference: str = "ort_cpu"
) -> dict[str, Any]:
    """Every runtime group of ``subject`` (``groups``, default its own), one after the other, on the same
    seeded inputs; outputs are compared with ``reference``'s."""
    feeds = graphs.random_feeds(runtimes.model_inputs(subject.path), seed=0)
    entry: dict[str, Any] = {
        "path": str(subject.path) if subject.kind == "light" else subject.path.name,
        "kind": subject.kind,
        "inputs": {name: list(value.shape) for name, value in feeds.items()},
        "threads": run.settings.threads if subject.threads is None else subject.threads,
        "groups": {},
    }
    for name, ids in (groups or subject.groups(run.settings)).items():
        run.progress(f"latency: {subject.name}, {name}: {', '.join(ids)}")
        try:
            with runtimes.threads_set(subject.threads):
                group = latency_group(run, subject, name, ids, feeds, reference)
        except Exception as exc:
            group = {"error": run.error(f"latency {subject.name} {name}", exc)}
        entry["groups"][name] = group
        if "runtimes" in group:
            group["threads"] = entry["threads"]
            run.console.print(report.latency_table(f"{subject.name} ({name})", group))
    return entry


def boundary_analysis(entry: dict[str, Any]) -> dict[str, Any] | None:
    """Per-boundary overhead of the forced splits in one model's latency entry (its "splits" group)."""
    rts = entry["groups"].get("splits", {}).get("runtimes")
    if not rts:
        return None
    if "ort_cpu" not in rts or "ort_ov" not in rts:
        return None
    mix_ms = statistics.fmean([rts["ort_cpu"]["stats"]["median_ms"], rts["ort_ov"]["stats"]["median_ms"]])
    per_k: dict[str, Any] = {}
    points: dict[str, list[tuple[float, float]]] = {"hetero": [], "bare": [], "hetero_minus_bare": []}
    for k in SPLITS:
        split = rts.get(f"split_k{k}")
        if split is None or split["boundaries"] == 0:
            continue
        b = split["boundaries"]
        row: dict[str, Any] = {
            "subgraphs": split["subgraphs"],
            "boundaries": b,
            "hetero_us_per_boundary": (split["stats"]["median_ms"] - mix_ms) * 1e3 / b,
            "bare_us_per_boundary": None,
        }
        points["hetero"].append((b, split["stats"]["median_ms"] * 1e3))
        chain = rts.get(f"chain_k{k}")
        if chain is not None:
            row["bare_us_per_boundary"] = (chain["stats"]["median_ms"] - mix_ms) * 1e3 / b
            points["bare"].append((b, chain["stats"]["median_ms"] * 1e3))
        if split.get("minus_bare_us") is not None:
            row["hetero_minus_bare_us"] = split["minus_bare_us"]
            points["hetero_minus_bare"].append((b, split["minus_bare_us"]))
        per_k[str(k)] = row
    if not per_k:
        return None
    slopes: dict[str, float | None] = {}
    for series, pts in points.items():
        distinct = {x for x, _ in pts}
        slopes[series] = measure.fit_line(*zip(*pts, strict=True))[0] if len(distinct) > 1 else None
    result: dict[str, Any] = {
        "kind": entry["kind"],
        "baseline_ms": mix_ms,
        "per_k": per_k,
        "slope_us": slopes,
    }
    if "hetero_cpu" in rts:
        result["hetero_fixed_us"] = (
            rts["hetero_cpu"]["stats"]["median_ms"] - rts["ort_cpu"]["stats"]["median_ms"]
        ) * 1e3
    return result


def memcpy_us(shape: tuple[int, ...], repeats: int = 200) -> float:
    """Median time of one numpy copy of a float32 tensor of ``shape``, in microseconds."""
    src = np.random.default_rng(0).random(shape, dtype=np.float32)
    dst = np.empty_like(src)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def copy_analysis(boundaries: dict[str, Any]) -> dict[str, Any] | None:
    """Does a boundary copy its tensor? The per-boundary slope on a 1 MiB tensor minus that on 256 bytes.

    hetero-cli's own part (``extra_us``): the per-iteration difference between hetero-cli and the bare
    chaining of the very same sessions (median per k), its slope against boundaries, large tensor minus
    small. It cancels whatever the EPs do inside their sessions, and the load the two runs share. The EPs'
    part (``ep_extra_us``: the bare slopes, large minus small) is reported next to it.
    """
    small, large = boundaries.get("chain_small"), boundaries.get("chain_large")
    if not small or not large:
        return None
    ds, dl = small["slope_us"].get("hetero_minus_bare"), large["slope_us"].get("hetero_minus_bare")
    bs, bl = small["slope_us"].get("bare"), large["slope_us"].get("bare")
    if ds is None or dl is None or bs is None or bl is None:
        return None
    shape = CHAINS["chain_large"]
    return {
        "tensor_bytes": int(np.prod(shape)) * 4,
        "small_tensor_bytes": int(np.prod(CHAINS["chain_small"])) * 4,
        "memcpy_us": memcpy_us(shape),
        "extra_us": dl - ds,
        "ep_extra_us": bl - bs,
    }


def section_latency(run: Run, models: list[Subject]) -> None:
    """Latency of every model, then the boundary analysis and the plot."""
    run.results["latency"] = {}
    boundaries: dict[str, Any] = {}
    for subject in models:
        try:
            entry = latency(run, subject)
        except Exception as exc:
            run.results["latency"][subject.name] = {
                "kind": subject.kind,
                "error": run.error(subject.name, exc),
            }
            continue
        run.results["latency"][subject.name] = entry
        analysis = boundary_analysis(entry)
        if analysis is not None:
            if subject.kind == "chain":
                analysis["shape"] = list(CHAINS[subject.name])
            boundaries[subject.name] = analysis
    copy = copy_analysis(boundaries)
    if copy is not None:
        boundaries["copy"] = copy
    run.results["boundaries"] = boundaries
    if boundaries:
        run.console.print(report.boundary_table(boundaries))


def draw(run: Run) -> None:
    """The boundary plot, from the crossing and latency sections (whichever ran)."""
    boundaries, crossing_result = run.results.get("boundaries", {}), run.results.get("crossing", {})
    if not boundaries and not crossing_result.get("per_cut"):
        return
    png = run.out / "boundary_overhead.png"
    if report.plot(boundaries, crossing_result, png, targets.BOUNDARY_US):
        run.results["plot"] = png.name
        run.progress(f"plot: {png}")


# --- phases, memory, partition --------------------------------------------------------------------------


def section_phases(run: Run, models: list[Subject]) -> None:
    """Compile-time breakdown for both device strings on every non-chain model."""
    out: dict[str, Any] = {}
    run.results["phases"] = out
    light = [s for s in models if s.kind != "chain"]
    has_openvino = "OpenVINOExecutionProvider" in ort.get_available_providers()
    strings = [(d, p) for d, p in DEVICE_STRINGS if has_openvino or "OPENVINO" not in p]
    if not has_openvino:
        run.console.print(
            "[yellow]phases: HETERO:OPENVINO,CPU skipped, this ONNX Runtime has no OpenVINO EP[/yellow]"
        )

    def alone(subject: Subject, device: str, providers: str, hint: str | None = None) -> dict[str, Any]:
        """phases.phases_alone's row, its failure recorded with run.error."""
        label = f"phases {subject.name} {device}" + (f" PERFORMANCE_HINT={hint}" if hint else "")
        row = phases.phases_alone(subject.path, device, providers, run.settings.phase_repeats, hint=hint)
        return {"error": run.error(label, RuntimeError(row["error"]))} if "error" in row else row

    for subject in light:  # each model and device string timed in a fresh process (phases.phases_alone)
        out[subject.name] = {}
        for device, providers in strings:
            run.progress(f"phases: {subject.name} {device}")
            row = out[subject.name][device] = alone(subject, device, providers)
            if row.get("one_session"):
                run.progress(f"phases: {subject.name} {device}, PERFORMANCE_HINT=THROUGHPUT")
                out[subject.name][device + STAGES] = alone(subject, device, providers, runtimes.THROUGHPUT)
    if light:
        try:
            run.results["gil"] = {
                providers: phases.gil_during_session_init(light[0].path, providers)
                for _, providers in strings
            }
        except Exception as exc:
            run.error("gil probe", exc)
    run.console.print(report.phases_table(out))


def section_loop_compile(run: Run) -> None:
    """Compile-time breakdown of the models whose OpenVINO probe fails on part of them (phases.LOOP_MODELS)
    against one ORT [CPU] session: their first compile must not bisect the failing probe."""
    out: dict[str, Any] = {}
    run.results["loop_compile"] = out
    if "OpenVINOExecutionProvider" not in ort.get_available_providers():
        run.console.print("[yellow]loop_compile: skipped, this ONNX Runtime has no OpenVINO EP[/yellow]")
        return
    paths = {}
    for name in phases.LOOP_MODELS[:1] if run.settings.quick else phases.LOOP_MODELS:
        try:
            paths[name] = placement.real_path(name)
        except RuntimeError as exc:
            error = {"error": run.error(f"loop_compile {name}", exc)}
            out[name] = {phases.LOOP_DEVICE: error}
    run.progress(f"loop_compile: {', '.join(paths)} {phases.LOOP_DEVICE} against ORT [CPU]")
    try:
        out.update(phases.loop_phases(paths, run.settings.phase_repeats))
    except Exception as exc:
        run.error("loop_compile", exc)
    run.console.print(report.phases_table(out))


def section_reuse(run: Run, models: list[Subject], tmp: Path) -> None:
    """A fresh automatic HETERO:OPENVINO,CPU compile against importing its export and a compile CACHE_DIR
    loads (bench/reuse.py), on the synthetic split models, the real models of the placement section, and
    the table recognisers whose automatic plan has several subgraphs (phases.LOOP_MODELS)."""
    if skipped_without_openvino(run, "reuse"):
        return
    out: dict[str, Any] = {}
    run.results["reuse"] = out
    names = () if run.settings.quick else tuple(placement.REAL)  # --quick: the synthetic model only
    chosen = [(s.name, "synthetic", s.path) for s in models if s.kind == "synthetic"]
    chosen += [(name, kind, path) for name, kind, path in placement.subjects(names, tmp) if kind == "real"]
    for name in () if run.settings.quick else phases.LOOP_MODELS:
        try:
            chosen.append((name, "real", placement.real_path(name)))
        except RuntimeError as exc:
            out[name] = {"kind": "real", "error": run.error(f"reuse {name}", exc)}
    for name, kind, path in chosen:
        run.progress(f"reuse: {name}")
        try:
            out[name] = {
                "kind": kind,
                **reuse.reuse(path, placement.DEVICE, min(run.settings.phase_repeats, 5)),
            }
        except Exception as exc:
            out[name] = {"kind": kind, "error": run.error(f"reuse {name}", exc)}
            continue
        row = out[name]
        run.console.print(
            f"reuse {name}: {row['subgraphs']} subgraph(s), fresh {row['fresh_s']:.3f} s, import "
            f"{row['import_s']:.3f} s ({row['import_ratio']:.3f}x), cached {row['cached_s']:.3f} s "
            f"({row['cached_ratio']:.3f}x); OpenVINO's blob cache, a process per compile: "
            f"{row['blob_cache']['blobs_ratio']:.3f}x CACHE_DIR alone",
            soft_wrap=True,
        )


def section_rss(run: Run, models: list[Subject]) -> None:
    """Peak RSS of each base runtime on every non-chain model, each in a fresh interpreter (2 at a time:
    memory does not mind sharing the CPUs)."""
    measured = [s for s in models if s.kind != "chain"]
    if run.settings.rss_models:
        measured = measured[: run.settings.rss_models]
    jobs = [
        (subject, rid, runtimes.model_inputs(subject.path)) for subject in measured for rid in ("none", *BASE)
    ]
    run.progress(f"rss: {len(jobs)} fresh processes, 2 at a time")
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda job: rss.measure(job[1], job[0].path, job[2]), jobs))
    out: dict[str, Any] = {}
    for (subject, rid, _), result in zip(jobs, done, strict=True):
        if "peak_mib" in result and "imports_mib" in result:
            result["increase_mib"] = result["peak_mib"] - result["imports_mib"]
        elif "error" in result:
            run.results.setdefault("errors", []).append(
                {"where": f"rss {subject.name} {rid}", "error": result["error"]}
            )
        out.setdefault(subject.name, {})[rid] = result
    run.results["rss"] = out
    run.console.print(report.rss_table(out))


def section_partition(run: Run) -> None:
    """partition() alone on each synthetic graph kind at both sizes, each kind in its own interpreter."""
    settings = run.settings
    sizes = list(settings.partition_sizes)
    kinds: dict[str, Any] = {}
    for kind in scaling.KINDS:
        run.progress(f"partition scaling: {kind} {sizes}")
        entry = scaling.measure(kind, sizes, list(settings.partition_repeats), settings.partition_timeout_s)
        by_size = entry.get("sizes", {})
        small, big = by_size.get(str(sizes[0]), {}), by_size.get(str(sizes[1]), {})
        if "median_s" in small and "median_s" in big and small["median_s"] > 0:
            entry["ratio"] = big["median_s"] / small["median_s"]
        kinds[kind] = entry
    run.results["partition_scaling"] = {"sizes": sizes, "kinds": kinds}
    run.console.print(report.scaling_table(run.results["partition_scaling"]))


def skipped_without_openvino(run: Run, name: str) -> bool:
    """Record section ``name`` as skipped, saying why, when this ORT has no OpenVINO EP (its splits need it)."""
    if "OpenVINOExecutionProvider" in ort.get_available_providers():
        return False
    why = "needs the OpenVINO execution provider (onnxruntime-openvino): its splits are CPU / OPENVINO"
    run.results[name] = {"skipped": why}
    run.console.print(f"[yellow]{name}: skipped, {why}[/yellow]", soft_wrap=True)
    return True


def section_crossing(run: Run) -> None:
    """A forced split against ORT's own split of the same model: the cost of a crossing (crossing.py)."""
    if skipped_without_openvino(run, "crossing"):
        return
    run.results["crossing"] = crossing.section(run)
    run.console.print(report.crossing_table(run.results["crossing"]))


def section_concurrency(run: Run) -> None:
    """Two independent recurrent branches, at once and in turn, against one ORT session (concurrency.py);
    a real model's recurrent directions at once, in turn and as hetero tune placed them (concurrency_real.py)."""
    if skipped_without_openvino(run, "concurrency") | skipped_without_openvino(run, "concurrency_real"):
        return
    run.results["concurrency"] = concurrency.section(run)
    run.console.print(report.concurrency_table(run.results["concurrency"]))
    run.results["concurrency_issue_shape"] = concurrency.section(run, shape=concurrency.ISSUE_SHAPE)
    run.console.print(report.concurrency_table(run.results["concurrency_issue_shape"]))
    run.results["concurrency_real"] = concurrency_real.section(run)
    run.console.print(report.concurrency_real_table(run.results["concurrency_real"]))


def section_placement(run: Run, tmp: Path) -> None:
    """hetero tune's placement against the automatic plan and each single device (bench/placement.py)."""
    if skipped_without_openvino(run, "placement"):
        return
    run.results["placement"] = placement.section(run, tmp)
    run.console.print(report.placement_table(run.results["placement"]))


def section_throughput(run: Run, models: list[Subject]) -> None:
    """Async throughput with 1, 2 and 4 requests in flight on the split models (bench/throughput.py)."""
    if skipped_without_openvino(run, "throughput"):
        return
    run.results["throughput"] = throughput.section(run, models)
    run.console.print(report.throughput_table(run.results["throughput"]))


# --- main -----------------------------------------------------------------------------------------------


def busy_warnings(results: dict[str, Any]) -> list[str]:
    """Warnings when the machine was busy with other work while the figures were taken."""
    cpus = results["machine"].get("usable_cpus") or 1
    out = []
    for when in ("start", "end"):
        load = results.get(f"load_average_{when}")
        if load and load[0] > cpus:
            out.append(
                f"load average {load[0]:.1f} at the {when} on {cpus} CPU(s): other work shared the machine, "
                "so timing ratios carry its noise (see each comparison's paired-ratio quartiles; "
                "--threads=1 is much less sensitive)"
            )
    return out


def base_parser(doc: str, results: str) -> argparse.ArgumentParser:
    """A harness script's parser with the options every one has: --quick, --out (default ``results``),
    --models; ``doc`` is the script's docstring."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a few iterations on 2 models (for tests)")
    parser.add_argument(
        "--out", type=Path, help=f"results folder (default {results}, --quick: {results}/tmp)"
    )
    parser.add_argument(
        "--models", help=f"comma-separated light/ models (default: all of {','.join(graphs.LIGHT_MODELS)})"
    )
    return parser


def light_models(args: argparse.Namespace) -> tuple[str, ...]:
    """The light/ models of a run: ``--models``, else SqueezeNet for ``--quick``, else all; SystemExit(2)
    naming the choices when one is unknown."""
    default = ("squeezenet",) if args.quick else graphs.LIGHT_MODELS
    light = tuple(m.strip() for m in args.models.split(",")) if args.models else default
    bad = [m for m in light if m not in graphs.LIGHT_MODELS]
    if bad:
        print(
            f"unknown light/ model(s) {', '.join(bad)}: choose from {', '.join(graphs.LIGHT_MODELS)}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return light


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = base_parser(__doc__, "bench/results")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="threads per session for every runtime (default 0: each runtime's own default; 1 gives steadier "
        "figures on a shared, loaded machine)",
    )
    parser.add_argument(
        "--placement-models",
        help=f"comma-separated models of the placement section (default: all of {','.join(placement.MODELS)}; "
        f"--quick: {','.join(placement.QUICK_MODELS)})",
    )
    parser.add_argument(
        "--tune-budget",
        type=float,
        help=f"hetero tune's budget per model in seconds (default {placement.TUNE_BUDGET_S:g}; --quick: "
        f"{placement.QUICK_TUNE_BUDGET_S:g})",
    )
    parser.add_argument("--fail-on-target", action="store_true", help="exit 1 when a target fails")
    parser.add_argument(
        "--replot",
        action="store_true",
        help="only redraw boundary_overhead.png from the folder's results.json",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; 0 unless it could not run at all (or a target failed with --fail-on-target)."""
    args = parse(argv)
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        print(f"unknown section(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    light = light_models(args)
    if args.threads < 0:
        print("--threads must be 0 (defaults) or more", file=sys.stderr)
        return 2
    chosen = tuple(m.strip() for m in (args.placement_models or "").split(",") if m.strip())
    bad = [m for m in chosen if m not in placement.MODELS]
    if bad:
        print(
            f"unknown placement model(s) {', '.join(bad)}: choose from {', '.join(placement.MODELS)}",
            file=sys.stderr,
        )
        return 2
    if args.tune_budget is not None and args.tune_budget <= 0:
        print("--tune-budget must be a positive number of seconds", file=sys.stderr)
        return 2
    runtimes.set_threads(args.threads)
    settings = (Settings.fast if args.quick else Settings.full)(light, sections, args.threads)
    settings = replace(settings, placement_models=chosen)
    if args.tune_budget is not None:
        settings = replace(settings, tune_budget_s=args.tune_budget)
    out = args.out or (HERE / "results" / "tmp" if args.quick else HERE / "results")
    if args.replot:
        results = json.loads((out / "results.json").read_text())
        ok = report.plot(
            results.get("boundaries", {}),
            results.get("crossing", {}),
            out / "boundary_overhead.png",
            targets.BOUNDARY_US,
        )
        print(
            f"redrew {out / 'boundary_overhead.png'}"
            if ok
            else "matplotlib is missing: pip install -e '.[bench]'"
        )
        return 0 if ok else 1
    out.mkdir(parents=True, exist_ok=True)
    run = Run(settings, out, report.console())
    run.results.update(
        {
            "schema": 1,
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "argv": sys.argv,
            "quick": settings.quick,
            "started": report.now(),
            "machine": report.machine(),
            "load_average_start": report.load_average(),
            "settings": asdict(settings),
        }
    )
    machine = run.results["machine"]
    run.console.print(
        f"[bold]hetero-cli bench[/bold] {'(quick)' if settings.quick else ''} on {machine['cpu']}, "
        f"{machine['usable_cpus']} CPUs, {machine['memory_gib']} GiB; ORT {machine['onnxruntime']} "
        f"(OpenVINO {machine['openvino_in_onnxruntime']}), OpenVINO {machine['openvino']}; "
        f"threads per session: {settings.threads or 'runtime defaults'}; load average {run.results['load_average_start']}",
        soft_wrap=True,
    )
    with tempfile.TemporaryDirectory(prefix="hetero_bench_") as tmp:
        models = subjects(settings, Path(tmp))
        steps: list[tuple[str, Callable[[], None]]] = [
            ("latency", lambda: section_latency(run, models)),
            ("crossing", lambda: section_crossing(run)),
            ("phases", lambda: section_phases(run, models)),
            ("loop_compile", lambda: section_loop_compile(run)),
            ("reuse", lambda: section_reuse(run, models, Path(tmp))),
            ("rss", lambda: section_rss(run, models)),
            ("partition", lambda: section_partition(run)),
            ("throughput", lambda: section_throughput(run, models)),
            ("concurrency", lambda: section_concurrency(run)),
            ("placement", lambda: section_placement(run, Path(tmp))),
        ]
        for name, step in steps:
            if name not in sections:
                continue
            try:
                step()
            except Exception as exc:
                run.error(f"section {name}", exc)
    try:
        draw(run)
    except Exception as exc:
        run.error("plot", exc)
    run.results["load_average_end"] = report.load_average()
    warnings = busy_warnings(run.results)
    if warnings:
        run.results["warnings"] = warnings
        for warning in warnings:
            run.console.print(f"[yellow]warning: {escape(warning)}[/yellow]", soft_wrap=True)
    checked = targets.check(run.results)
    run.results["targets"] = [t.to_dict() for t in checked]
    run.results["finished"] = report.now()
    run.results["duration_s"] = time.perf_counter() - run.began
    report.print_targets(run.console, checked)
    path = out / "results.json"
    report.write_json(run.results, path)
    run.console.print(
        f"\n{sum(t.status == 'PASS' for t in checked)} PASS, {sum(t.status == 'FAIL' for t in checked)} FAIL, "
        f"{sum(t.status == 'SKIP' for t in checked)} SKIP in {run.results['duration_s']:.0f} s; wrote {path}"
        + (f" and {out / run.results['plot']}" if "plot" in run.results else "")
    )
    if args.fail_on_target and any(t.status == "FAIL" for t in checked):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
