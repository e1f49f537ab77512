"""Branch twins: a placement measured again with its branches run otherwise than a compile runs them by
default (issue 45): at once where HETERO_CONCURRENCY=CONCURRENT cuts forks apart (two CPU branches: two
sessions side by side) or starts subgraphs together that the default runs in turn; in turn where the
default already runs them at once. The tune then measures both ways, and a winner saves its mode in the
model (placement.affinities.mark_concurrency) for a compile to take. Where the cost model ran, a twin's
prediction is the critical path of its subgraphs where they run at once, not their sum
(plan_costs.RegionCosts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core import Core
from ...errors import HeteroError
from ...graph import Model
from ...placement.config import CONCURRENCY
from ...placement.schedule import CONCURRENT, SEQUENTIAL
from . import costs, runs
from .plan_costs import RegionCosts
from .report import BRANCHES, COST_MODEL, SINGLE, Candidate

#: placements measured again with their branches run otherwise than by default, at most
MAX_TWINS = 3


def branch_twins(
    core: Core,
    model: Model,
    device: str,
    config: Mapping[str, Any],
    candidates: Sequence[Candidate],
    note: Callable[[str], None],
    region_costs: RegionCosts | None = None,
) -> list[Candidate]:
    """Up to MAX_TWINS candidates (kind BRANCHES), the single devices' first: each of ``candidates`` (a
    single device or the cost model's) whose branches could run otherwise than by default, run so
    (twin_of), with the cost model's prediction where it ran (``region_costs``). None where ``config``
    sets HETERO_CONCURRENCY: that is the user's choice (``note`` says so). A twin that cannot be planned
    is left out, noted."""
    if any(str(k).upper() == CONCURRENCY for k in config):
        note(f"{CONCURRENCY} is set: every candidate runs its branches so, none is tried otherwise")
        return []
    made: list[Candidate] = []
    for c in candidates:
        if len(made) == MAX_TWINS:
            break
        if c.kind not in (SINGLE, COST_MODEL) or c.error is not None:
            continue
        try:
            twin = twin_of(core, model, device, config, c, region_costs)
        except HeteroError as exc:  # a twin is a guess: the tune goes on without it, noted
            note(f"{c.name}'s branches could not be planned otherwise: {costs.one_line(exc)}")
            continue
        if twin is not None:
            made.append(twin)
    return made


def twin_of(
    core: Core,
    model: Model,
    device: str,
    config: Mapping[str, Any],
    c: Candidate,
    region_costs: RegionCosts | None = None,
) -> Candidate | None:
    """``c``'s placement with its branches at once (CONCURRENT) where that cuts more subgraphs or runs
    them together where the default does not, in turn (SEQUENTIAL) where the default runs them at once;
    None where the placement has nothing to run side by side. Its ``predicted_ms``: ``region_costs``'
    (the critical path at once, the sum in turn), None without them. Raises as Core.plan."""
    default_plan, default = runs.planned(core, model, device, config, c.affinities)
    plan, concurrent = runs.planned(core, model, device, {**config, CONCURRENCY: CONCURRENT}, c.affinities)
    if concurrent.concurrent and (not default.concurrent or len(plan.subgraphs) != len(default.after)):
        name, mode, planned = f"{c.name}, branches at once", CONCURRENT, (plan, concurrent)
    elif default.concurrent:
        name, mode, planned = f"{c.name}, in turn", SEQUENTIAL, (default_plan, default.in_turn(SEQUENTIAL))
    else:
        return None
    predicted = region_costs.predict(*planned) if region_costs is not None else None
    return Candidate(name, BRANCHES, dict(c.affinities), predicted_ms=predicted, concurrency=mode)
