"""What an import checks of an export's plan and models against each other, before any session is made:
an export is untrusted input, and every name its plan gives (the subgraphs' nodes, inputs, outputs and
held shape values, where each model output comes from, the affinities) must be one the source model has
and the runtime can find, and each subgraph's ONNX model must read and make what its plan says. A damaged
or foreign export is then one ArtifactError at import, never a KeyError at the first inference or an
execution provider's failure blamed on a device.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import NoReturn

import onnx

from ...errors import ArtifactError
from ...graph import Model
from ...graph.external import all_tensors
from ...graph.tensor_sizes import size_problem
from ...placement.partition import CONSTANT, INPUT, Plan, Subgraph


def check_plan(plan: Plan, model: Model, where: str) -> None:
    """ArtifactError unless ``plan`` is one a partition of ``model`` could have made: its inputs and
    outputs the model's; each subgraph's nodes and constant nodes nodes of the model, no node in two
    subgraphs; each subgraph reading only model inputs and what an earlier subgraph hands on, handing on
    only what its own nodes make, holding only static shape values; each model output coming from a
    subgraph that hands it on, a model input or a constant; affinities and folded nodes naming the
    model's nodes."""
    nodes = {n.friendly_name: n for n in model.get_ops()}
    if list(plan.inputs) != list(model.input_names) or list(plan.outputs) != list(model.output_names):
        _mismatch(where, "its inputs and outputs are not its source model's")
    for names, what in ((plan.affinities, "its affinities name"), (plan.folded, "its folded nodes are")):
        _known(names, nodes, where, f"{what} {{}}, which its source model does not have")
    handed: set[str] = set(plan.inputs)  # what the subgraphs so far may read
    owner: dict[str, str] = {}
    values = model.shape_values() if any(s.fixed for s in plan.subgraphs) else {}
    for subgraph in plan.subgraphs:
        name = subgraph.name
        _known(
            (*subgraph.nodes, *subgraph.constant_nodes),
            nodes,
            where,
            f"{name} runs {{}}, which its source model does not have",
        )
        for node in subgraph.nodes:
            if owner.setdefault(node, name) != name:
                _mismatch(where, f"{owner[node]} and {name} both run {node!r}")
        made = {t for node in subgraph.nodes for t in nodes[node].outputs}
        for names, known, problem in (
            (subgraph.inputs, handed, "reads {}, which no model input or earlier subgraph hands on"),
            (subgraph.outputs, made, "hands on {}, which none of its nodes makes"),
            (subgraph.fixed, values, "holds {}, which is no static shape value of the model"),
        ):
            _known(names, known, where, f"{name} {problem}")
        handed.update(subgraph.outputs)
    for output, source in plan.output_sources.items():
        if not _serves(plan, model, output, source):
            _mismatch(
                where, f"its model output {output!r} is said to come from {source!r}, which does not make it"
            )
    if set(plan.output_sources) != set(plan.outputs):
        _mismatch(where, "it does not say where each model output comes from")


def _serves(plan: Plan, model: Model, output: str, source: int | str) -> bool:
    """Whether ``source`` (a subgraph's index, INPUT or CONSTANT) gives model output ``output``."""
    if isinstance(source, int):
        return 0 <= source < len(plan.subgraphs) and output in plan.subgraphs[source].outputs
    if source == INPUT:
        return output in plan.inputs
    return source == CONSTANT and model.is_constant(output)


def check_subgraph_model(proto: onnx.ModelProto, subgraph: Subgraph, model: Model, where: str) -> None:
    """ArtifactError unless the exported ONNX model of ``subgraph`` (parsed, weights given back) runs the
    plan's nodes for it, reads its inputs and makes its outputs: the names its session is fed and asked
    for. Its other inputs may only be initializers ``model`` lists among its inputs too, as extract copies
    them (overridable ones, and under IR version 3 every initializer: placement.export.extract), or static
    shape values the subgraph holds, which extract may declare so."""
    graph = proto.graph
    name = subgraph.name
    if sorted(n.name for n in graph.node) != sorted({*subgraph.nodes, *subgraph.constant_nodes}):
        _mismatch(where, f"{name}'s model does not run the nodes its plan gives it")
    inputs = [i.name for i in graph.input]
    listed = set(model.declared_inputs) - set(model.input_names)  # initializers listed as inputs
    listed |= set(subgraph.fixed)  # held static shape values extract declares (cpu-folded-if-range-scalars)
    initializers = {i.name for i in graph.initializer}
    extra = set(inputs) - set(subgraph.inputs)
    if not set(subgraph.inputs) <= set(inputs) or not extra <= listed or not extra <= initializers:
        _mismatch(where, f"{name}'s model reads {inputs}, where its plan gives it {list(subgraph.inputs)}")
    outputs = [o.name for o in graph.output]
    if sorted(outputs) != sorted(subgraph.outputs):
        _mismatch(
            where, f"{name}'s model makes {outputs}, where its plan has it hand on {list(subgraph.outputs)}"
        )


def check_tensors_filled(proto: onnx.ModelProto, where: str, what: str) -> None:
    """ArtifactError where a tensor of ``proto`` (``what``: which model of the export) holds no data, or
    not as much as its shape needs, once its weight table gave it its pooled data: a table missing an
    entry, which a session would refuse as corrupted protobuf."""
    for tensor in all_tensors(proto):
        problem = size_problem(tensor)
        if problem is not None:
            raise ArtifactError(
                f"{where} is damaged: {what} has tensor {tensor.name or '(unnamed)'!r}, which {problem}: its "
                "weight table does not give it its data; export the model again"
            )


def _known(names: Iterable[str], known: Container[str], where: str, problem: str) -> None:
    """ArtifactError (``problem``, its ``{}`` the first name) for the first of ``names`` not in ``known``."""
    missing = next((n for n in names if n not in known), None)
    if missing is not None:
        _mismatch(where, problem.format(repr(missing)))


def _mismatch(where: str, problem: str) -> NoReturn:
    raise ArtifactError(
        f"{where} is damaged: its plan does not match the subgraphs and model it holds ({problem}): export the "
        "model again"
    )
