"""Where a split starts to differ from the whole model: every tensor a subgraph hands on compared with the
reference's value of the same tensor, the first subgraph (in execution order) over the tolerance named, and
on request that subgraph bisected down to a node (Polygraphy's ``--onnx-outputs mark all`` and ``debug
reduce``, per subgraph).

The reference's values come from one session of the whole model on the reference device with those
tensors added as graph outputs (reference.tapped_model); the split's from its own subgraph sessions
(runtime.tap).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...core import Core
from ...graph import Model
from ...placement.config import PERFORMANCE_HINT
from ...runtime import CompiledModel, tap
from .bisect import bisect_subgraph
from .compare import compare_outputs
from .reference import arrays, reference_values
from .report import Localisation, SubgraphCheck
from .tolerances import Tolerances

THROUGHPUT = "THROUGHPUT"


def localise(
    core: Core,
    model: Model,
    split: CompiledModel,
    feeds: Mapping[str, Any],
    *,
    device: str,
    config: Mapping[str, Any] | None,
    reference: str,
    tolerances: Tolerances,
    bisect: bool = False,
) -> Localisation:
    """Where ``split`` (``model`` compiled on ``device`` with ``config``) starts to differ from one whole
    session on ``reference``, for the input set ``feeds``.

    Every subgraph's outputs (runtime.tap) are compared with the reference's values of the same tensors
    (reference.reference_values on ``reference``), each with ``tolerances.of(tensor)``: a model output's own, the
    default for a tensor between subgraphs; the same infinity or NaN on both sides counts as equal there
    (the split gives what the reference gives: a -inf a subgraph hands on is no culprit, whatever the
    verdict on the outputs). The first subgraph in execution order that differs is named;
    with ``bisect``, bisect_subgraph narrows it down to a node. Where ``split``'s subgraphs run in one ONNX
    Runtime session (``one_session``, under PERFORMANCE_HINT=LATENCY), there are no boundaries to tap: the
    split is compiled once more with PERFORMANCE_HINT=THROUGHPUT over ``config`` (a session per subgraph,
    the same plan), for the localisation only. Raises as compile_model and infer.
    """
    tolerances = replace(tolerances, infinities_compare_equal=True, nans_compare_equal=True)
    notes: list[str] = []
    if split.one_session:
        split = core.compile_model(model, device, {**(config or {}), PERFORMANCE_HINT: THROUGHPUT})
        notes.append(
            f"the split's {len(split.subgraphs)} subgraphs run in one ONNX Runtime session under "
            f"PERFORMANCE_HINT=LATENCY; compiled again with {PERFORMANCE_HINT}={THROUGHPUT} (a session "
            "per subgraph) to compare the tensors between them"
        )
    got = tap(split, feeds)
    boundary = [t for s in split.subgraphs for t in s.outputs]
    want = reference_values(core, model, boundary, feeds, reference)
    checked: list[SubgraphCheck] = []
    first = None
    for sub in split.subgraphs:
        check = SubgraphCheck(
            name=sub.name,
            device=sub.device,
            nodes=sub.nodes,
            comparisons=compare_outputs(*arrays(got, want, sub.outputs), tolerances),
        )
        checked.append(check)
        if not check.passed:
            first = check
            break
    if first is None:
        notes.append(
            "every tensor between subgraphs is within tolerance here: the outputs differ where no boundary "
            "shows it (the split's one-session compile, or the reference session's own fusions, which the "
            "tensors tapped for this comparison may keep from happening)"
        )
        return Localisation(checked, None, notes=notes)
    localisation = Localisation(checked, first, notes=notes)
    if bisect:
        compiled = next(s for s in split.subgraphs if s.name == first.name)
        steps, culprit, why = bisect_subgraph(
            core, model, compiled, feeds, reference=reference, tolerances=tolerances
        )
        localisation.bisect = steps
        localisation.culprit = culprit
        localisation.notes += why
    return localisation
