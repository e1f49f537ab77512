"""The choice: a device for each region by dynamic programming over the regions in order (a shortest path
whose state is the current region's device), costs from measured tables, and a few distinct placements
from scaled boundary costs. Pure: no session, no clock, deterministic given its tables.

Why the DP is enough for islands: a run of regions on another device pays two boundaries, so the DP moves
it back to its neighbours' device unless its saving exceeds them (OpenVINO's advice to fix affinities by
hand to reduce subgraphs, done from measurements). Why scaled boundaries: region times are measured as
separate sessions, and OpenVINO fuses a whole subgraph into one kernel, so the sums mislead; placements
with fewer (x2, x4) or more (x0.5) subgraphs than the estimate prefers are then measured end to end.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: boundary cost multipliers: each gives a placement (duplicates dropped)
SCALES = (1.0, 2.0, 0.5, 4.0, 8.0)


@dataclass(frozen=True)
class Boundary:
    """What a change of device costs: ``subgraph_ms`` per extra subgraph (a session run, its input and
    output binding) and ``ms_per_mb`` per megabyte (1e6 bytes) of tensors crossing it."""

    subgraph_ms: float
    ms_per_mb: float

    def cost(self, nbytes: int, scale: float = 1.0) -> float:
        """Milliseconds a change of device costs where ``nbytes`` cross, times ``scale``."""
        return scale * (self.subgraph_ms + self.ms_per_mb * nbytes / 1e6)


@dataclass(frozen=True)
class Placement:
    """One device per region (``devices``), the cost model's ``predicted_ms`` for it (boundaries at scale
    1), and the smallest boundary ``scale`` that chose it."""

    devices: tuple[str, ...]
    predicted_ms: float
    scale: float

    @property
    def switches(self) -> int:
        """How many times the device changes from one region to the next."""
        return sum(a != b for a, b in itertools.pairwise(self.devices))

    @property
    def uniform(self) -> bool:
        """True when every region is on one device (a single-device placement)."""
        return len(set(self.devices)) <= 1


def predict(
    placement: Sequence[str],
    times: Sequence[Mapping[str, float]],
    cut_bytes: Sequence[int],
    boundary: Boundary,
    scale: float = 1.0,
) -> float:
    """The cost model's milliseconds for ``placement``: its regions' times plus a boundary wherever the
    device changes (``cut_bytes[i]``: bytes live across the cut after region i). inf where a region's
    device has no time (does not support it)."""
    total = 0.0
    for i, device in enumerate(placement):
        total += times[i].get(device, math.inf)
        if i and placement[i - 1] != device:
            total += boundary.cost(cut_bytes[i - 1], scale)
    return total


def best_placement(
    times: Sequence[Mapping[str, float]],
    cut_bytes: Sequence[int],
    boundary: Boundary,
    order: Sequence[str],
    scale: float = 1.0,
    max_switches: int | None = None,
) -> tuple[str, ...]:
    """The placement of least predicted cost with boundaries scaled by ``scale``: dynamic programming over
    the regions in order, state the current region's device (and, with ``max_switches``, how many device
    changes so far: at most that many). ``times[i]``: {device: ms} for the devices that run region i (a
    device absent there never gets it); ``order``: the devices, priority first, which breaks ties (and
    staying on a device beats switching at equal cost, fewer switches beat more).

    Raises ValueError where some region has no time on any device, no placement keeps to
    ``max_switches``, or ``cut_bytes`` does not have one entry per cut."""
    if len(cut_bytes) != max(0, len(times) - 1):
        raise ValueError(
            f"{len(times)} regions need {max(0, len(times) - 1)} cut sizes, not {len(cut_bytes)}"
        )
    if not times:
        return ()
    rank = {d: k for k, d in enumerate(order)}
    limited = max_switches is not None
    # state (device, switches so far; always 0 when unlimited) -> cost; back[i][state] = previous state
    cost: dict[tuple[str, int], float] = {}
    back: list[dict[tuple[str, int], tuple[str, int]]] = []
    for i, table in enumerate(times):
        devices = sorted((d for d in table if math.isfinite(table[d])), key=lambda d: rank.get(d, len(rank)))
        if not devices:
            raise ValueError(f"region {i} has no measured time on any device")
        step: dict[tuple[str, int], float] = {}
        came: dict[tuple[str, int], tuple[str, int]] = {}
        for d in devices:
            if i == 0:
                step[(d, 0)] = table[d]
                continue
            switch = boundary.cost(cut_bytes[i - 1], scale)
            for (e, k), c in sorted(cost.items(), key=lambda x: (x[0][1], rank.get(x[0][0], len(rank)))):
                moved = e != d
                state = (d, k + moved if limited else 0)
                if limited and state[1] > max_switches:
                    continue
                total = c + (switch if moved else 0.0) + table[d]
                if state not in step or total < step[state]:
                    step[state], came[state] = total, (e, k)
        if not step:
            raise ValueError(f"no placement with at most {max_switches} device changes")
        cost = step
        back.append(came)
    last = min(cost, key=lambda s: (cost[s], s[1], rank.get(s[0], len(rank))))
    path = [last]
    for came in reversed(back[1:]):
        path.append(came[path[-1]])
    return tuple(d for d, _ in reversed(path))


def placements(
    times: Sequence[Mapping[str, float]],
    cut_bytes: Sequence[int],
    boundary: Boundary,
    order: Sequence[str],
    scales: Sequence[float] = SCALES,
) -> list[Placement]:
    """The distinct placements ``best_placement`` gives at each boundary scale, fastest predicted (at
    scale 1) first; single-device ones are left out (the tuner measures those as baselines anyway).
    Deterministic given the tables."""
    found = [Placement(best_placement(times, cut_bytes, boundary, order, s), 0.0, s) for s in scales]
    return [p for p in merge([found], times, cut_bytes, boundary) if not p.uniform]


def calibrate(
    times: Sequence[Mapping[str, float]], whole_ms: Mapping[str, float]
) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Region times scaled per device so that they add up to that device's measured time for the whole
    model (``whole_ms``: {device: ms}, for the devices that run every region): the regions, timed as
    sessions of their own, miss what a whole-model session fuses and pay each session's overhead, and
    how much differs by device (OpenVINO fuses the most). Devices without a whole-model time, or
    missing from some region, stay as they are. Returns (the scaled tables, {device: factor})."""
    factors: dict[str, float] = {}
    for device, whole in whole_ms.items():
        if whole > 0 and times and all(device in t for t in times):
            total = sum(t[device] for t in times)
            if total > 0:
                factors[device] = whole / total
    scaled = [{d: ms * factors.get(d, 1.0) for d, ms in t.items()} for t in times]
    return scaled, factors


