"""Concurrency inside one inference (issue 45): a model of two independent recurrent branches
(graphs.two_branches: two stacked LSTMs each, hidden 64, 800 steps), its branches on OPENVINO and CPU
(``section``'s ``devices``: bench/gpu.py's are GPU and CPU; its ``branches``: more of them, on the CPU).

Why hidden 64: concurrency pays where a branch's recurrent steps are too small for ORT's intra-op threads
to fill. Issue 45 measured hidden 128 (200 steps) where ORT's 2-thread session took 6.7-7.4 ms and the
branches at once 3.4 ms; on this AVX-512 AMD EPYC ORT's two threads speed it about 1.23x, and even the
bare floor of the cut (below) takes 0.66x ORT's default session. run.py times that shape too
(ISSUE_SHAPE), shown beside the judged one.

Timed each alone in a worker process of its own, in rounds (bench/measure.py per_process), each at its own
thread setting (not the bench's --threads: the point is how each runtime uses the cores):

* ``ort_default`` / ``ort_1``: one ORT CPU session of the whole model, default threads / one intra-op thread;
* ``ort_parallel``: that session in ORT_PARALLEL (inter-op threads as many as the cores, intra-op 1);
* ``hetero_seq``: hetero-cli with the model's affinities, HETERO_CONCURRENCY=SEQUENTIAL (each session at
  its EP's default threads);
* ``hetero_conc``: the same split, HETERO_CONCURRENCY=AUTO (the branches at once, the cores shared);
* ``hetero_cpu_conc``: the model without affinities on HETERO:CPU, HETERO_CONCURRENCY=CONCURRENT (each
  branch a CPU subgraph of its own, the two at once, the cores shared between them: one intra-op thread
  each here, and on a machine of more cores than branches, its share);
* ``ort_branches``: the floor of that cut, shown and not judged: each branch its own ORT CPU session of
  one intra-op thread, all run at once from Python threads pinned to a core each (the caller's while it
  runs its branch), as hetero-cli's branch workers run them, with none of hetero-cli's own work.

Ratios are paired block by block (the processes time their blocks in turns): each concurrent hetero runtime
against the faster of ort_default and ort_1 and against ort_parallel; hetero_conc against hetero_seq;
hetero_cpu_conc against ort_branches (hetero-cli's own cost of running the branches at once).
"""

from __future__ import annotations

import os
import queue
import statistics
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import graphs
import measure
import numpy as np
import onnx
import onnx.utils
import onnxruntime as ort

import hetero_cli
from hetero_cli.app.measure import RuntimeSpec

HIDDEN, STEPS, LAYERS = 64, 800, 2
#: issue 45's own shape (hidden, steps), timed and shown, not judged (the docstring says why)
ISSUE_SHAPE = (128, 200)
#: the devices of the split's branches, a then b (graphs.two_branches' affinities): gpu.py's are GPU, CPU
DEVICES = ("OPENVINO", "CPU")
KINDS = (
    "ort_default",
    "ort_1",
    "ort_parallel",
    "hetero_seq",
    "hetero_conc",
    "hetero_cpu_conc",
    "ort_branches",
)
#: the runtimes of a model of more branches than two, on the CPU alone (gpu.py's branchy rows)
CPU_KINDS = ("ort_default", "ort_1", "ort_parallel", "hetero_cpu_conc", "ort_branches")
#: the concurrent hetero runtimes, each judged against ORT
CONCURRENT = ("hetero_conc", "hetero_cpu_conc")


def hetero_kinds(devices: Sequence[str] = DEVICES) -> dict[str, tuple[str, str, bool]]:
    """The hetero runtimes, the split's branches on ``devices``: device, HETERO_CONCURRENCY, and whether
    the model keeps its affinities."""
    split = "HETERO:" + ",".join(dict.fromkeys(devices))
    return {
        "hetero_seq": (split, "SEQUENTIAL", True),
        "hetero_conc": (split, "AUTO", True),
        "hetero_cpu_conc": ("HETERO:CPU", "CONCURRENT", False),
    }


