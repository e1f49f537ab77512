"""A candidate's compile, its validation against the reference, and its time per subgraph from the
performance counters: what the tuner does to one placement beside timing it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...core import Core
from ...graph import Model
from ...placement.affinities import mark_automatic, mark_concurrency
from ...placement.partition import Plan
from ...placement.schedule import Schedule
from ..validate.compare import compare_outputs
from ..validate.tolerances import Tolerances
from .measure import median
from .report import OutputCheck, Validation

#: profiled inferences per compile for the counters per subgraph (the first dropped, the median kept)
PROFILED_RUNS = 6
PROFILE_CONFIG = {"PERF_COUNT": "YES", "PERFORMANCE_HINT": "THROUGHPUT"}


def clear_affinities(model: Model) -> None:
    """Drop every node's affinity (rt_info["affinity"]): the model is back in automatic mode."""
    for node in model.get_ops():
        node.get_rt_info().pop("affinity", None)


def compile_with(
    core: Core,
    model: Model,
    device: str,
    config: Mapping[str, Any] | None,
    affinities: Mapping[str, str] | None,
    *,
    automatic: bool = False,
) -> Any:
    """``core.compile_model(model, device, config)`` with ``affinities`` set (manual mode; None: automatic
    mode), the model's affinities cleared again afterwards (the sessions do not read them again). With
    ``automatic`` they are marked as the automatic plan's (placement.affinities.mark_automatic), as the
    saved winner is where that plan won: compiled as it will be. Raises as compile_model."""
    if affinities is not None:
        model.set_affinities(dict(affinities))
    mark_automatic(model, automatic)
    try:
        return core.compile_model(model, device, config)
    finally:
        clear_affinities(model)
        mark_automatic(model, False)


def planned(
    core: Core,
    model: Model,
    device: str,
    config: Mapping[str, Any] | None,
    affinities: Mapping[str, str],
) -> tuple[Plan, Schedule]:
    """The plan and schedule a compile of ``model`` with ``affinities`` set (manual mode) and ``config``
    would run, nothing compiled; the affinities cleared again afterwards. Raises as Core.plan."""
    model.set_affinities(dict(affinities))
    try:
        plan = core.plan(model, device, config)
        return plan, core.schedule(plan, device, config, model=model)
    finally:
        clear_affinities(model)


#: the model metadata key that records the configuration a tuned placement was measured with (JSON)
MEASURED_CONFIG_KEY = "hetero_cli.tune.config"


def keep(
    model: Model,
    affinities: Mapping[str, str],
    automatic: Mapping[str, str],
    config: Mapping[str, Any] | None = None,
    concurrency: str | None = None,
) -> None:
    """Set the winner's ``affinities`` on ``model``, marked as the automatic plan's where they are that
    plan's (``automatic``: whichever candidate won with them, a single device that supports every node
    included) and run by default: saved, they compile as it did (its probe session:
    placement.affinities.mark_automatic). ``concurrency``: the HETERO_CONCURRENCY it won with, recorded
    for a compile to take (mark_concurrency; None: removed). ``config``, the configuration the placement
    was measured with (threads included), is recorded in the model's metadata (MEASURED_CONFIG_KEY, JSON;
    removed where there is none)."""
    model.set_affinities(dict(affinities))
    mark_automatic(model, dict(affinities) == dict(automatic) and concurrency is None)
    mark_concurrency(model, concurrency)
    model.set_metadata(MEASURED_CONFIG_KEY, json.dumps(dict(config), default=str) if config else None)


def validate(
    name: str,
    compiled: Any,
    feeds_list: Sequence[Mapping[str, Any]],
    want: Sequence[Mapping[str, Any]],
    tolerances: Tolerances,
) -> Validation:
    """Run candidate ``name``'s ``compiled`` model on each input set and compare its outputs with ``want``
    (the reference's, one dict per set) by compare_outputs: the Validation, every set's outputs in order."""
    comparisons = []
    for feeds, expected in zip(feeds_list, want, strict=True):
        got = compiled(dict(feeds))
        comparisons += compare_outputs({n: got[n] for n in expected}, dict(expected), tolerances)
    outputs = tuple(OutputCheck(x.name, x.passed, x.max_abs, x.max_rel, x.reason) for x in comparisons)
    return Validation(name, all(o.passed for o in outputs), outputs)


def subgraph_times(
    core: Core,
    model: Model,
    device: str,
    config: Mapping[str, Any] | None,
    affinities: Mapping[str, str] | None,
    feeds: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Milliseconds per subgraph of one placement (``affinities``; None: the automatic plan): compiled
    again with PROFILE_CONFIG (THROUGHPUT: every subgraph a session of its own, its counters its own),
    PROFILED_RUNS inferences, the first dropped, each subgraph's real time summed per inference and the
    median kept. Returns [{"subgraph", "device", "nodes", "ms"}] in execution order. Counters include the
    profiler's own cost: compare them with each other, not with the measured medians."""
    compiled = compile_with(core, model, device, {**(config or {}), **PROFILE_CONFIG}, affinities)
    request = compiled.create_infer_request()
    for _ in range(PROFILED_RUNS):
        request.infer(dict(feeds))
    per_run: dict[int, list[float]] = {s.index + 1: [] for s in compiled.plan.subgraphs}
    for infos in request.get_profiling_history()[1:]:  # the first run starts the profiler: dropped
        totals: dict[int, int] = {}
        for info in infos:
            totals[info.subgraph] = totals.get(info.subgraph, 0) + info.real_time_us
        for number, times in per_run.items():
            times.append(totals.get(number, 0) / 1e3)
    return [
        {
            "subgraph": s.name,
            "device": s.device,
            "nodes": len(s.nodes),
            "ms": median(per_run[s.index + 1]) or 0.0,
        }
        for s in compiled.plan.subgraphs
    ]
