"""Whether two tunes of one model pick the same placement (issue 30's target): each model of the placement
section (bench/placement.py: its static copy, its seeded inputs, the bench's one-thread configuration) is
tuned twice in a row within the budget, and the winners compared. Where they differ, the first tune's
block-by-block comparison of the two (app.measure.paired) says how far apart they are, and whether that is
within the noise the first tune reported (its decision's margin) and within that comparison's own noise.

    .venv/bin/python bench/tune_twice.py --out bench/results/tune_twice.json
    .venv/bin/python bench/tune_twice.py --models ppocr_rec,ddddocr_crnn --budget 30

Prints a line per model and, with --out, writes the two reports' winners, decisions and noise as JSON.
Nothing is judged by exit status.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import placement  # noqa: E402  (bench/'s modules, on the path above)

from hetero_cli.app.measure import Measurement, paired  # noqa: E402

MODELS = ("ppocr_rec", "ppocr_cls", "rvm_mobilenetv3", "ddddocr_crnn", "ppocr_v6_rec")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default=",".join(MODELS), help="placement models, comma-separated")
    parser.add_argument("--budget", type=float, default=30.0, help="each tune's budget in seconds (30)")
    parser.add_argument("--out", help="write the results as JSON here")
    return parser.parse_args()


def _finalist(report: dict[str, Any], name: str) -> Measurement | None:
    for c in report.get("candidates", []):
        if c["name"] == name and c.get("block_ms"):
            return Measurement(name, list(c.get("process_ms") or []), block_ms=c["block_ms"])
    return None


def twice(name: str, budget_s: float, folder: Path) -> dict[str, Any]:
    """Two tunes of placement model ``name``: each one's winner, decision and noise, and whether they agree
    (the same winner, or the second's winner within the first's noise of the first's)."""
    [(_, _, path)] = placement.subjects([name], folder)
    feeds = placement.feeds_for(name, path)
    tunes = [placement.tune(path, feeds, budget_s, folder / f"{name}_{i}.onnx") for i in range(2)]
    first, second = (t["winner"] for t in tunes)
    row: dict[str, Any] = {
        "winners": [first, second],
        "decisions": [t.get("decision") for t in tunes],
        "noise": [t.get("noise") for t in tunes],
        "same": first == second,
    }
    if first != second:
        mine, theirs = _finalist(tunes[0], first), _finalist(tunes[0], second)
        vs = paired(theirs, mine) if mine and theirs else None
        row["second_over_first_in_first_tune"] = vs.to_dict() if vs else None
        reported = tunes[0].get("noise")
        row["within_reported_noise"] = bool(vs and reported is not None and abs(vs.ratio - 1.0) <= reported)
        row["within_comparison_noise"] = bool(vs and abs(vs.ratio - 1.0) <= max(vs.noise, 0.01))
    return row


def _apart(row: dict[str, Any]) -> str:
    vs = row.get("second_over_first_in_first_tune")
    if not vs:
        return "different, not compared"
    within = "within" if row["within_reported_noise"] else "outside"
    own = "within" if row["within_comparison_noise"] else "outside"
    return (
        f"different, {vs['ratio']:.3f}x apart in the first tune: {within} its reported noise, {own} that "
        f"comparison's own ({vs['noise']:.1%})"
    )


def main() -> None:
    args = _arguments()
    names = [m for m in args.models.split(",") if m]
    results: dict[str, Any] = {
        "command": " ".join(["bench/tune_twice.py", *sys.argv[1:]]),
        "machine": platform.processor() or platform.machine(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "budget_s": args.budget,
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="tune-twice-") as folder:
        for name in names:
            row = twice(name, args.budget, Path(folder))
            results["models"][name] = row
            verdict = "same" if row["same"] else _apart(row)
            noise = ", ".join("-" if n is None else f"{n:.1%}" for n in row["noise"])
            print(f"{name}: {' / '.join(row['winners'])}: {verdict} (noise {noise})", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
