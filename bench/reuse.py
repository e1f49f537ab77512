"""A compile loaded rather than made: a fresh automatic compile against Core.import_model of its export and
against a compile that CACHE_DIR loads (docs/export.md), as ratios over paired repetitions.

Each repetition times, in turn (the order rotating between repetitions): ``fresh_s``, a Core().compile_model
of the file; ``import_s``, Core().import_model of that compile's export, from its file as a user imports one
(``hetero compile -o``, then ``-m`` the file: its weights are read where they lie); ``cached_s``, a
Core().compile_model with CACHE_DIR set, whose entry an untimed compile wrote first (the cache key hashes
the model's file, so that is inside the time). The ratios are the medians of each repetition's
``import_s / fresh_s`` and ``cached_s / fresh_s``.

OpenVINO's own model cache (the EP's ``cache_dir``, which CACHE_DIR does not give OPENVINO on the CPU while
quirk openvino-cpu-blob-unreadable is in force: this row shows its cost) is timed apart, each compile in a process of its own, as a
user compiles: its blobs are found only by another process than the one that wrote them. In turn, one
process compiles with CACHE_DIR alone and one with the blob cache asked for by hand in CACHE_DIR/openvino
(entries and blobs written first, untimed); ``blobs_ratio`` is the median of the rounds' blob-cache time
over the CACHE_DIR-alone time.

    python bench/reuse.py --model ddddocr_crnn --repeats 3     # one model alone (mlp_sanitised or a real one)
    python bench/reuse.py --model slanet                       # a table recogniser (phases.LOOP_MODELS)
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import phases
import placement
import worker
from measure import timed

import hetero_cli

#: the targets of issue 31: on models whose automatic plan has several subgraphs, and on real models whose
#: fresh compile takes over REAL_SLOW_S
SEVERAL_SUBGRAPHS = 0.5
REAL_SLOW = 0.2
REAL_SLOW_S = 1.0


def reuse(path: Path, device: str, repeats: int) -> dict[str, Any]:
    """Median times and paired ratios of a fresh compile, an import and a cached compile of ``path``."""
    with tempfile.TemporaryDirectory(prefix="hetero_reuse_") as cache:
        config = {"CACHE_DIR": cache}
        first = hetero_cli.Core().compile_model(str(path), device, config)  # the entry, written untimed
        exported = Path(cache) / "export.hetero"
        first.export_model(exported)
        subgraphs = len(first.subgraphs)
        del first
        runs = []
        for k in range(max(1, repeats)):
            out: dict[str, float] = {}
            steps = {
                "fresh_s": lambda: hetero_cli.Core().compile_model(str(path), device),
                "import_s": lambda: hetero_cli.Core().import_model(exported),
                "cached_s": lambda: hetero_cli.Core().compile_model(str(path), device, config),
            }
            names = list(steps)
            for name in names[k % len(names) :] + names[: k % len(names)]:
                gc.collect()
                out[name], compiled = timed(steps[name])
                if name == "cached_s" and not compiled.get_property("LOADED_FROM_CACHE"):
                    raise RuntimeError(f"{path.name}: the cached compile did not load the cache")
                del compiled
            runs.append(out)
        size = exported.stat().st_size
        blobs = blob_cache(path, device, Path(cache), max(1, repeats))
    result: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    result["import_ratio"] = statistics.median(r["import_s"] / r["fresh_s"] for r in runs)
    result["cached_ratio"] = statistics.median(r["cached_s"] / r["fresh_s"] for r in runs)
    result.update(subgraphs=subgraphs, export_bytes=size, repeats=len(runs), blob_cache=blobs)
    return result


def blob_cache(path: Path, device: str, cache: Path, rounds: int) -> dict[str, Any]:
    """OpenVINO's blob cache against CACHE_DIR alone, each compile in a fresh process (module docstring):
    the medians of each variant's times and of the rounds' ratios. RuntimeError where a process fails or
    does not load the CACHE_DIR entry."""

    def one(blobs: bool, warm: bool = False) -> float:
        cmd = [
            sys.executable,
            __file__,
            "--compile-once",
            str(path),
            "--device",
            device,
            "--cache",
            str(cache),
        ]
        row = worker.run_json([*cmd, "--blobs"] if blobs else cmd, 600)
        if "error" in row or not (warm or row.get("loaded")):
            raise RuntimeError(f"{path.name}: a compile of the blob-cache row failed: {row}")
        return float(row["compile_s"])

    one(True, warm=True)  # writes the blobs and the entry of that config, untimed
    runs = []
    for k in range(rounds):
        order = (False, True) if k % 2 == 0 else (True, False)
        times = {blobs: one(blobs) for blobs in order}
        runs.append(times)
    return {
        "cached_s": statistics.median(r[False] for r in runs),
        "blobs_s": statistics.median(r[True] for r in runs),
        "blobs_ratio": statistics.median(r[True] / r[False] for r in runs),
        "rounds": rounds,
    }


def compile_once(path: str, device: str, cache: str, blobs: bool) -> None:
    """The worker of blob_cache: one timed compile with CACHE_DIR ``cache`` (and OpenVINO's blob cache in
    ``cache``/openvino with ``blobs``), printed as a JSON line."""
    config: dict[str, Any] = {"CACHE_DIR": cache}
    if blobs:
        config["OPENVINO"] = {"cache_dir": str(Path(cache) / "openvino")}
    took, compiled = timed(lambda: hetero_cli.Core().compile_model(path, device, config))
    print(json.dumps({"compile_s": took, "loaded": compiled.get_property("LOADED_FROM_CACHE")}))


def limit(entry: dict[str, Any], kind: str) -> float | None:
    """The target a measured row is judged by: REAL_SLOW for a real model whose fresh compile takes over
    REAL_SLOW_S, SEVERAL_SUBGRAPHS for any other plan of several subgraphs (a real one's too), None (not
    judged) otherwise."""
    if kind == "real" and entry["fresh_s"] > REAL_SLOW_S:
        return REAL_SLOW
    return SEVERAL_SUBGRAPHS if entry["subgraphs"] > 1 else None


def main() -> int:
    """Measure one model (``--model``: mlp_sanitised, a placement.REAL or phases.LOOP_MODELS name) and print
    its row as JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="mlp_sanitised", choices=["mlp_sanitised", *placement.REAL, *phases.LOOP_MODELS]
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile-once", help=argparse.SUPPRESS)  # blob_cache's worker: this model file
    parser.add_argument("--device", default=placement.DEVICE, help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--blobs", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compile_once:
        compile_once(args.compile_once, args.device, args.cache, args.blobs)
        return 0
    with tempfile.TemporaryDirectory(prefix="hetero_reuse_model_") as tmp:
        if args.model in phases.LOOP_MODELS:
            path = placement.real_path(args.model)
        else:
            path = placement.model_file(args.model, Path(tmp))
        row = reuse(path, placement.DEVICE, args.repeats)
    print(json.dumps({args.model: row}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
