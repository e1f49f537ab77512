"""Partition: from per-node affinities to a plan of subgraphs (a plain data structure, nothing runs).

Connected operations of one affinity form a subgraph. Where merging same-affinity regions would make the
graph of subgraphs cyclic (A -> B -> A through a diamond), only the regions in that strongly connected
component are re-cut: their nodes are put in a topological order that stays on one device as long as it
can, and each run of one device in that order is a piece (runs of a topological order can never form a
cycle). Nearly linear in nodes + edges. Constants are never cut: each subgraph gets its own copy of the
constant-only nodes it reads.

Nodes of one affinity that meet only at a model input are connected through it, as OpenVINO's Parameter
joins them, unless the plan cuts ``branches`` (HETERO_CONCURRENCY=CONCURRENT): then each such branch is a
subgraph of its own, and so are the branches between a fork and a join inside one device's nodes where
they weigh enough (forks.py), so that branches on one device can run at the same time.
"""

from __future__ import annotations

import gc
import heapq
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError
from ..graph import Model, Node
from .forks import split_forks
from .union_find import UnionFind

INPUT = "input"
CONSTANT = "constant"


@dataclass(frozen=True)
class Subgraph:
    """One subgraph of the plan: its device, owned nodes, copied constant nodes and boundary tensors.

    ``index``: place in execution order, from 0; ``nodes`` / ``constant_nodes``: friendly names (each
    subgraph gets its own copy of the constant-only nodes it reads); ``inputs`` / ``outputs``: the tensors
    it reads from model inputs or earlier subgraphs, and those it hands on (or the caller gets);
    ``fixed``: static shape values made in another subgraph that it holds as constants of its own
    (Model.shape_values: a cut never carries one).
    """

    index: int
    device: str
    nodes: tuple[str, ...]
    constant_nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fixed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # a session run must ask for an output ("At least one output should be requested"): a subgraph
        # with nothing to hand on is the partition's own defect, never a device's (HETERO_FALLBACK)
        if not self.outputs:
            raise AssertionError(f"internal error: {self.name} of the plan hands no tensor on")

    @property
    def name(self) -> str:
        """``subgraph<N>``, N counted from 1 in execution order (the doc's -pc numbering)."""
        return f"subgraph{self.index + 1}"


@dataclass(frozen=True)
class Link:
    """A tensor that a subgraph (or the model's input) hands to other subgraphs: ``producer`` is the
    subgraph index (None for a model input, ``source_device`` None too), ``consumers`` the indexes of
    the subgraphs that read it and ``target_devices`` their devices."""

    tensor: str
    producer: int | None
    consumers: tuple[int, ...]
    source_device: str | None
    target_devices: tuple[str, ...]

    @property
    def crosses_devices(self) -> bool:
        """True when some consumer runs on another device than the producer."""
        return self.source_device is not None and any(d != self.source_device for d in self.target_devices)


