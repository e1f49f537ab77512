"""How far a process's luck moves one runtime's latency on this machine, against how closely two identical
runtimes compare inside one process (the question under issue 30's measuring method):

    .venv/bin/python bench/process_luck.py --out bench/results/process_luck.json
    .venv/bin/python bench/process_luck.py --model ppocr_v6_rec --runtime ort_cpu --processes 8

For one real model of the bench (bench/placement.py's REAL, at its shapes) and one runtime (bench/runtimes.py's
ids: ort_ov, one ORT [OpenVINO, CPU] session, by default):
- between processes: ``--processes`` processes, one after another, each timing the runtime in ``--blocks``
  blocks of ``--block-s`` seconds: each process's median, and two spreads, (max - min) / median: of the
  processes' medians (the per-process method's noise) and of the blocks inside each process;
- inside one process: two compiles of the same runtime timed in alternating blocks, a settle time before
  each: the ratio of their medians, and the spread of the ratios of the block pairs (what a paired method
  in one process would see between identical runtimes);
- another runtime's presence (``--other``, ort_cpu: ONNX Runtime's CPU EP, whose threads spin after a
  run): in each of ``--presence`` processes, the runtime's blocks before the other is made, then its blocks
  alternating with the other's: the ratio of its medians after / before. Near 1: a runtime timed among
  quiet others in one process is timed as it runs alone, and the process's luck is shared by both;
- in turns (hetero-cli's measuring method, bench/measure.py per_process): ``--turns`` calls, each timing
  the runtime twice (two identical runtimes, each in a process of its own) and the other runtime, the
  processes taking turns to time blocks, 2 rounds of fresh processes: per call, the block-by-block ratio
  of the two identical runtimes (1 is right) and of the other over the first, each with its noise.

Prints a summary and, with --out FILE, writes the numbers as JSON. Nothing is judged by exit status.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests"))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="ppocr_rec", help="a real model of bench/placement.py (ppocr_rec)")
    parser.add_argument("--runtime", default="ort_ov", help="a bench/runtimes.py runtime id (ort_ov)")
    parser.add_argument("--processes", type=int, default=6, help="processes one after another (6)")
    parser.add_argument("--blocks", type=int, default=8, help="timed blocks per process (8)")
    parser.add_argument("--block-s", type=float, default=0.7, help="seconds per block (0.7)")
    parser.add_argument("--settle-s", type=float, default=0.2, help="pause before each block (0.2)")
    parser.add_argument(
        "--other", default="ort_cpu", help="the other runtime of the presence check (ort_cpu)"
    )
    parser.add_argument("--presence", type=int, default=3, help="processes of the presence check (3)")
    parser.add_argument("--turns", type=int, default=3, help="calls of the in-turns method (3)")
    parser.add_argument("--worker", choices=["alone", "pair", "presence"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help="write the results as JSON here")
    return parser.parse_args()


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def _runtime(args: argparse.Namespace, runtime: str | None = None) -> Callable[[], Any]:
    """The runtime (``runtime``, else --runtime), built in this process on the model's seeded inputs."""
    import placement
    import runtimes

    folder = Path(tempfile.mkdtemp(prefix="luck-"))
    path = placement.static_copy(placement.real_path(args.model), placement.REAL[args.model], folder)
    return runtimes.build(placement.feeds_for(args.model, path), runtime or args.runtime, str(path))


def _block(run: Callable[[], Any], seconds: float, settle: float) -> float:
    """The median latency (ms) of one block: a settle pause, two untimed runs, then ``seconds`` of runs."""
    time.sleep(settle)
    run()
    run()
    latencies: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(latencies) < 5:
        start = time.perf_counter()
        run()
        latencies.append((time.perf_counter() - start) * 1e3)
    return statistics.median(latencies)


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """One process's blocks: the runtime alone, two compiles of it alternating (``pair``), or its blocks
    before and after the other runtime is made (``presence``)."""
    if args.worker == "presence":
        run = _runtime(args)
        before = [_block(run, args.block_s, args.settle_s) for _ in range(args.blocks)]
        other = _runtime(args, args.other)
        after, theirs = [], []
        for _ in range(args.blocks):
            after.append(_block(run, args.block_s, args.settle_s))
            theirs.append(_block(other, args.block_s, args.settle_s))
        return {"blocks_ms": [before, after, theirs]}
    runs = [_runtime(args)] if args.worker == "alone" else [_runtime(args), _runtime(args)]
    blocks: list[list[float]] = [[] for _ in runs]
    for _ in range(args.blocks):
        for i, run in enumerate(runs):
            blocks[i].append(_block(run, args.block_s, args.settle_s))
    return {"blocks_ms": blocks}


