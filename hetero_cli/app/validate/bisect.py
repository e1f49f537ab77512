"""Bisect a subgraph that differs from the reference down to a node: run halves of its nodes (in
topological order) on its device as models of their own, fed the reference's values, and go on into the
half whose outputs differ (Polygraphy's ``debug reduce --mode=bisect``, inside one subgraph)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ...core import Core
from ...errors import HeteroError
from ...graph import Model
from ...placement.export import extract
from ...runtime import CompiledSubgraph
from .compare import compare_outputs
from .reference import NO_DOT_FILES, arrays, reference_values, standalone
from .report import BisectStep
from .tolerances import Tolerances


def bisect_subgraph(
    core: Core,
    model: Model,
    subgraph: CompiledSubgraph,
    feeds: Mapping[str, Any],
    *,
    reference: str,
    tolerances: Tolerances,
) -> tuple[list[BisectStep], tuple[str, ...], list[str]]:
    """Narrow ``subgraph`` (a subgraph of ``model``'s split that differs from the reference) down to the
    node whose arithmetic differs.

    The reference's value of every tensor the subgraph's nodes read or make comes from one whole-model
    session on ``reference`` (run on ``feeds``). First the whole node set, then at each round each half
    of the current group (its nodes in topological order) runs on the subgraph's device as a model of its
    own (core.compile_model of the extracted nodes), its inputs fed the reference's values; its outputs
    (what the rest of the model reads of them) are compared with the reference's, each with
    ``tolerances.of(tensor)``. The first half that differs is the next group; where neither does, the group
    is minimal. At most log2(nodes) + 1 rounds, two compiles each.

    Returns (the steps, the node or minimal group named, notes): the group is empty where the node set
    fed the reference's values stays within tolerance (the subgraph amplifies its inputs' differences) or
    a part could not be compiled or run (the notes say which). Raises as compile_model and infer for the
    reference session.
    """
    nodes = tuple(sorted(subgraph.nodes, key=lambda n: model.node(n).index))
    tensors = [t for n in nodes for t in (*model.node(n).inputs, *model.node(n).outputs)]
    given = set(model.input_names)
    wanted = [t for t in dict.fromkeys(tensors) if t and not model.is_constant(t) and t not in given]
    want = {**feeds, **reference_values(core, model, wanted, feeds, reference)}
    steps: list[BisectStep] = []
    try:
        whole = _run_part(core, model, nodes, subgraph.device, want, tolerances)
    except HeteroError as exc:
        return steps, (), [f"bisect: {subgraph.name}'s nodes could not run on their own: {exc}"]
    steps.append(whole)
    if whole.passed:
        return (
            steps,
            (),
            [
                f"bisect: {subgraph.name} fed the reference's values stays within tolerance: it amplifies "
                "differences of its inputs that are within tolerance themselves"
            ],
        )
    group = nodes
    for _ in range(math.ceil(math.log2(max(len(nodes), 1))) + 1):
        if len(group) < 2:
            break
        middle = len(group) // 2
        narrower = None
        for half in (group[:middle], group[middle:]):
            try:
                step = _run_part(core, model, half, subgraph.device, want, tolerances)
            except HeteroError as exc:
                return (
                    steps,
                    group,
                    [f"bisect stopped: nodes {_span(half)} could not run on their own: {exc}"],
                )
            steps.append(step)
            if not step.passed:
                narrower = half
                break
        if narrower is None:
            break  # neither half differs alone: the group is minimal
        group = narrower
    return steps, group, []


def _run_part(
    core: Core,
    model: Model,
    nodes: Sequence[str],
    device: str,
    want: Mapping[str, Any],
    tolerances: Tolerances,
) -> BisectStep:
    """``nodes`` run on ``device`` as a model of their own (with copies of the constant nodes they read),
    fed the reference's values; their outputs that the rest of the model reads (or the model outputs)
    compared with the reference's."""
    chosen = set(nodes)
    made = [t for n in nodes for t in model.node(n).outputs]
    read = [t for n in nodes for t in model.node(n).inputs if t and t not in made]
    read = list(dict.fromkeys(read))
    constants = [t for t in read if model.is_constant(t)]
    inputs = [t for t in read if not model.is_constant(t)]
    readers = model.consumers()
    finals = set(model.output_names)
    outputs = [
        t for t in made if t in finals or any(r.friendly_name not in chosen for r in readers.get(t, ()))
    ] or made
    outputs = [t for t in dict.fromkeys(outputs) if t in want]
    copies = [n for n in model.constant_nodes_for(constants) if n.friendly_name not in chosen]
    proto = extract(
        model,
        [*copies, *(model.node(n) for n in nodes)],
        inputs,
        outputs,
        name=f"{model.name}_bisect",
    )
    compiled = core.compile_model(standalone(proto, model), device, NO_DOT_FILES)
    results = compiled({t: want[t] for t in inputs})
    got = {t: results[t] for t in outputs}
    return BisectStep(tuple(nodes), device, compare_outputs(*arrays(got, want, outputs), tolerances))


def _span(nodes: Sequence[str]) -> str:
    """``first .. last (N nodes)`` for messages."""
    return nodes[0] if len(nodes) == 1 else f"{nodes[0]} .. {nodes[-1]} ({len(nodes)} nodes)"
