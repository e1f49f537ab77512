"""How far apart identical sessions of one model measure, and what hetero-cli's inference path adds to
its own session's ``run``: the noise under the placement section's 2 % targets (docs/performance.md).

    .venv/bin/python bench/instances.py                       # ppocr_rec, 3 instances each, 30 s
    .venv/bin/python bench/instances.py --model ppocr_det --instances 2 --budget 20

In one interleaved group (bench/measure.py, each runtime's own block, one thread per session): ``k``
compiles of automatic HETERO:OPENVINO,CPU (``hetero_ov#i``), ``k`` plain ORT [OpenVINO, CPU] sessions
(``ort_ov#i``), and ``inner_run``: the first hetero compile's own ORT session called with ``run`` on the
same feeds. Prints each one's median and its median paired ratio to ``ort_ov#0``; ``hetero_ov#0`` against
``inner_run`` is hetero-cli's own path, the rest is the spread between instances.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import measure
import placement
import runtimes


def group(name: str, instances: int, folder: Path) -> tuple[dict[str, runtimes.Prepared], dict[str, Any]]:
    """The group's runtimes for placement model ``name`` (its static copy written in ``folder``) and the
    feeds they are bound to."""
    [(_, _, path)] = placement.subjects([name], folder)
    feeds = placement.feeds_for(name, path)
    prepared: dict[str, runtimes.Prepared] = {}
    for i in range(instances):
        prepared[f"hetero_ov#{i}"] = runtimes.prepare_hetero("hetero_ov", path, feeds, placement.DEVICE)
        prepared[f"ort_ov#{i}"] = runtimes.prepare("ort_ov", path, feeds)
    return prepared, feeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="ppocr_rec", help=f"one of {', '.join(placement.MODELS)}")
    parser.add_argument("--instances", type=int, default=3, help="compiles of each runtime (default 3)")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of interleaved timing")
    parser.add_argument("--threads", type=int, default=1, help="threads per session (default 1)")
    args = parser.parse_args(argv)
    if args.model not in placement.MODELS or args.instances < 1:
        parser.error(f"--model must be one of {', '.join(placement.MODELS)}, --instances at least 1")
    runtimes.set_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        prepared, feeds = group(args.model, args.instances, Path(tmp))
        session = prepared["hetero_ov#0"].handle.subgraphs[0].session
        timed = {rid: p.infer for rid, p in prepared.items()}
        timed["inner_run"] = lambda: session.run(None, feeds)
        samples, wall, _ = measure.interleaved(
            timed, budget_s=args.budget, lo=10, hi=100_000, warmup=2, own_blocks=True
        )
    base = samples["ort_ov#0"]
    print(f"{args.model}: {len(base)} iterations in {wall:.1f} s, {args.threads} thread(s) per session")
    for rid, got in samples.items():
        ratio = placement.paired(got, base)["median"]
        print(f"{rid:12s} median {statistics.median(got) * 1e3:8.3f} ms   paired vs ort_ov#0 {ratio:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