def labels(devices: Sequence[str] = DEVICES, branches: int = 2) -> dict[str, str]:
    """Every runtime's label, the split's branches on ``devices``, ``branches`` of them on the CPU."""
    split = "|".join(devices)
    cpus = "CPU|CPU" if branches == 2 else f"{branches} CPU"
    return {
        "ort_default": "ORT [CPU], default threads",
        "ort_1": "ORT [CPU], 1 thread",
        "ort_parallel": "ORT [CPU], ORT_PARALLEL",
        "hetero_seq": f"hetero {split} branches, SEQUENTIAL",
        "hetero_conc": f"hetero {split} branches, concurrent",
        "hetero_cpu_conc": f"hetero {cpus} branches, concurrent",
        "ort_branches": f"ORT [CPU], a session per branch ({cpus}), at once (the floor)",
    }


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


def prepare(
    feeds: dict[str, np.ndarray], kind: str, path: str, devices: Sequence[str] = DEVICES
) -> tuple[Any, Any]:
    """Runtime ``kind`` of the model at ``path`` (its split's branches on ``devices``): (the callable
    running one inference, what it holds)."""
    if kind == "ort_branches":
        floor = _AtOnce(path, feeds)
        return floor, floor
    if kind.startswith("ort"):
        session = ort_session(path, kind)
        return (lambda: session.run(None, feeds)), session
    device, mode, marked = hetero_kinds(devices)[kind]
    source = path if marked else _without_affinities(path)
    compiled = hetero_cli.Core().compile_model(source, device, {"HETERO_CONCURRENCY": mode})
    request = compiled.create_infer_request()
    return (lambda: request.infer(feeds)), compiled


class _AtOnce:
    """The model at ``path``'s branches (one per output, each cut out with onnx.utils.extract_model) as ORT
    CPU sessions of one intra-op thread, run at once on ``feeds``: the caller runs the first, pinned to the
    first core while it does, a daemon thread pinned to a core of its own each of the others (they end
    with it). Calling it returns the outputs in the model's order."""

    def __init__(self, path: str, feeds: dict[str, np.ndarray]) -> None:
        model = onnx.load(path)
        inputs = [i.name for i in model.graph.input]
        self.feeds = feeds
        self.sessions = []
        for output in model.graph.output:
            branch = str(Path(path).with_name(f"branch_{output.name}_{Path(path).name}"))
            onnx.utils.extract_model(path, branch, inputs, [output.name])
            self.sessions.append(ort_session(branch, "ort_1"))
        cores = sorted(os.sched_getaffinity(0))
        self._core = cores[0]
        self._done: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()
        self._inboxes: list[queue.SimpleQueue[bool]] = []
        for i, session in enumerate(self.sessions[1:], 1):
            inbox: queue.SimpleQueue[bool] = queue.SimpleQueue()
            args = (i, session, feeds, inbox, self._done, cores[i % len(cores)])
            threading.Thread(target=_serve_branch, args=args, daemon=True).start()
            self._inboxes.append(inbox)

    def __call__(self) -> list[Any]:
        for inbox in self._inboxes:
            inbox.put(True)
        kept = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {self._core})
        try:
            got = {0: self.sessions[0].run(None, self.feeds)[0]}
        finally:
            os.sched_setaffinity(0, kept)
        for _ in self._inboxes:
            i, value = self._done.get()
            got[i] = value
        return [got[i] for i in range(len(self.sessions))]

    def __del__(self) -> None:
        for inbox in self._inboxes:
            inbox.put(False)


def _serve_branch(
    i: int, session: ort.InferenceSession, feeds: dict[str, np.ndarray], inbox: Any, done: Any, core: int
) -> None:
    """An _AtOnce thread: pinned to ``core``, run branch ``i``'s ``session`` each time ``inbox`` says so,
    until it says stop."""
    os.sched_setaffinity(0, {core})
    while inbox.get():
        done.put((i, session.run(None, feeds)[0]))


def _without_affinities(path: str) -> str:
    """The model at ``path`` saved beside it with no affinity set (the file's path)."""
    plain = str(Path(path).with_name("plain_" + Path(path).name))
    if not os.path.exists(plain):
        model = onnx.load(path)
        for node in model.graph.node:
            del node.metadata_props[:]
        onnx.save(model, plain)
    return plain


def build(feeds: dict[str, np.ndarray], kind: str, path: str, devices: Sequence[str] = DEVICES) -> Any:
    """Runtime ``kind`` as a measuring worker builds it (RuntimeSpec "concurrency:build")."""
    infer, held = prepare(feeds, kind, path, devices)
    infer.__dict__["held"] = held
    return infer