def merge(
    found: Sequence[Sequence[Placement]],
    times: Sequence[Mapping[str, float]],
    cut_bytes: Sequence[int],
    boundary: Boundary,
) -> list[Placement]:
    """Placements from several searches (each a list, e.g. on calibrated and raw region times), distinct,
    each predicted anew on ``times``, fastest predicted first (fewer switches, then the devices, break
    ties): deterministic."""
    seen: dict[tuple[str, ...], Placement] = {}
    for placements_ in found:
        for p in placements_:
            if p.devices not in seen:
                seen[p.devices] = Placement(
                    p.devices, predict(p.devices, times, cut_bytes, boundary), p.scale
                )
    return sorted(seen.values(), key=lambda p: (p.predicted_ms, p.switches, p.devices))


def proposals(
    raw: Sequence[Mapping[str, float]],
    scaled: Sequence[Mapping[str, float]],
    cut_bytes: Sequence[int],
    boundary: Boundary,
    order: Sequence[str],
) -> list[Placement]:
    """The cost model's candidates: placements on the calibrated times (``scaled``) at every boundary
    scale, the best ones with one and with two device changes at most (few subgraphs: what measured best
    on real models, where a boundary costs more than the probe's), and the raw region times' at scale 1
    (where the calibration misleads); merged, predicted on the calibrated times, fastest first."""
    few = [best_placement(scaled, cut_bytes, boundary, order, max_switches=m) for m in (1, 2)]
    return merge(
        [
            placements(scaled, cut_bytes, boundary, order),
            [Placement(p, 0.0, 1.0) for p in few if len(set(p)) > 1],
            placements(raw, cut_bytes, boundary, order, scales=(1.0,)),
        ],
        scaled,
        cut_bytes,
        boundary,
    )
