"""How two runtimes of one measure_runtimes call compare: block by block, each block of one against the
block the other timed in the same turn (within a second or so of it, on a machine in the same state).

    vs = paired(found["tuned"], found["CPU"])
    vs.ratio, vs.noise      # 0.97, 0.012: 3 % faster, give or take 1.2 %
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .method import Measurement

#: the normal quantile of the two-sided 95 % interval the noise is read from
Z95 = 1.96


@dataclass(frozen=True)
class Paired:
    """``a`` against ``b``: ``ratio``, the median over the turns both timed of a's block median over b's;
    ``p25``/``p75``, the quartiles of those ratios; ``rounds``, the median ratio of each round (each round a
    fresh process per runtime); ``noise``, how far the ratio may be off, as a fraction of it: the larger of
    the half-width of the distribution-free 95 % interval of the median of the block ratios and half the
    spread of the rounds' ratios (a process's own luck); ``blocks``: the pairs compared."""

    ratio: float
    p25: float
    p75: float
    noise: float
    rounds: tuple[float, ...]
    blocks: int

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "ratio": self.ratio,
            "p25": self.p25,
            "p75": self.p75,
            "noise": self.noise,
            "rounds": list(self.rounds),
            "blocks": self.blocks,
        }


def paired(a: Measurement, b: Measurement | Sequence[Measurement]) -> Paired | None:
    """``a`` against ``b`` (or against the mean of several runtimes' blocks, turn by turn) over the turns
    where all timed a block; None where there is no such turn."""
    others = [b] if isinstance(b, Measurement) else list(b)
    per_round: list[list[float]] = []
    for r, row in enumerate(a.block_ms):
        ratios = []
        for k, mine in enumerate(row):
            theirs = [_at(m, r, k) for m in others]
            if mine is not None and all(t is not None for t in theirs):
                ratios.append(mine / statistics.fmean(theirs))  # type: ignore[arg-type]  # no None left
        per_round.append(ratios)
    every = sorted(x for ratios in per_round for x in ratios)
    if not every:
        return None
    ratio = statistics.median(every)
    q = statistics.quantiles(every, n=4, method="inclusive") if len(every) > 1 else [ratio] * 3
    rounds = tuple(statistics.median(r) for r in per_round if r)
    half = (max(rounds) - min(rounds)) / 2 if len(rounds) > 1 else 0.0
    noise = max(median_interval(every) / 2, half) / ratio
    return Paired(ratio, q[0], q[2], noise, rounds, len(every))


def median_interval(ordered: Sequence[float]) -> float:
    """The width of the distribution-free 95 % confidence interval of the median of ``ordered`` (sorted):
    between the order statistics (n -/+ 1.96 sqrt(n)) / 2; the whole range where n is too small."""
    n = len(ordered)
    low = max(0, math.floor((n - Z95 * math.sqrt(n)) / 2) - 1)
    high = min(n - 1, math.ceil((n + Z95 * math.sqrt(n)) / 2) - 1)
    return ordered[high] - ordered[low]


def _at(m: Measurement, r: int, k: int) -> float | None:
    if r >= len(m.block_ms) or k >= len(m.block_ms[r]):
        return None
    return m.block_ms[r][k]
