"""The cost model on a plan as a compile runs it: each subgraph's time from the regions' tables, summed
where the subgraphs run in turn, along the critical path where they run at once (issue 45). The search
(search.py) places regions in a row and adds their times; this is what its placements, and the branch
twins, are ranked and predicted by once they are plans: a placement whose branches overlap costs its
slowest chain, not its sum."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core import Core
from ...errors import HeteroError
from ...graph import Model
from ...placement.partition import Plan
from ...placement.schedule import Schedule
from . import runs
from .regions import Region
from .search import Boundary


@dataclass(frozen=True)
class RegionCosts:
    """The cost model's tables a plan's prediction reads: its ``regions``, their calibrated ``times``
    ({device: ms} per region), the ``boundary`` and ``nbytes`` ({tensor: bytes} of the reference run's
    values; a tensor missing counts 0)."""

    regions: Sequence[Region]
    times: Sequence[Mapping[str, float]]
    boundary: Boundary
    nbytes: Mapping[str, int] = field(default_factory=dict)

    def predict(self, plan: Plan, schedule: Schedule) -> float | None:
        """The milliseconds the cost model predicts for ``plan`` run as ``schedule`` runs it: each
        subgraph's time (its nodes' even shares of their regions' times on its device, plus a boundary:
        its fixed cost and the bytes it reads from other subgraphs), summed where the subgraphs run in
        turn, along the critical path (the slowest chain of subgraphs that feed each other) where they run
        at once. None where a node's region has no time on its subgraph's device."""
        share = {
            n: (table, len(r.nodes))
            for r, table in zip(self.regions, self.times, strict=True)
            for n in r.nodes
        }
        made = {t for s in plan.subgraphs for t in s.outputs}
        spent = []
        for s in plan.subgraphs:
            crossing = sum(self.nbytes.get(t, 0) for t in s.inputs if t in made)
            total = self.boundary.cost(crossing)
            for table, count in (share[n] for n in s.nodes if n in share):
                if s.device not in table:
                    return None
                total += table[s.device] / count
            spent.append(total)
        if not schedule.concurrent:
            return sum(spent)
        done: list[float] = []
        for i, ms in enumerate(spent):  # a plan's subgraphs are in topological order
            done.append(ms + max((done[p] for p in schedule.after[i]), default=0.0))
        return max(done, default=0.0)


def ranked(
    core: Core,
    model: Model,
    device: str,
    config: Mapping[str, Any],
    found: Sequence[tuple[dict[str, str], float]],
    costs: RegionCosts,
    keep: int,
) -> list[tuple[dict[str, str], float]]:
    """The ``keep`` placements of ``found`` ((affinities, the search's prediction) each, its order) of least
    predicted time once planned as a compile would run them (``costs.predict``: the critical path where
    their subgraphs overlap), fastest first (ties keep ``found``'s order). Only the first 2 x ``keep`` are
    planned; one that cannot be planned, or has no time, keeps the search's prediction."""
    scored = []
    for affinities, predicted in found[: 2 * keep]:
        try:
            plan, schedule = runs.planned(core, model, device, config, affinities)
        except HeteroError:  # the compile would refuse it too: its measurement says so, not the ranking
            scored.append((affinities, predicted))
            continue
        on_plan = costs.predict(plan, schedule)
        scored.append((affinities, predicted if on_plan is None else on_plan))
    return sorted(scored, key=lambda pair: pair[1])[:keep]
