"""The graph index: a model's top-level nodes in topological order, by friendly name, the producer and
the readers of each tensor, which tensors are constant, and what control flow bodies read from outside.

Built once from the graph (no weights read); Model serves its node API from it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

import onnx

from ..errors import ModelError
from .node import Node
from .shared import GRAPH, GRAPHS

NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)


class GraphIndex:
    """The nodes of a model's top-level graph, sorted and named, with the tensors they pass.

    ``ops``: the nodes in topological order (the file's order wherever it is valid); ``by_name``: them by
    friendly name; ``producer``: {tensor: node computing it}; ``constant_tensors``: initializers and what
    is computable from constants alone. Raises ModelError for a graph with a cycle.
    """

    def __init__(self, proto: onnx.ModelProto):
        graph = proto.graph
        self.initializer_names = frozenset(
            [t.name for t in graph.initializer] + [t.values.name for t in graph.sparse_initializer]
        )
        # IR < 4 lists every initializer among the inputs; ORT treats those as constants, so do we.
        self.overridable_initializers = frozenset(
            i.name for i in graph.input if i.name in self.initializer_names and proto.ir_version >= 4
        )
        self.input_names = tuple(i.name for i in graph.input if i.name not in self.initializer_names)
        self.output_names = tuple(o.name for o in graph.output)
        self.ops = _sorted_ops(graph)
        self.by_name = {n.friendly_name: n for n in self.ops}
        # a name the file gives several nodes is none of theirs: a {name: device} map, and ORT's record of
        # which EP ran which node (the exported nodes carry their friendly names), must name one node each
        self.renamed = _renamed(self.ops)
        self.constant_tensors = self._mark_constants()
        self.producer = {out: n for n in self.ops for out in n.outputs}

    def is_constant(self, tensor: str) -> bool:
        """True for initializers and values computable from constants alone."""
        return tensor in self.constant_tensors

    def constant_nodes_for(self, tensors: Iterable[str]) -> list[Node]:
        """The constant-only nodes that compute ``tensors``, transitively, in topological order."""
        needed: dict[int, Node] = {}
        todo = list(tensors)
        while todo:
            node = self.producer.get(todo.pop())
            if node is None or not node.is_constant or node.index in needed:
                continue
            needed[node.index] = node
            todo.extend(node.inputs)
        return [needed[i] for i in sorted(needed)]

    def consumers(self) -> dict[str, list[Node]]:
        """{tensor name: nodes reading it (directly or inside a body)}."""
        out: dict[str, list[Node]] = {}
        for node in self.ops:
            for name in node.inputs:
                out.setdefault(name, []).append(node)
        return out

    def _mark_constants(self) -> frozenset[str]:
        """Mark the nodes computable from constants alone (``Node.is_constant``); returns the constant
        tensors, initializers included."""
        # An overridable initializer is copied into each subgraph like a constant (with the caller's value
        # fed where given), but what is computed from it is not constant: a caller may change it.
        foldable = set(self.initializer_names - self.overridable_initializers)
        for node in self.ops:
            p = node.proto
            if p.domain not in ("", "ai.onnx") or _random(p) or node.has_subgraphs:
                continue
            if p.op_type == "Constant" or (node.inputs and all(i in foldable for i in node.inputs)):
                node.is_constant = True
                foldable.update(node.outputs)
        return frozenset(foldable | self.initializer_names)


def graph_outer_refs(graph: onnx.GraphProto) -> list[str]:
    """Names a (sub)graph reads from enclosing scopes, in first-use order."""
    defined = {i.name for i in graph.input}
    defined.update(t.name for t in graph.initializer)
    defined.update(t.values.name for t in graph.sparse_initializer)
    for node in graph.node:
        defined.update(node.output)
    refs: dict[str, None] = {}
    for node in graph.node:
        for name in list(node.input) + node_outer_refs(node):
            if name and name not in defined:
                refs[name] = None
    return list(refs)


def node_outer_refs(node: onnx.NodeProto) -> list[str]:
    """Names the node's subgraph attributes (If/Loop/Scan bodies) read from the node's scope."""
    refs: dict[str, None] = {}
    for attr in node.attribute:
        kind = attr.type
        if kind in (GRAPH, GRAPHS):
            for g in [attr.g] if kind == GRAPH else attr.graphs:
                refs.update(dict.fromkeys(graph_outer_refs(g)))
    return list(refs)


def _random(node: onnx.NodeProto) -> bool:
    """Whether a node may give another value each run: a random op, or a Dropout given a training_mode
    input (a mask drawn each run, unless its seed or training_mode=False says otherwise: not looked into)."""
    if node.op_type in NONDETERMINISTIC:
        return True
    return node.op_type == "Dropout" and len(node.input) > 2 and bool(node.input[2])


def _sorted_ops(graph: onnx.GraphProto) -> list[Node]:
    """The graph's nodes as Nodes in topological order; ModelError on a cycle."""
    protos = list(graph.node)
    implicit = [node_outer_refs(n) for n in protos]
    names = _friendly_names(protos)
    producer = {out: i for i, n in enumerate(protos) for out in n.output if out}
    deps = []
    for i, (n, imp) in enumerate(zip(protos, implicit, strict=True)):
        found = {producer.get(t) for t in n.input}
        if imp:
            found.update(producer.get(t) for t in imp)
        found.discard(None)
        found.discard(i)
        deps.append(list(found))
    order = _topological(deps)
    if order is None:
        raise ModelError("the model's graph has a cycle: it is not a valid ONNX model")
    return [Node(pos, protos[i], names[i], implicit[i]) for pos, i in enumerate(order)]


def _friendly_names(nodes: list[onnx.NodeProto]) -> list[str]:
    """Each node's friendly name: its own where non-empty and unique, else its first output's (or op
    type's), made unique with a _k suffix."""
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.name] = counts.get(n.name, 0) + 1
    taken = {n.name for n in nodes if n.name and counts[n.name] == 1}
    names = []
    for n in nodes:
        if n.name and counts[n.name] == 1:
            names.append(n.name)
            continue
        base = next((o for o in n.output if o), "") or n.op_type
        candidate, k = base, 0
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        taken.add(candidate)
        names.append(candidate)
    return names


def _renamed(ops: list[Node]) -> dict[str, tuple[str, ...]]:
    """{a name the file gives several nodes: their friendly names, in topological order}."""
    shared: dict[str, list[str]] = {}
    for node in ops:
        if node.proto.name and node.proto.name != node.friendly_name:
            shared.setdefault(node.proto.name, []).append(node.friendly_name)
    return {name: tuple(names) for name, names in shared.items()}


def _topological(deps: list[list[int]]) -> list[int] | None:
    """Kahn's order that keeps the file's order wherever it is already valid; None on a cycle."""
    n = len(deps)
    users: list[list[int]] = [[] for _ in range(n)]
    missing = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i in range(n) if missing[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    return order if len(order) == n else None
