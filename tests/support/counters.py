"""The -pc text read back (``parse_counters``): what the tests check hetero-cli's counter lines against,
so that the format (docs/counters-and-dot.md) cannot drift from what a reader of it expects."""

from __future__ import annotations

import re

from hetero_cli.runtime import ProfilingInfo


def parse_counters(text: str) -> tuple[list[ProfilingInfo], int]:
    """Read -pc text back: the counter lines and the printed total (-1 if none).

    Lines of other kinds (the per-subgraph and per-device tables, notes, log lines) are skipped.
    """
    pattern = re.compile(
        r"^subgraph(\d+): +(.*?):\s*(EXECUTED|NOT_RUN|OPTIMIZED_OUT)\s+layerType: (.*?)\s*"
        r"realTime: (\d+)\s+cpu: (\d+)\s+execType:\s?(.*)$"
    )
    infos, total = [], -1
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            infos.append(ProfilingInfo(m[2], m[4], m[7], m[3], int(m[5]), int(m[6]), int(m[1])))
        elif line.startswith("Total time: ") and line.endswith(" microseconds"):
            total = int(line.split()[2])
    return infos, total