def outputs(result: Any, names: Sequence[str]) -> list[np.ndarray]:
    """An inference's outputs in the model's order (``names``): a hetero request's dict, or ORT's list."""
    if isinstance(result, dict):
        return [np.asarray(result[k]) for k in names]
    return [np.asarray(v) for v in result]


def section(
    run: Any,
    devices: Sequence[str] = DEVICES,
    kinds: Sequence[str] = KINDS,
    branches: int = 2,
    shape: tuple[int, int] = (HIDDEN, STEPS),
) -> dict[str, Any]:
    """Time ``kinds`` on the model of ``branches`` branches (its split's on ``devices``; each branch's LSTMs
    of ``shape``: hidden, steps); ratios of the concurrent runtimes against ORT's, and of the concurrent
    split against the same split in sequence. A runtime that cannot be built is recorded under ``errors``,
    not timed."""
    settings = run.settings
    hidden, steps = shape
    folder = Path(tempfile.mkdtemp(prefix="hetero_bench_concurrency_"))
    model = graphs.two_branches(hidden, steps, LAYERS, devices=tuple(devices), branches=branches)
    path = folder / f"{model.graph.name}.onnx"
    onnx.save(model, path)
    names = [o.name for o in model.graph.output]
    feeds = graphs.random_feeds([("x", [steps, 1, hidden])], seed=0)
    guesses: dict[str, float] = {}
    agreement: dict[str, float] = {}
    plan: dict[str, Any] = {}
    errors: dict[str, str] = {}
    want = None
    for kind in kinds:
        try:
            infer, held = prepare(feeds, kind, str(path), devices)
        except Exception as exc:  # one runtime failing (an EP that refuses the LSTM) is a result
            errors[kind] = run.error(f"concurrency {model.graph.name} {kind}", exc)
            continue
        got = outputs(infer(), names)
        want = got if want is None else want
        agreement[kind] = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
        guesses[kind] = measure.guess_ms(infer)
        if kind in CONCURRENT:
            plan[kind] = {
                "subgraphs": [(s.device, len(s.nodes)) for s in held.subgraphs],
                "schedule": held.schedule.describe(),
            }
        del infer, held
    args = {"path": str(path), "devices": list(devices)}
    specs = {k: RuntimeSpec("concurrency:build", {"kind": k, **args}) for k in kinds if k in guesses}
    run.progress(f"concurrency: {model.graph.name}, {len(specs)} runtimes, each in its own process")
    found, wall = measure.per_process(specs, feeds, rounds=settings.rounds, guesses=guesses)
    medians = {k: statistics.median(m.process_ms) for k, m in found.items() if m.process_ms}
    errors.update({k: m.error for k, m in found.items() if m.error})
    timed = [k for k in ("ort_default", "ort_1") if k in medians]
    best_ort = min(timed, key=medians.__getitem__) if timed else "ort_default"
    ratios: dict[str, dict[str, Any]] = {}
    for kind in (k for k in CONCURRENT if k in found):
        ratios[kind] = {
            name: measure.block_ratios(found[kind], [found[base]])
            for name, base in (("vs_best_ort", best_ort), ("vs_ort_parallel", "ort_parallel"))
            if base in found
        }
    if "hetero_cpu_conc" in ratios and "ort_branches" in found:
        ratios["hetero_cpu_conc"]["vs_floor"] = measure.block_ratios(
            found["hetero_cpu_conc"], [found["ort_branches"]]
        )
    if "hetero_conc" in ratios and "hetero_seq" in found:
        ratios["hetero_conc"]["vs_sequential"] = measure.block_ratios(
            found["hetero_conc"], [found["hetero_seq"]]
        )
    sizes = f"hidden {hidden}, steps {steps}, layers {LAYERS}"
    return {
        "model": f"two_branches({sizes})" if branches == 2 else f"two_branches(branches {branches}, {sizes})",
        "rounds": settings.rounds,
        "method": "alone in its process, blocks in turns",
        "wall_s": wall,
        "cores": len(os.sched_getaffinity(0)),
        "plan": plan,
        "labels": {k: v for k, v in labels(devices, branches).items() if k in kinds},
        "median_ms": medians,
        "errors": errors,
        "max_abs_diff_vs_ort_default": agreement,
        "best_ort": best_ort,
        "ratios": ratios,
    }
