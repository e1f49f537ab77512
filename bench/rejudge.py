"""A committed run's figures judged again by the targets as bench/targets.py states them now (a rule
changed after the run, or a run taken before it), without timing anything:

    .venv/bin/python bench/rejudge.py bench/results/results.json

Prints the PASS / FAIL / SKIP lines beside the verdicts the run recorded; the results file is not changed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import report
import targets
from rich.console import Console


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", type=Path, help="a results.json that bench/run.py wrote")
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    recorded = {t["key"]: t["status"] for t in results.get("targets", [])}
    judged = targets.check(results)
    out = Console()
    report.print_targets(out, judged)
    changed = [
        f"{t.key}: {recorded.get(t.key, '-')} -> {t.status}"
        for t in judged
        if recorded.get(t.key) != t.status
    ]
    met = sum(t.status == targets.PASS for t in judged)
    out.print(
        f"\n{met} of {len(judged)} met; changed from the run's own verdicts: {', '.join(changed) or 'none'}"
    )


if __name__ == "__main__":
    main()