@dataclass(frozen=True)
class Plan:
    """Subgraphs in execution order, and where every model output comes from (Core.plan returns one).

    ``output_sources``: {model output: index of the subgraph producing it, or "input" / "constant" for
    one served without a session}; ``affinities``: {friendly name: device} the plan was cut from;
    ``folded``: nodes no subgraph runs, in model order: their work only feeds static shape values the
    subgraphs hold as constants (Subgraph.fixed), so no session runs them; ``branches``: whether nodes of
    one device that meet only at a model input were left in subgraphs of their own (partition's).
    ``str(plan)`` is a readable summary, ``to_dict()`` its JSON form.
    """

    model_name: str
    subgraphs: tuple[Subgraph, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    output_sources: Mapping[str, int | str]
    affinities: Mapping[str, str] = field(default_factory=dict)
    folded: tuple[str, ...] = ()
    branches: bool = False

    @property
    def devices(self) -> list[str]:
        """Devices that run subgraphs, unique, in execution order (OpenVINO's EXECUTION_DEVICES)."""
        return list(dict.fromkeys(s.device for s in self.subgraphs))

    def folded_line(self, shown: int = 8) -> str:
        """What the CLI says of the folded nodes, in one line: how many, that no session runs them and why,
        and the first ``shown`` names; "" where none is folded."""
        if not self.folded:
            return ""
        names = ", ".join(self.folded[:shown]) + (", ..." if len(self.folded) > shown else "")
        return (
            f"{len(self.folded)} node(s) folded, no session runs them (they only feed static shape values "
            f"the subgraphs hold): {names}"
        )

    def links(self) -> list[Link]:
        """Tensors passed into subgraphs from model inputs or other subgraphs, in execution order."""
        producer: dict[str, int] = {t: s.index for s in self.subgraphs for t in s.outputs}
        consumers: dict[str, list[int]] = {}
        for s in self.subgraphs:
            for t in s.inputs:
                consumers.setdefault(t, []).append(s.index)
        out = []
        for tensor, users in consumers.items():
            p = producer.get(tensor)
            out.append(
                Link(
                    tensor,
                    p,
                    tuple(users),
                    None if p is None else self.subgraphs[p].device,
                    tuple(self.subgraphs[u].device for u in users),
                )
            )
        return out

    def passed_tensors(self) -> set[str]:
        """Tensors one subgraph hands to another (not model inputs)."""
        return {link.tensor for link in self.links() if link.producer is not None}

    def crossing_tensors(self) -> list[str]:
        """Tensors that move from one device to another at run time."""
        return [link.tensor for link in self.links() if link.crosses_devices]

    def crossing_by_subgraph(self) -> dict[int, tuple[list[str], list[str]]]:
        """{subgraph index: (tensors it receives from another device, tensors it sends to another device)},
        each list in execution order (crossing_tensors, per subgraph: what ``hetero query`` tabulates)."""
        out: dict[int, tuple[list[str], list[str]]] = {s.index: ([], []) for s in self.subgraphs}
        for link in self.links():
            if link.producer is None:
                continue
            for consumer, device in zip(link.consumers, link.target_devices, strict=True):
                if device != link.source_device:
                    out[consumer][0].append(link.tensor)
                    if link.tensor not in out[link.producer][1]:
                        out[link.producer][1].append(link.tensor)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form of the plan: model, inputs, outputs, output_sources and, per subgraph, its
        name, device, nodes, constant nodes, inputs, outputs and fixed shape values (``hetero query
        --json`` prints it)."""
        return {
            "model": self.model_name,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "output_sources": dict(self.output_sources),
            "folded": list(self.folded),
            "branches": self.branches,
            "subgraphs": [
                {
                    "name": s.name,
                    "device": s.device,
                    "nodes": list(s.nodes),
                    "constant_nodes": list(s.constant_nodes),
                    "inputs": list(s.inputs),
                    "outputs": list(s.outputs),
                    "fixed": list(s.fixed),
                }
                for s in self.subgraphs
            ],
        }

    def __str__(self) -> str:
        lines = [f"plan of {self.model_name}: {len(self.subgraphs)} subgraph(s) on {', '.join(self.devices)}"]
        for s in self.subgraphs:
            fixed = f", holds {list(s.fixed)}" if s.fixed else ""
            lines.append(
                f"  {s.name}: {s.device}, {len(s.nodes)} node(s), inputs {list(s.inputs)}, "
                f"outputs {list(s.outputs)}{fixed}"
            )
        if self.folded:
            lines.append(f"  folded (only feed static shape values, no session): {list(self.folded)}")
        for name, source in self.output_sources.items():
            if not isinstance(source, int):
                lines.append(f"  output {name!r} is served from the model's {source}, without a session")
        return "\n".join(lines)


def partition(model: Model, affinities: Mapping[str, str], *, branches: bool = False) -> Plan:
    """Group ``model``'s nodes by ``affinities`` ({friendly name: device}) into an acyclic, ordered plan;
    ``branches``: nodes of one device joined only by a model input they both read stay apart (subgraphs
    that can run at the same time) rather than one subgraph."""
    # Partitioning allocates millions of small lists and tuples that all live until it returns; Python's
    # cyclic collector would rescan every one of them many times over (10k -> 100k nodes: 16-28x the
    # time). They hold no reference cycles, so collection waits until the plan is built.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _partition(model, affinities, branches)
    finally:
        if enabled:
            gc.enable()


def _partition(model: Model, affinities: Mapping[str, str], branches: bool) -> Plan:
    active = [n for n in model.get_ops() if not n.is_constant]
    values: Mapping[str, Any] | None = None
    folded: set[str] = set()
    while True:
        aff, group, ordered = _cut(model, active, affinities, branches)
        if values is None:  # nothing crosses a plan of one group
            values = model.shape_values() if len(ordered) > 1 else {}
        subgraphs, dropped = _build_subgraphs(model, active, aff, group, ordered, values)
        if not dropped:
            break
        # the nodes that run are cut again without the folded ones: neighbours those kept apart may join
        folded.update(dropped)
        active = [n for n in active if n.friendly_name not in folded]
    return Plan(
        model_name=model.name,
        subgraphs=subgraphs,
        inputs=model.input_names,
        outputs=model.output_names,
        output_sources=_output_sources(model, subgraphs),
        affinities=dict(affinities),
        folded=tuple(n.friendly_name for n in model.get_ops() if n.friendly_name in folded),
        branches=branches,
    )


def _cut(
    model: Model, active: list[Node], affinities: Mapping[str, str], branches: bool
) -> tuple[list[str], list[int], list[int]]:
    """The groups of ``active`` (non-constant nodes): each one's device, its group id, and the group ids
    in execution order; ``branches``: a model input joins none of its readers."""
    aff = [affinities[n.friendly_name] for n in active]
    producer: dict[str, int] = {}
    for k, n in enumerate(active):
        for t in n.outputs:
            producer[t] = k
    preds = [[producer[t] for t in n.inputs if t in producer] for n in active]
    model_inputs = set() if branches else set(model.input_names)
    one = len(set(aff)) <= 1 and not branches
    group = [0] * len(active) if one else _groups(active, aff, preds, model_inputs)
    if branches:  # and forks inside a group: their branches apart where they weigh enough (forks.py)
        group = split_forks(
            group, preds, _weight(model, active), lambda k: active[k].get_type_name() in RECURRENT
        )
    return aff, group, _order_groups(group, preds)


#: the ops that run their steps one after another (forks.split_forks cuts two of them apart)
RECURRENT = frozenset({"LSTM", "GRU", "RNN", "Scan", "Loop"})


def _weight(model: Model, active: list[Node]) -> Callable[[int], float]:
    """What node k of ``active`` weighs for forks.split_forks: the elements of the constants it reads
    (weights: its work per output, roughly), 1 at least; each counted once."""

    def weight(node: Node) -> float:
        total = 0
        for tensor in node.inputs:
            if tensor and model.is_constant(tensor):
                value_type = model.value_type(tensor)
                dims = value_type.tensor_type.shape.dim if value_type is not None else ()
                if dims and all(d.HasField("dim_value") for d in dims):
                    total += math.prod(d.dim_value for d in dims)
        return float(max(1, total))

    return [weight(node) for node in active].__getitem__


def _connect(
    active: list[Node],
    preds: list[list[int]],
    model_inputs: set[str],
    members: list[int],
    key: list[Any],
    uf: UnionFind,
) -> UnionFind:
    """Union, among ``members``, same-key nodes joined by an edge or by a shared model input."""
    first_reader: dict[tuple[str, Any], int] = {}
    inside = set(members)
    for k in members:
        for p in preds[k]:
            if p in inside and key[p] == key[k]:
                uf.union(p, k)
        for t in active[k].inputs:
            if t in model_inputs:
                other = first_reader.setdefault((t, key[k]), k)
                uf.union(other, k)
    return uf


def _groups(active: list[Node], aff: list[str], preds: list[list[int]], model_inputs: set[str]) -> list[int]:
    n = len(active)
    everyone = list(range(n))
    uf = _connect(active, preds, model_inputs, everyone, list(aff), UnionFind(n))
    comp = [uf.find(k) for k in everyone]
    edges: dict[int, set[int]] = {}
    for k in everyone:
        for p in preds[k]:
            if comp[p] != comp[k]:
                edges.setdefault(comp[p], set()).add(comp[k])
    group = list(comp)
    by_comp: dict[int, list[int]] = {}
    for k in everyone:
        by_comp.setdefault(comp[k], []).append(k)
    key: list[Any] = [None] * n  # shared by the cyclic regions: they are disjoint
    sub = UnionFind(n)
    for scc in _cyclic_components(sorted(by_comp), edges):
        members = sorted(k for c in scc for k in by_comp[c])
        run = _device_runs(members, aff, preds)
        for k in members:
            key[k] = run[k]
        _connect(active, preds, model_inputs, members, key, sub)
        for k in members:
            group[k] = n + sub.find(k)  # fresh ids, disjoint from component ids
    return group


def _device_runs(members: list[int], aff: list[str], preds: list[list[int]]) -> dict[int, int]:
    """Number each node by its run in a topological order of ``members`` that switches device rarely.

    Kahn's algorithm with one ready heap per device: keep taking ready nodes of the current device, and
    when it has none, switch to the device whose ready node comes first. Predecessors outside ``members``
    are already done (they belong to groups before this cyclic region).
    """
    inside = set(members)
    users: dict[int, list[int]] = {k: [] for k in members}
    missing = dict.fromkeys(members, 0)
    for k in members:
        for p in preds[k]:
            if p in inside:
                users[p].append(k)
                missing[k] += 1
    ready: dict[str, list[int]] = {}
    for k in members:
        if missing[k] == 0:
            heapq.heappush(ready.setdefault(aff[k], []), k)
    run: dict[int, int] = {}
    number, current = -1, None
    while any(ready.values()):
        if not ready.get(current):
            current = min((heap[0], dev) for dev, heap in ready.items() if heap)[1]
            number += 1
        k = heapq.heappop(ready[current])
        run[k] = number
        for u in users[k]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready.setdefault(aff[u], []), u)
    return run


def _cyclic_components(nodes: list[int], edges: dict[int, set[int]]) -> list[set[int]]:
    """Strongly connected components with more than one member (iterative Tarjan)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    result: list[set[int]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    result.append(comp)
    return result


def _order_groups(group: list[int], preds: list[list[int]]) -> list[int]:
    """Group ids in execution order: Kahn's algorithm, earliest first node first."""
    first: dict[int, int] = {}
    for k, g in enumerate(group):
        first.setdefault(g, k)
    succ: dict[int, set[int]] = {g: set() for g in first}
    missing: dict[int, int] = dict.fromkeys(first, 0)
    for k, g in enumerate(group):
        for p in preds[k]:
            pg = group[p]
            if pg != g and g not in succ[pg]:
                succ[pg].add(g)
                missing[g] += 1
    ready = [(first[g], g) for g in first if missing[g] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, g = heapq.heappop(ready)
        order.append(g)
        for s in succ[g]:
            missing[s] -= 1
            if missing[s] == 0:
                heapq.heappush(ready, (first[s], s))
    if len(order) != len(first):  # pragma: no cover - the grouping guarantees acyclicity
        raise AssertionError("internal error: the subgraphs form a cycle")
    return order


def _build_subgraphs(
    model: Model,
    active: list[Node],
    aff: list[str],
    group: list[int],
    order: list[int],
    values: Mapping[str, Any],
) -> tuple[tuple[Subgraph, ...], tuple[str, ...]]:
    """The subgraphs of the ordered groups, and the nodes of the groups with nothing to hand on (folded).

    A group hands on the model outputs it makes and the tensors a later subgraph reads, but never a static
    shape value (``values``: each reader holds its own). Worked out from the last group back, so that a
    group read only by folded groups is folded too: a group left with nothing to hand on only feeds
    values the subgraphs hold, and no session runs it (ORT would refuse a run that asks for no output).
    A group whose results nobody reads (a dead end of the model) still runs, handing them on.
    """
    members: dict[int, list[int]] = {g: [] for g in order}
    for k, g in enumerate(group):
        members[g].append(k)
    read = {t for n in model.get_ops() for t in n.inputs}  # folded nodes' reads too: no dead end
    model_outputs = set(model.output_names)
    wanted: set[str] = set()  # tensors the groups that run (so far, from the last) read from others
    kept: list[tuple[int, list[Node], dict[str, None], dict[str, None], dict[str, None], list[str]]] = []
    folded: list[list[str]] = []  # per folded group, from the last
    for g in reversed(order):
        nodes = [active[k] for k in members[g]]
        inputs, constants, fixed = _reads(model, nodes, values)
        made = [t for n in nodes for t in n.outputs]
        outputs = [t for t in made if t in model_outputs or (t not in values and t in wanted)]
        if not outputs:  # a dead end: its results stay observable, so it runs as in the model
            outputs = [t for t in made if t not in read and t not in values]
        if not outputs:
            folded.append([n.friendly_name for n in nodes])
            continue
        wanted.update(inputs)
        kept.append((g, nodes, inputs, constants, fixed, outputs))
    subgraphs = tuple(
        Subgraph(
            index=index,
            device=aff[members[g][0]],
            nodes=tuple(n.friendly_name for n in nodes),
            constant_nodes=tuple(n.friendly_name for n in model.constant_nodes_for(constants)),
            inputs=tuple(inputs),
            outputs=tuple(dict.fromkeys(outputs)),
            fixed=tuple(fixed),
        )
        for index, (g, nodes, inputs, constants, fixed, outputs) in enumerate(reversed(kept))
    )
    return subgraphs, tuple(name for names in reversed(folded) for name in names)


def _reads(
    model: Model, nodes: list[Node], values: Mapping[str, Any]
) -> tuple[dict[str, None], dict[str, None], dict[str, None]]:
    """What a group of ``nodes`` reads from outside itself, each in order of first read: tensors from model
    inputs or other groups, constants (it gets its own copy) and static shape values (it holds them)."""
    produced = {t for n in nodes for t in n.outputs}
    inputs: dict[str, None] = {}
    constants: dict[str, None] = {}
    fixed: dict[str, None] = {}
    for n in nodes:
        for t in n.inputs:
            if t in produced:
                continue
            if model.is_constant(t):
                constants[t] = None
            elif t in values:
                fixed[t] = None
            else:
                inputs[t] = None
    return inputs, constants, fixed


def _output_sources(model: Model, subgraphs: tuple[Subgraph, ...]) -> dict[str, int | str]:
    produced = {t: s.index for s in subgraphs for t in s.outputs}
    sources: dict[str, int | str] = {}
    for name in model.output_names:
        if name in produced:
            sources[name] = produced[name]
        elif name in model.input_names:
            sources[name] = INPUT
        elif model.is_constant(name):
            sources[name] = CONSTANT
        else:
            raise ModelError(f"model output {name!r} is produced by no node, input or initializer")
    return sources
