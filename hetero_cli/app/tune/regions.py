"""Regions: a model cut into contiguous runs of one topological order of its non-constant nodes, the unit
the tuner times on each device and places (TVM Collage's candidate regions, restricted to runs of one
order so that any placement of them is acyclic by construction).

A cut is forced wherever the set of devices that support the nodes changes (a region goes only to devices
that run all of it); between forced cuts the nodes are cut into runs of similar size, so that the model
gives about ``target`` regions. Constant-only nodes belong to no region: each region copies those it reads,
and in a placement they take their first consumer's device.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...errors import UnsupportedNodesError
from ...graph import Model

#: how many regions a model is cut into when forced cuts leave room (the issue's ~8-24)
TARGET_REGIONS = 16


@dataclass(frozen=True)
class Region:
    """One contiguous run of the topological order: ``index`` (from 0, in order), its non-constant
    ``nodes`` (friendly names, in order), the ``devices`` that support every one of them (priority order),
    the ``constant_nodes`` it reads (copied in when it is timed alone), and its boundary: ``inputs`` (tensors
    from model inputs or earlier regions) and ``outputs`` (tensors read by later regions, or model
    outputs)."""

    index: int
    nodes: tuple[str, ...]
    devices: tuple[str, ...]
    constant_nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fixed: tuple[str, ...] = ()  # static shape values made by earlier regions: held as constants


def support_sets(
    model: Model, supported: Mapping[str, frozenset[str] | set[str]], devices: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """{non-constant node: the devices (in ``devices``' order) whose ``supported`` set holds it}.

    Raises UnsupportedNodesError for nodes no device supports (a tune places every node somewhere)."""
    out = {
        n.friendly_name: tuple(d for d in devices if n.friendly_name in supported.get(d, ()))
        for n in model.get_ops()
        if not n.is_constant
    }
    missing = [n for n, ds in out.items() if not ds]
    if missing:
        raise UnsupportedNodesError(
            f"no device of {', '.join(devices)} supports node(s) {', '.join(missing[:8])}"
            f"{' and more' if len(missing) > 8 else ''}: add a device that runs them (CPU runs nearly all)"
        )
    return out


def cut_regions(
    model: Model,
    supported: Mapping[str, frozenset[str] | set[str]],
    devices: Sequence[str],
    *,
    target: int = TARGET_REGIONS,
) -> list[Region]:
    """The model's non-constant nodes (in ``model.get_ops()``'s topological order) cut into regions.

    ``supported``: {device: friendly names of the nodes it supports}; ``devices``: the devices, priority
    order; ``target``: about how many regions (forced cuts may make more: each change of the supporting
    device set is one). Deterministic. Raises UnsupportedNodesError for a node no device supports.
    """
    support = support_sets(model, supported, devices)
    order = [n.friendly_name for n in model.get_ops() if not n.is_constant]
    segments: list[list[str]] = []
    for name in order:
        if segments and support[segments[-1][-1]] == support[name]:
            segments[-1].append(name)
        else:
            segments.append([name])
    size = max(1, math.ceil(len(order) / max(1, target)))
    runs: list[list[str]] = []
    for segment in segments:
        pieces = max(1, round(len(segment) / size))
        bounds = [round(k * len(segment) / pieces) for k in range(pieces + 1)]
        runs += [segment[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    return _regions(model, runs, support)


def _regions(
    model: Model, runs: Sequence[Sequence[str]], support: Mapping[str, tuple[str, ...]]
) -> list[Region]:
    """Regions of the given runs of node names, their boundaries and constants worked out."""
    where = {name: k for k, run in enumerate(runs) for name in run}
    consumers = model.consumers()
    outputs = set(model.output_names)
    values = model.shape_values()  # never carried across a cut (placement.partition): held where read
    regions = []
    for k, run in enumerate(runs):
        nodes = [model.node(n) for n in run]
        produced = {t for n in nodes for t in n.outputs}
        read = dict.fromkeys(t for n in nodes for t in n.inputs)
        inputs = [t for t in read if t not in produced and not model.is_constant(t) and t not in values]
        constants = [t for t in read if model.is_constant(t)]
        fixed = [t for t in read if t not in produced and t in values and not model.is_constant(t)]
        outs = [
            t
            for n in nodes
            for t in n.outputs
            if t in outputs
            or (t not in values and any(where.get(c.friendly_name, k) != k for c in consumers.get(t, ())))
        ]
        regions.append(
            Region(
                index=k,
                nodes=tuple(run),
                devices=support[run[0]],
                constant_nodes=tuple(n.friendly_name for n in model.constant_nodes_for(constants)),
                inputs=tuple(inputs),
                outputs=tuple(dict.fromkeys(outs)),
                fixed=tuple(fixed),
            )
        )
    return regions


def cut_tensors(model: Model, regions: Sequence[Region]) -> list[tuple[str, ...]]:
    """For each cut between region i and i+1 (len(regions) - 1 of them): the tensors live across it,
    produced by region i or earlier and read by region i+1 or later. What a change of device there may
    move between devices (an upper bound: a tensor read again on its producer's device stays)."""
    where = {name: r.index for r in regions for name in r.nodes}
    consumers = model.consumers()
    outputs = set(model.output_names)
    cuts: list[dict[str, None]] = [{} for _ in range(max(0, len(regions) - 1))]
    for region in regions:
        for tensor in region.outputs:
            last = max(
                (where.get(c.friendly_name, region.index) for c in consumers.get(tensor, ())),
                default=region.index,
            )
            if tensor in outputs:
                last = max(last, len(regions) - 1)
            for cut in range(region.index, last):
                cuts[cut][tensor] = None
    return [tuple(c) for c in cuts]


def region_affinities(model: Model, regions: Sequence[Region], placement: Sequence[str]) -> dict[str, str]:
    """{friendly name: device} for every node of ``model``: each region's nodes on its device in
    ``placement`` (one device per region), constant-only nodes as complete_affinities places them (the
    first region's device where nothing reads one), in ``model.get_ops()``'s order."""
    result = {name: placement[r.index] for r in regions for name in r.nodes}
    return complete_affinities(model, result, placement[0] if placement else "CPU")


def complete_affinities(model: Model, affinities: Mapping[str, str], default: str) -> dict[str, str]:
    """``affinities`` completed to every node of ``model``, in ``model.get_ops()``'s order: a node
    missing (a constant-only one) takes the device of its first consumer (in topological order), or
    ``default`` where nothing placed reads it."""
    result = dict(affinities)
    consumers = model.consumers()
    for node in reversed(model.get_ops()):
        if node.friendly_name in result:
            continue
        readers = sorted(
            (c for t in node.outputs for c in consumers.get(t, ()) if c.friendly_name in result),
            key=lambda c: c.index,
        )
        result[node.friendly_name] = result[readers[0].friendly_name] if readers else default
    return {n.friendly_name: result[n.friendly_name] for n in model.get_ops()}
