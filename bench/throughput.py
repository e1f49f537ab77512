"""Async throughput: inferences per second with 1, 2 and 4 requests in flight on split models.

Each model is compiled once; every repeat then runs ``hetero_cli.app.benchmark.measure`` (what
``hetero benchmark -api async -nireq N`` runs: an AsyncInferQueue of N requests on the compiled model's
device pipeline) for each N, in a fresh seeded random order, plus the synchronous ``infer()`` loop for
reference. Figures: the median over the repeats, and the speed-up of each N over N = 1. Requests overlap
across devices, one subgraph per device at a time, so the speed-up is bounded by how evenly the work is
spread over the devices, and by the hardware they share.

Each subject runs twice: with every session's default threads, and with one thread per session
(``INFERENCE_NUM_THREADS=1`` for CPU and OPENVINO). Here both "devices" are the same few CPU cores: with
default threads each stage already uses every core, so overlapping stages can only compete for them; one
thread per session gives each device a core of its own, as distinct devices (a GPU and a CPU) have, which
is the case pipelining is for.

Subjects:

* ``mlp_sanitised``: automatic ``HETERO:OPENVINO,CPU``, subgraphs alternating OPENVINO and CPU;
* ``<light model>_split2`` (``squeezenet`` by default): manual affinities cutting it in two halves, CPU then
  OPENVINO, as the latency section's forced splits do;
* ``<light model>_pipeline_parallel``: the same model split by ``MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL``
  over OPENVINO, its memory set to hold half the weights (``AVAILABLE_DEVICE_MEM_SIZE``), then CPU.

This row alone: ``.venv/bin/python bench/throughput.py --pipeline-parallel [--model NAME] [--quick]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import graphs
import runtimes

import hetero_cli
from hetero_cli.app import benchmark
from hetero_cli.placement import memory_split

NIREQ = (1, 2, 4)
THREADS = (0, 1)  # threads per session: each runtime's default, then one (a core per device)


@dataclass(frozen=True)
class Plan:
    """How long and how often each configuration is measured."""

    repeats: int
    budget_s: float
    warmup: int

    @classmethod
    def of(cls, quick: bool) -> Plan:
        """A few hundred milliseconds for --quick, seconds for a full run."""
        return cls(repeats=2, budget_s=0.3, warmup=2) if quick else cls(repeats=3, budget_s=2.5, warmup=10)


@dataclass(frozen=True)
class Subject:
    """A split model to measure: a name, its file, and how it is compiled."""

    name: str
    path: Path
    split: int | None  # None: automatic placement; k: manual affinities in k chunks alternating ``devices``
    device: str = "HETERO:OPENVINO,CPU"
    devices: tuple[str, str] = runtimes.SPLIT_DEVICES
    #: the first device's share of the weights, split by MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL with
    #: its memory set to hold that share (None: ``split`` decides)
    memory_share: float | None = None


def subjects(models: Sequence[Any]) -> list[Subject]:
    """From the harness's models: mlp_sanitised (automatic split) and the first light/ model cut in two."""
    out = [Subject(m.name, m.path, None) for m in models if m.name == "mlp_sanitised"]
    out += [Subject(f"{m.name}_split2", m.path, 2) for m in models if m.kind == "light"][:1]
    out += [pipeline_subject(m.name, m.path) for m in models if m.kind == "light"][:1]
    return out


def pipeline_subject(name: str, path: Path) -> Subject:
    """``name`` split by MODEL_DISTRIBUTION_POLICY=PIPELINE_PARALLEL, OPENVINO holding half the weights."""
    return Subject(f"{name}_pipeline_parallel", path, None, memory_share=0.5)


def compile_subject(subject: Subject) -> hetero_cli.CompiledModel:
    """The subject compiled with PERFORMANCE_HINT=THROUGHPUT (a session per subgraph: the pipeline stages
    requests in flight overlap on); a memory split's first device gets the memory for its share."""
    if subject.memory_share is None:
        return runtimes.compile_hetero(
            subject.path, subject.device, subject.split, subject.devices, runtimes.THROUGHPUT
        )
    core = hetero_cli.Core()
    model = core.read_model(subject.path)
    weights = sum(memory_split.weight_bytes(model).values())
    memory = int(memory_split.NEED_FACTOR * subject.memory_share * weights)
    config = runtimes.hetero_config(runtimes.THROUGHPUT) or {}
    config.setdefault("OPENVINO", {})["AVAILABLE_DEVICE_MEM_SIZE"] = memory
    config["MODEL_DISTRIBUTION_POLICY"] = "PIPELINE_PARALLEL"
    return core.compile_model(model, subject.device, config)


