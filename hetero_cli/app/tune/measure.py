"""The search's in-process measuring: sync latencies in short blocks (GC off while timing), several runs interleaved in a seeded
random order with the first block of each dropped (warm-up), medians, and the budget's clock.

The timer is app.measure's (``Timer``, ``wall_timer``; the tests inject one that answers from a table).
The search ranks its many candidates this way, in one process, as a cheap first cut; the final choice
among the best split, the automatic plan and each single device is timed per process (app.measure,
tune/decide.py).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence

from ..measure.timer import Timer, wall_timer

__all__ = ["Clock", "Timer", "block_size", "interleaved", "median", "wall_timer"]


class Clock:
    """A tune's budget: seconds since ``start``, and deadlines for its phases as fractions of the budget."""

    def __init__(self, budget_s: float, now: Callable[[], float] = time.perf_counter) -> None:
        self.budget_s = budget_s
        self._now = now
        self.start = now()

    def elapsed(self) -> float:
        """Seconds since the tune started."""
        return self._now() - self.start

    def left(self, until: float | None = None) -> float:
        """Seconds left before ``until`` (seconds since the start; default: the whole budget)."""
        return (self.budget_s if until is None else until) - self.elapsed()

    def fraction(self) -> float:
        """The part of the budget spent, 0..1."""
        return min(1.0, max(0.0, self.elapsed() / self.budget_s)) if self.budget_s > 0 else 1.0


def median(samples: Sequence[float]) -> float | None:
    """The median of ``samples``, None for none."""
    return statistics.median(samples) if samples else None


def interleaved(
    timer: Timer,
    runs: Mapping[str, Callable[[], object]],
    *,
    block: int,
    clock: Clock,
    until: float,
    rng: random.Random,
    min_rounds: int = 2,
    max_rounds: int = 200,
    enough: int | None = None,
    on_round: Callable[[int], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Time each of ``runs`` ({label: callable}) in rounds: each round times a block of ``block`` runs of
    each, in an order ``rng`` shuffles, so that drifts of the machine (other load, frequency) fall on all
    alike. The first round is warm-up and dropped. Rounds go on until ``until`` (seconds of ``clock``) once
    ``min_rounds`` are done, or ``max_rounds``, or once each has ``enough`` samples.

    Returns ({label: latencies in ms}, {label: error}): a run that raises is timed no more, its error kept
    as one line."""
    samples: dict[str, list[float]] = {label: [] for label in runs}
    errors: dict[str, str] = {}
    for round_ in range(max_rounds):
        if round_ >= min_rounds and clock.left(until) <= 0:
            break  # out of time: at least min_rounds - 1 kept rounds (one at least) are there
        if round_ >= min_rounds and enough is not None and all(len(s) >= enough for s in samples.values()):
            break  # the medians are settled: the rest of the budget is not spent
        order = [label for label in runs if label not in errors]
        if not order:
            break
        rng.shuffle(order)
        for label in order:
            try:
                got = timer(label, runs[label], block)
            except Exception as exc:  # a candidate that fails to run is dropped, not the tune
                errors[label] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                continue
            if round_ > 0:
                samples[label].extend(got)
        if on_round is not None:
            on_round(round_)
    return samples, errors


def block_size(run_ms: float, target_ms: float = 50.0, largest: int = 10) -> int:
    """Runs per block: about ``target_ms`` of work, at least 1 and at most ``largest``."""
    if run_ms <= 0:
        return largest
    return max(1, min(largest, int(target_ms / run_ms)))
