"""Costs: each region timed on each device that supports it, as its own session fed the reference values
of its inputs, and what a change of device costs on this machine (measured once per tune on a small model
of its own, not a constant)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from ...core import Core
from ...graph import Model
from ...placement.export import extract
from ..validate.reference import NO_DOT_FILES, standalone
from .measure import Clock, Timer, interleaved, median
from .regions import Region
from .search import Boundary

#: how the region timing's progress text starts (tune keeps that phase's warnings as one count)
REGION_PHASE = "timing region"
#: float32 elements of the boundary probe's small and large tensors (1 KB and 4 MB)
BOUNDARY_SIZES = (256, 1 << 20)


@dataclass
class RegionCosts:
    """``times[i]``: {device: median ms} of region i on each device that ran it (estimated from the
    measured regions' time per node where the budget ran out first: ``estimated`` lists those regions);
    ``failures``: one line per region and device whose session failed (that device is not offered it)."""

    times: list[dict[str, float]]
    estimated: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def region_rows(
    regions: Sequence[Region], table: RegionCosts, scaled: Sequence[Mapping[str, float]]
) -> list[dict[str, Any]]:
    """The report's rows of the regions: {"region" (from 1), "nodes" (count), "first", "last" (node
    names), "devices", "measured_ms" ({device: ms} as timed), "ms" (as the search used them, calibrated),
    "estimated"}."""
    return [
        {
            "region": r.index + 1,
            "nodes": len(r.nodes),
            "first": r.nodes[0],
            "last": r.nodes[-1],
            "devices": list(r.devices),
            "measured_ms": raw,
            "ms": dict(t),
            "estimated": r.index in table.estimated,
        }
        for r, raw, t in zip(regions, table.times, scaled, strict=True)
    ]


def region_model(model: Model, region: Region) -> Model:
    """``region`` as a model of its own (its nodes, copies of the constants it reads, its boundary as
    inputs and outputs), its weights the source model's. Raises ModelError where a boundary type is
    unknown."""
    nodes = [model.node(n) for n in (*region.constant_nodes, *region.nodes)]
    values = model.shape_values() if region.fixed else {}
    proto = extract(
        model,
        nodes,
        region.inputs,
        region.outputs,
        name=f"{model.name}_region{region.index + 1}",
        values={t: values[t] for t in region.fixed},
    )
    return standalone(proto, model)


def time_regions(
    core: Core,
    model: Model,
    regions: Sequence[Region],
    values: Mapping[str, Any],
    *,
    config: Mapping[str, Any] | None,
    timer: Timer,
    clock: Clock,
    until: float,
    rng: random.Random,
    progress: Callable[[str], None] | None = None,
) -> RegionCosts:
    """Time every region on each of its devices: compiled alone (``core.compile_model(region, device)``),
    fed ``values`` (the reference's values of its inputs), three rounds of a block per device interleaved,
    the first dropped. Regions are timed in order while ``clock`` is before ``until``; the rest are
    estimated per node. Failures of one device on a region are recorded, not raised; a region no device
    could run gets an estimate."""
    times: list[dict[str, float] | None] = [None] * len(regions)
    failures: list[str] = []
    for region in regions:
        share = clock.left(until) / max(1, len(regions) - region.index)
        if clock.left(until) <= 0:
            break
        if progress is not None:
            progress(f"{REGION_PHASE} {region.index + 1}/{len(regions)}")
        runs: dict[str, Callable[[], object]] = {}
        for device in region.devices:
            try:
                sub = region_model(model, region)
                request = core.compile_model(sub, device, _device_config(config)).create_infer_request()
                feeds = {t: values[t] for t in region.inputs}
                request.infer(feeds)
            except Exception as exc:  # this device cannot run the region alone: not offered it
                failures.append(f"region {region.index + 1} on {device}: {one_line(exc)}")
                continue
            runs[f"region:{region.index}:{device}"] = _bound(request, feeds)
        if not runs:
            continue
        samples, errors = interleaved(
            timer,
            runs,
            block=3,
            clock=clock,
            until=clock.elapsed() + share,
            rng=rng,
            min_rounds=3,
            max_rounds=3,
        )
        failures += [f"region {region.index + 1}: {err}" for err in errors.values()]
        times[region.index] = {
            label.rsplit(":", 1)[1]: m for label, got in samples.items() if (m := median(got)) is not None
        }
    return _estimate(regions, times, failures)


def _estimate(
    regions: Sequence[Region], times: list[dict[str, float] | None], failures: list[str]
) -> RegionCosts:
    """Fill the regions not timed from the timed ones' milliseconds per node on each device."""
    per_node: dict[str, float] = {}
    for device in dict.fromkeys(d for r in regions for d in r.devices):
        timed = [(t[device], len(r.nodes)) for r, t in zip(regions, times, strict=True) if t and device in t]
        if timed:
            per_node[device] = sum(ms for ms, _ in timed) / max(1, sum(n for _, n in timed))
    out: list[dict[str, float]] = []
    estimated = []
    for region, table in zip(regions, times, strict=True):
        if table:
            out.append(table)
            continue
        estimated.append(region.index)
        guess = {d: per_node[d] * len(region.nodes) for d in region.devices if d in per_node}
        out.append(guess or {region.devices[-1]: float(len(region.nodes))})
    return RegionCosts(out, estimated, failures)


def boundary_model(elements: int) -> Model:
    """x[1, elements] -> Relu (n1) -> Neg (n2) -> Abs (n3) -> y: a chain whose middle node can sit on
    another device, so that its two boundaries each carry ``elements`` float32 values."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="n1"),
        helper.make_node("Neg", ["a"], ["b"], name="n2"),
        helper.make_node("Abs", ["b"], ["y"], name="n3"),
    ]
    graph = helper.make_graph(
        nodes,
        "boundary_probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, elements])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, elements])],
    )
    return Model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8))


def measure_boundary(
    core: Core,
    device: str,
    devices: Sequence[str],
    *,
    timer: Timer,
    clock: Clock,
    until: float,
    rng: random.Random,
) -> tuple[Boundary, dict[str, float]]:
    """What one change of device costs here: the boundary probe (boundary_model) at a small and a large
    size, once all on the last device of ``devices`` (the host, usually CPU) and once with its middle node
    on the first (two boundaries), interleaved. Per boundary: half the difference at the small size
    (``subgraph_ms``), and the growth of that half with the bytes crossing (``ms_per_mb``), each at
    least 0. Returns the Boundary and the medians measured ({label: ms}) for the report."""
    host, other = devices[-1], devices[0]
    runs: dict[str, Callable[[], object]] = {}
    for elements in BOUNDARY_SIZES:
        feeds = {"x": np.linspace(-1, 1, elements, dtype=np.float32).reshape(1, elements)}
        for label, middle in (("single", host), ("split", other)):
            probe = boundary_model(elements)
            probe.set_affinities({"n1": host, "n2": middle, "n3": host})
            request = core.compile_model(probe, device, NO_DOT_FILES).create_infer_request()
            request.infer(feeds)
            runs[f"boundary:{label}:{elements}"] = _bound(request, feeds)
    samples, _ = interleaved(
        timer, runs, block=10, clock=clock, until=until, rng=rng, min_rounds=4, max_rounds=8
    )
    medians = {label: median(got) or 0.0 for label, got in samples.items()}
    small, large = BOUNDARY_SIZES
    per = {
        n: max(0.0, (medians[f"boundary:split:{n}"] - medians[f"boundary:single:{n}"]) / 2)
        for n in BOUNDARY_SIZES
    }
    ms_per_mb = max(0.0, per[large] - per[small]) / ((large - small) * 4 / 1e6)
    return Boundary(per[small], ms_per_mb), medians


def cut_bytes(cuts: Sequence[Sequence[str]], values: Mapping[str, Any]) -> list[int]:
    """Bytes live across each cut (``cuts``: regions.cut_tensors'), from the reference's values (0 for a
    value that is no array)."""
    return [sum(int(getattr(values.get(t), "nbytes", 0)) for t in cut) for cut in cuts]


def _bound(request: Any, feeds: Mapping[str, Any]) -> Callable[[], object]:
    """A callable that runs one inference of ``request`` on ``feeds``."""
    return lambda: request.infer(feeds)


def _device_config(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A single-device compile's config: HETERO's own keys dropped (they govern a split; a region's
    compile is one device's), no .dot files."""
    kept = {k: v for k, v in (config or {}).items() if isinstance(v, Mapping)}
    return {**kept, **NO_DOT_FILES}


def one_line(exc: BaseException) -> str:
    """An exception as one line: its class and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