def measure_subject(subject: Subject, plan: Plan, threads: int = 0, seed: int = 0) -> dict[str, Any]:
    """Throughput of one subject: sync, then every nireq, ``plan.repeats`` times in random order."""
    with runtimes.threads_set(threads):
        compiled = compile_subject(subject)
    feeds = graphs.random_feeds(runtimes.model_inputs(subject.path), seed=seed)
    batch = benchmark.batch_size({k: v.shape for k, v in feeds.items()})
    sets = [feeds] * max(NIREQ)
    request = compiled.create_infer_request()
    for _ in range(plan.warmup):
        request.infer(feeds)
    configs: list[int | str] = ["sync", *NIREQ]
    fps: dict[str, list[float]] = {str(c): [] for c in configs}
    latency: dict[str, list[float]] = {str(c): [] for c in configs}
    order = random.Random(seed)
    for _ in range(plan.repeats):
        for config in order.sample(configs, len(configs)):
            api, nireq = ("sync", 1) if config == "sync" else ("async", int(config))
            result = benchmark.measure(
                compiled, sets, nireq=nireq, api=api, niter=None, duration_s=plan.budget_s, batch=batch
            )
            fps[str(config)].append(result.count * 1000.0 / result.duration_ms)
            latency[str(config)].append(result.latency_median_ms)
    entry: dict[str, Any] = {
        "model": subject.name,
        "threads": threads,
        "path": subject.path.name,
        "device": subject.device,
        "split": subject.split,
        "subgraphs": len(compiled.subgraphs),
        "devices": [s.device for s in compiled.subgraphs],
        "configs": {},
    }
    base = statistics.median(fps["1"])
    for config in configs:
        key = str(config)
        median = statistics.median(fps[key])
        entry["configs"][key] = {
            "fps": fps[key],
            "median_fps": median,
            "median_latency_ms": statistics.median(latency[key]),
            "speedup_vs_nireq1": median / base if base else None,
        }
    return entry


def section(run: Any, models: Sequence[Any]) -> dict[str, Any]:
    """The harness's throughput section: {"settings": ..., "models": {name: entry or {"error": ...}}}."""
    plan = Plan.of(run.settings.quick)
    out: dict[str, Any] = {
        "settings": {
            "nireq": list(NIREQ),
            "repeats": plan.repeats,
            "budget_s": plan.budget_s,
            "threads": list(THREADS),
        },
        "runs": [],
    }
    for subject in subjects(models):
        for threads in THREADS:
            label = "default threads" if threads == 0 else f"{threads} thread(s) per session"
            run.progress(f"throughput: {subject.name}, {label}, sync and nireq {', '.join(map(str, NIREQ))}")
            began = time.perf_counter()
            try:
                entry = measure_subject(subject, plan, threads)
            except Exception as exc:  # one model failing is a result, not the end of the run
                error = run.error(f"throughput {subject.name} threads={threads}", exc)
                out["runs"].append({"model": subject.name, "threads": threads, "error": error})
                continue
            entry["wall_s"] = time.perf_counter() - began
            out["runs"].append(entry)
    return out


def main() -> None:
    """Measure one subject alone and print its rows: ``--pipeline-parallel`` (the memory split)."""
    import report

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipeline-parallel", action="store_true", required=True)
    parser.add_argument("--model", default="squeezenet", choices=graphs.LIGHT_MODELS)
    parser.add_argument("--quick", action="store_true", help="a few hundred milliseconds per measure")
    args = parser.parse_args()
    plan = Plan.of(args.quick)
    subject = pipeline_subject(args.model, graphs.light_path(args.model))
    runs = [measure_subject(subject, plan, threads) for threads in THREADS]
    section = {"settings": {"repeats": plan.repeats, "budget_s": plan.budget_s}, "runs": runs}
    from rich.console import Console

    Console().print(report.throughput_table(section))
    for entry in runs:
        print(f"threads={entry['threads']}: subgraphs on {', '.join(entry['devices'])}")


if __name__ == "__main__":
    main()
