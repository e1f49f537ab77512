"""Boundary crossings, like for like: a hetero-cli split against ONNX Runtime's own split of the same model.

``graphs.sanitised_chain(16, cuts)`` is a chain of 16 Softmax nodes with an ``IsInf -> Where`` sanitiser
after ``cuts`` of them. The OpenVINO EP refuses IsInf, so one ORT session with providers [OpenVINO, CPU]
splits the chain itself: ``cuts + 1`` OpenVINO runs and ``cuts`` IsInf nodes on the CPU EP, inside one
session. hetero-cli gets the very same placement as manual affinities (read from that session's record of
which EP took which node: a forced split) and runs it as ``2 * cuts + 1`` sessions. Both sides pay the
OpenVINO EP's per-invocation cost once per OpenVINO run and copy nothing (host memory on both devices);
what hetero-cli adds is the crossing: ending one session's run and starting the next.

For cuts = 0, 1, 3, 7 the two, and the split's own sessions chained by the thinnest loop (``chain``), are
timed each alone in a worker process of its own, in rounds (bench/measure.py per_process, hetero-cli's
measuring method; ``build`` makes one in its worker). Per cut count: the median of the per-round difference
hetero - ORT of the per-process medians; the slope of that against the boundaries (2 per cut) is the cost of one crossing beyond ORT's own.
The bare chain splits it into ORT's per-run cost and hetero-cli's own bookkeeping.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import graphs
import measure
import numpy as np
import onnxruntime as ort
import runtimes

import hetero_cli
from hetero_cli.app.measure import RuntimeSpec
from hetero_cli.ort.session import assignment, record_assignment

CUTS = (0, 1, 3, 7)
LENGTH = 16
SHAPE = (1, 64)
DEVICES = {"OpenVINOExecutionProvider": "OPENVINO", "CPUExecutionProvider": "CPU"}


def _ort_placement(data: bytes) -> tuple[ort.InferenceSession, dict[str, str]]:
    """ORT's own [OpenVINO, CPU] session of the model and {node name: device} as ORT placed the nodes."""
    so = runtimes.session_options()
    record_assignment(so)
    sess = ort.InferenceSession(data, so, providers=runtimes.provider_list("OPENVINO,CPU"))
    placed = {name: DEVICES[ep] for ep, nodes in assignment(sess) for name, _ in nodes}
    return sess, placed


def prepare(cuts: int, feeds: dict[str, np.ndarray]) -> dict[str, runtimes.Prepared]:
    """The ORT session, the hetero-cli forced split with the same placement, and its sessions bare."""
    proto = graphs.sanitised_chain(LENGTH, cuts, SHAPE)
    data = proto.SerializeToString()
    sess, placed = _ort_placement(data)
    start = time.perf_counter()
    core = hetero_cli.Core()
    model = core.read_model(proto)
    model.set_affinities(placed)
    compiled = core.compile_model(model, "HETERO:OPENVINO,CPU", runtimes.hetero_config())
    compile_s = time.perf_counter() - start
    if len(compiled.subgraphs) != 2 * cuts + 1:
        raise RuntimeError(
            f"sanitised chain with {cuts} cut(s): hetero-cli made {len(compiled.subgraphs)} subgraphs, "
            f"ORT's placement implies {2 * cuts + 1}"
        )
    request = compiled.create_infer_request()

    def ort_run() -> Any:
        return sess.run(["y"], feeds)

    ort_prepared = runtimes.Prepared(
        "ort", ort_run, lambda: {"y": ort_run()[0]}, 0.0, subgraphs=1, handle=sess
    )
    split = runtimes.Prepared(
        "hetero",
        lambda: request.infer(feeds),
        lambda: dict(request.infer(feeds)),
        compile_s,
        subgraphs=len(compiled.subgraphs),
        boundaries=len(compiled.plan.crossing_tensors()),
        handle=compiled,
    )
    return {"ort": ort_prepared, "hetero": split, "bare": runtimes.prepare_chain("bare", split, feeds)}


def build(feeds: dict[str, np.ndarray], kind: str, cuts: int) -> Any:
    """Runtime ``kind`` ("ort", "hetero" or "bare") of the chain with ``cuts`` cuts, as a measuring worker
    builds it (hetero_cli.app.measure RuntimeSpec "crossing:build"): the callable running one inference."""
    trio = prepare(int(cuts), feeds)
    infer = trio[kind].infer
    infer.__dict__["prepared"] = trio[kind] if kind != "bare" else (trio["hetero"], trio["bare"])
    return infer


def section(run: Any) -> dict[str, Any]:
    """Time every cut count's three runtimes, each in its own process; per-crossing cost beyond ORT's."""
    settings = run.settings
    feeds = graphs.random_feeds([("x", list(SHAPE))], seed=0)
    shapes: dict[str, tuple[int, int]] = {}
    guesses: dict[str, float] = {}
    agreement: dict[str, float] = {}
    for cuts in CUTS:
        trio = prepare(cuts, feeds)
        want = trio["ort"].outputs()["y"]
        agreement[str(cuts)] = max(
            float(np.max(np.abs(trio[k].outputs()["y"] - want))) for k in ("hetero", "bare")
        )
        for kind, p in trio.items():
            shapes[f"{kind}_{cuts}"] = (p.subgraphs, p.boundaries)
            guesses[f"{kind}_{cuts}"] = measure.guess_ms(p.infer)
        del trio
    specs = {
        rid: RuntimeSpec("crossing:build", {"kind": rid.split("_")[0], "cuts": int(rid.split("_")[1])})
        for rid in shapes
    }
    run.progress(f"crossings: {len(specs)} runtimes, each in its own process")
    found, wall = measure.per_process(specs, feeds, rounds=settings.rounds, guesses=guesses)
    samples = {rid: m.process_ms for rid, m in found.items()}
    per_cut: dict[str, Any] = {}
    points: dict[str, list[tuple[float, float]]] = {"hetero": [], "bare": [], "hetero_minus_bare": []}
    for cuts in CUTS:
        ort_s, het_s, bare_s = (samples[f"{k}_{cuts}"] for k in ("ort", "hetero", "bare"))
        subgraphs, boundaries = shapes[f"hetero_{cuts}"]
        ort_m, het_m, bare_m = (found[f"{k}_{cuts}"] for k in ("ort", "hetero", "bare"))
        diff = {  # block by block: the processes time their blocks in turns, so the machine's drift cancels
            "hetero": measure.block_differences_us(het_m, ort_m),
            "bare": measure.block_differences_us(bare_m, ort_m),
            "hetero_minus_bare": measure.block_differences_us(het_m, bare_m),
        }
        for series, value in diff.items():
            points[series].append((boundaries, value))
        per_cut[str(cuts)] = {
            "subgraphs": subgraphs,
            "boundaries": boundaries,
            "ort_median_us": statistics.median(ort_s) * 1e3,
            "hetero_median_us": statistics.median(het_s) * 1e3,
            "bare_median_us": statistics.median(bare_s) * 1e3,
            "hetero_minus_ort_us": diff["hetero"],
            "bare_minus_ort_us": diff["bare"],
            "hetero_minus_bare_us": diff["hetero_minus_bare"],
            "max_abs_diff_vs_ort": agreement[str(cuts)],
        }
    slopes = {series: measure.fit_line(*zip(*pts, strict=True))[0] for series, pts in points.items()}
    return {
        "model": f"sanitised_chain({LENGTH}, cuts, {list(SHAPE)})",
        "iterations": settings.rounds,
        "method": "alone in its process, blocks in turns",
        "wall_s": wall,
        "per_cut": per_cut,
        "slope_us": slopes,
    }