def _in_process(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", mode, "--model", args.model, "--runtime", args.runtime]
    command += ["--other", args.other]
    command += [
        "--blocks",
        str(args.blocks),
        "--block-s",
        str(args.block_s),
        "--settle-s",
        str(args.settle_s),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _turns(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``--turns`` calls of hetero-cli's measuring method on the runtime twice and the other runtime: the
    block-by-block comparisons of each call."""
    import measure
    import placement

    from hetero_cli.app.measure import paired

    folder = Path(tempfile.mkdtemp(prefix="luck-"))
    path = placement.static_copy(placement.real_path(args.model), placement.REAL[args.model], folder)
    feeds = placement.feeds_for(args.model, path)
    specs = {
        "first": measure.spec(args.runtime, path),
        "second": measure.spec(args.runtime, path),
        "other": measure.spec(args.other, path),
    }
    guess = measure.guess_ms(runtimes_build(feeds, args.runtime, path))
    calls = []
    for seed in range(args.turns):
        found, wall = measure.per_process(
            specs, feeds, rounds=2, guesses=dict.fromkeys(specs, guess), seed=seed
        )
        same, other = paired(found["second"], found["first"]), paired(found["other"], found["first"])
        calls.append(
            {
                "seed": seed,
                "wall_s": wall,
                "medians_ms": {label: m.median_ms for label, m in found.items()},
                "identical": same.to_dict() if same else None,
                "other_over_first": other.to_dict() if other else None,
            }
        )
    return calls


def runtimes_build(feeds: dict[str, Any], runtime: str, path: Path) -> Callable[[], Any]:
    """Runtime ``runtime`` of ``path`` built in this process (bench/runtimes.py)."""
    import runtimes

    return runtimes.build(feeds, runtime, str(path))


def main() -> None:
    args = _arguments()
    if args.worker:
        print(json.dumps(_worker(args)))
        return
    alone = [_in_process(args, "alone")["blocks_ms"][0] for _ in range(args.processes)]
    medians = [statistics.median(blocks) for blocks in alone]
    a, b = _in_process(args, "pair")["blocks_ms"]
    pair_ratios = [x / y for x, y in zip(b, a, strict=True)]
    presence = [_in_process(args, "presence")["blocks_ms"] for _ in range(args.presence)]
    after_before = [statistics.median(after) / statistics.median(before) for before, after, _ in presence]
    turns = _turns(args)
    results = {
        "command": " ".join(["bench/process_luck.py", *sys.argv[1:]]),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
        "model": args.model,
        "runtime": args.runtime,
        "between_processes": {
            "process_medians_ms": medians,
            "spread_of_process_medians": _spread(medians),
            "spread_of_blocks_within_each_process": [_spread(blocks) for blocks in alone],
            "blocks_ms": alone,
        },
        "inside_one_process": {
            "first_blocks_ms": a,
            "second_blocks_ms": b,
            "ratio_of_medians": statistics.median(b) / statistics.median(a),
            "block_pair_ratios": pair_ratios,
            "spread_of_block_pair_ratios": _spread(pair_ratios),
        },
        "presence_of_another": {
            "other": args.other,
            "after_over_before": after_before,
            "blocks_ms": [{"before": x, "after": y, "other": z} for x, y, z in presence],
        },
        "in_turns": {"other": args.other, "calls": turns},
    }
    between, inside = results["between_processes"], results["inside_one_process"]
    print(
        f"{args.model}, {args.runtime}: {args.processes} processes, {args.blocks} blocks of {args.block_s} s each"
    )
    print("  process medians (ms):    " + ", ".join(f"{m:.2f}" for m in medians))
    print(f"  spread of the processes' medians: {between['spread_of_process_medians']:.1%}")
    within = between["spread_of_blocks_within_each_process"]
    print("  spread of the blocks within each process: " + ", ".join(f"{s:.1%}" for s in within))
    print(
        f"  two compiles in one process, alternating blocks: ratio of medians {inside['ratio_of_medians']:.3f}, "
        f"block pairs {min(pair_ratios):.3f}-{max(pair_ratios):.3f}"
    )
    print(
        f"  alone, then alternating with {args.other} in the same process: after / before "
        + ", ".join(f"{r:.3f}" for r in after_before)
    )
    for call in turns:
        same, other = call["identical"], call["other_over_first"]
        print(
            f"  in turns (seed {call['seed']}): identical runtimes {same['ratio']:.3f} (noise {same['noise']:.1%}), "
            f"{args.other} / {args.runtime} {other['ratio']:.3f} (noise {other['noise']:.1%})"
        )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
