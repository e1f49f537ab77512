"""How far apart identical runtimes of one model measure, and what hetero-cli's inference path adds to
its own session's ``run``: the noise under the placement section's 2 % targets (docs/performance.md).

    .venv/bin/python bench/instances.py                       # ppocr_rec, 3 instances each, 3 rounds
    .venv/bin/python bench/instances.py --model ppocr_det --instances 2 --rounds 4

Timed by hetero-cli's measuring method (bench/measure.py per_process: each alone in a worker process of
its own, in rounds, one thread per session): ``k`` compiles of automatic HETERO:OPENVINO,CPU
(``hetero_ov#i``), ``k`` plain ORT [OpenVINO, CPU] sessions (``ort_ov#i``), and ``inner_run``: a hetero
compile's own ORT session called with ``run`` on the same feeds. Prints each one's median of per-process
medians and its median per-round ratio to ``ort_ov#0``; ``hetero_ov#0`` against ``inner_run`` is
hetero-cli's own path, the rest is the spread between instances.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import measure
import placement
import runtimes

from hetero_cli.app.measure import RuntimeSpec


def inner_run(feeds: dict[str, Any], path: str) -> Any:
    """The first session of automatic HETERO:OPENVINO,CPU's compile of ``path``, called with ``run``: a
    measuring worker's runtime (RuntimeSpec "instances:inner_run")."""
    prepared = runtimes.prepare_hetero("hetero_ov", Path(path), feeds, placement.DEVICE)
    session = prepared.handle.subgraphs[0].session

    def run() -> Any:
        return session.run(None, feeds)

    run.__dict__["prepared"] = prepared
    return run


def specs(path: Path, instances: int) -> dict[str, RuntimeSpec]:
    """The runtimes timed: ``instances`` of each, and inner_run."""
    out: dict[str, RuntimeSpec] = {}
    for i in range(instances):
        out[f"hetero_ov#{i}"] = measure.spec("hetero_ov", path, device=placement.DEVICE)
        out[f"ort_ov#{i}"] = measure.spec("ort_ov", path)
    out["inner_run"] = RuntimeSpec("instances:inner_run", {"path": str(path)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="ppocr_rec", help=f"one of {', '.join(placement.MODELS)}")
    parser.add_argument(
        "--instances", type=int, default=3, help="processes of each runtime per round (default 3)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="threads per session (default 1)")
    args = parser.parse_args(argv)
    if args.model not in placement.MODELS or args.instances < 1 or args.rounds < 1:
        parser.error(
            f"--model must be one of {', '.join(placement.MODELS)}, --instances and --rounds at least 1"
        )
    runtimes.set_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        [(_, _, path)] = placement.subjects([args.model], Path(tmp))
        feeds = placement.feeds_for(args.model, path)
        guess = measure.guess_ms(runtimes.prepare("ort_ov", path, feeds).infer)
        timed = specs(path, args.instances)
        found, wall = measure.per_process(
            timed, feeds, rounds=args.rounds, guesses=dict.fromkeys(timed, guess)
        )
    base = found["ort_ov#0"]
    print(f"{args.model}: {args.rounds} rounds in {wall:.1f} s, {args.threads} thread(s) per session")
    for rid, got in found.items():
        if got.median_ms is None:
            print(f"{rid:12s} failed: {got.error}")
            continue
        ratio = measure.block_ratios(got, [base])["median"]
        print(f"{rid:12s} median {got.median_ms:8.3f} ms   paired vs ort_ov#0 {ratio:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
