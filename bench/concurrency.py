"""Concurrency inside one inference (issue 45): a model of two independent recurrent branches
(graphs.two_branches: two stacked LSTMs each, hidden 128, 200 steps), its branches on OPENVINO and CPU.

Timed each alone in a worker process of its own, in rounds (bench/measure.py per_process), each at its own
thread setting (not the bench's --threads: the point is how each runtime uses the cores):

* ``ort_default`` / ``ort_1``: one ORT CPU session of the whole model, default threads / one intra-op thread;
* ``ort_parallel``: that session in ORT_PARALLEL (inter-op threads as many as the cores, intra-op 1);
* ``hetero_seq``: hetero-cli with the model's affinities, HETERO_CONCURRENCY=SEQUENTIAL (each session at
  its EP's default threads);
* ``hetero_conc``: the same split, HETERO_CONCURRENCY=AUTO (the branches at once, the cores shared);
* ``hetero_cpu_conc``: the model without affinities on HETERO:CPU, HETERO_CONCURRENCY=CONCURRENT (each
  branch a CPU subgraph of its own, the two at once, one intra-op thread each).

Ratios are paired block by block (the processes time their blocks in turns): each concurrent hetero runtime
against the faster of ort_default and ort_1 and against ort_parallel; hetero_conc against hetero_seq.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import graphs
import measure
import numpy as np
import onnx
import onnxruntime as ort

import hetero_cli
from hetero_cli.app.measure import RuntimeSpec

HIDDEN, STEPS, LAYERS = 128, 200, 2
KINDS = ("ort_default", "ort_1", "ort_parallel", "hetero_seq", "hetero_conc", "hetero_cpu_conc")
LABELS = {
    "ort_default": "ORT [CPU], default threads",
    "ort_1": "ORT [CPU], 1 thread",
    "ort_parallel": "ORT [CPU], ORT_PARALLEL",
    "hetero_seq": "hetero OPENVINO|CPU branches, SEQUENTIAL",
    "hetero_conc": "hetero OPENVINO|CPU branches, concurrent",
    "hetero_cpu_conc": "hetero CPU|CPU branches, concurrent",
}
#: the hetero runtimes: device, HETERO_CONCURRENCY, and whether the model keeps its affinities
HETERO = {
    "hetero_seq": ("HETERO:OPENVINO,CPU", "SEQUENTIAL", True),
    "hetero_conc": ("HETERO:OPENVINO,CPU", "AUTO", True),
    "hetero_cpu_conc": ("HETERO:CPU", "CONCURRENT", False),
}
#: the concurrent hetero runtimes, each judged against ORT
CONCURRENT = ("hetero_conc", "hetero_cpu_conc")


def ort_session(path: str, kind: str) -> ort.InferenceSession:
    """One ORT CPU session of ``path`` at ``kind``'s thread setting (ort_default, ort_1, ort_parallel)."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if kind == "ort_1":
        so.intra_op_num_threads = 1
    elif kind == "ort_parallel":
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        so.inter_op_num_threads = len(os.sched_getaffinity(0))
        so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def prepare(feeds: dict[str, np.ndarray], kind: str, path: str) -> tuple[Any, Any]:
    """Runtime ``kind`` of the model at ``path``: (the callable running one inference, what it holds)."""
    if kind.startswith("ort"):
        session = ort_session(path, kind)
        return (lambda: session.run(None, feeds)), session
    device, mode, marked = HETERO[kind]
    source = path if marked else _without_affinities(path)
    compiled = hetero_cli.Core().compile_model(source, device, {"HETERO_CONCURRENCY": mode})
    request = compiled.create_infer_request()
    return (lambda: request.infer(feeds)), compiled


def _without_affinities(path: str) -> str:
    """The model at ``path`` saved beside it with no affinity set (the file's path)."""
    plain = str(Path(path).with_name("plain_" + Path(path).name))
    if not os.path.exists(plain):
        model = onnx.load(path)
        for node in model.graph.node:
            del node.metadata_props[:]
        onnx.save(model, plain)
    return plain


def build(feeds: dict[str, np.ndarray], kind: str, path: str) -> Any:
    """Runtime ``kind`` as a measuring worker builds it (RuntimeSpec "concurrency:build")."""
    infer, held = prepare(feeds, kind, path)
    infer.__dict__["held"] = held
    return infer


def _outputs(result: Any) -> list[np.ndarray]:
    if isinstance(result, dict):
        return [np.asarray(result[k]) for k in ("ya", "yb")]
    return [np.asarray(v) for v in result]


def section(run: Any) -> dict[str, Any]:
    """Time the six runtimes on the two-branch model; ratios of the concurrent splits."""
    settings = run.settings
    folder = Path(tempfile.mkdtemp(prefix="hetero_bench_concurrency_"))
    path = folder / "two_branches.onnx"
    onnx.save(graphs.two_branches(HIDDEN, STEPS, LAYERS), path)
    feeds = graphs.random_feeds([("x", [STEPS, 1, HIDDEN])], seed=0)
    guesses: dict[str, float] = {}
    agreement: dict[str, float] = {}
    plan: dict[str, Any] = {}
    want = None
    for kind in KINDS:
        infer, held = prepare(feeds, kind, str(path))
        got = _outputs(infer())
        want = got if want is None else want
        agreement[kind] = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
        guesses[kind] = measure.guess_ms(infer)
        if kind in CONCURRENT:
            plan[kind] = {
                "subgraphs": [(s.device, len(s.nodes)) for s in held.subgraphs],
                "schedule": held.schedule.describe(),
            }
        del infer, held
    specs = {k: RuntimeSpec("concurrency:build", {"kind": k, "path": str(path)}) for k in KINDS}
    run.progress(f"concurrency: {len(specs)} runtimes, each in its own process")
    found, wall = measure.per_process(specs, feeds, rounds=settings.rounds, guesses=guesses)
    medians = {k: statistics.median(m.process_ms) for k, m in found.items() if m.process_ms}
    best_ort = min(("ort_default", "ort_1"), key=lambda k: medians.get(k, float("inf")))
    ratios = {
        kind: {
            "vs_best_ort": measure.block_ratios(found[kind], [found[best_ort]]),
            "vs_ort_parallel": measure.block_ratios(found[kind], [found["ort_parallel"]]),
        }
        for kind in CONCURRENT
    }
    ratios["hetero_conc"]["vs_sequential"] = measure.block_ratios(found["hetero_conc"], [found["hetero_seq"]])
    return {
        "model": f"two_branches(hidden {HIDDEN}, steps {STEPS}, layers {LAYERS})",
        "rounds": settings.rounds,
        "method": "alone in its process, blocks in turns",
        "wall_s": wall,
        "cores": len(os.sched_getaffinity(0)),
        "plan": plan,
        "labels": LABELS,
        "median_ms": medians,
        "errors": {k: m.error for k, m in found.items() if m.error},
        "max_abs_diff_vs_ort_default": agreement,
        "best_ort": best_ort,
        "ratios": ratios,
    }
