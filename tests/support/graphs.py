"""Random ONNX DAGs for the property tests, and the invariants every partition plan must satisfy.

``cases()`` is a hypothesis strategy of :class:`Case`: a float32 ONNX model (opset 17, IR 9) with
branches, joins (Add/Mul/Sub/Concat/MatMul), shared constants (initializers read by several nodes,
Constant nodes, constant-only chains such as Reshape/Transpose of an initializer), multi-output Split,
unary ops (Exp only on clipped inputs), 1..3 graph inputs, graph outputs anywhere (sometimes a graph input
or a constant directly), unnamed nodes and duplicate node names, plus random per-node affinities and
feeds. With ``refused=True`` it also uses ops the OpenVINO EP refuses (IsInf -> Cast / Where, IsNaN,
Hardmax), so automatic mode has to split.

``check_plan()`` checks a :class:`hetero_cli.placement.partition.Plan` against the model, computing the expected
structure independently of the engine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 9
LIMIT = 20.0  # operands above this bound go through Tanh first, so values stay well-conditioned
MAX_ROWS = 8
MAX_COLS = 8


# Hypothesis settings for the random graphs: the same examples on every run and machine, no deadline
# (a compile takes tens of milliseconds), big models and slow draws allowed.
PLAN_ONLY = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
WITH_SESSIONS = settings(PLAN_ONLY, max_examples=50)


@dataclass
class Tensor:
    """A float32 tensor in the builder's pool."""

    name: str
    shape: tuple[int, ...]
    bound: float  # |value| <= bound
    kind: str  # "input", "constant" (initializer or computed from constants alone) or "value"
    exact: bool  # bitwise the same whichever EP / fusion computes it (inputs, constants, Relu, Concat...)


@dataclass(repr=False)
class Case:
    """One generated model with its feeds and per-node affinities (aligned with ``model.graph.node``)."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    affinities: list[str]
    bounds: dict[str, float] = field(default_factory=dict)  # per graph output
    refused_ops: frozenset[str] = frozenset()  # op types used that the OpenVINO EP refuses

    def affinity_map(self, model) -> dict[str, str]:
        """{friendly name: device} for a hetero_cli.Model read from ``self.model``."""
        by_output = {n.output[0]: a for n, a in zip(self.model.graph.node, self.affinities, strict=True)}
        return {n.get_friendly_name(): by_output[n.proto.output[0]] for n in model.get_ops()}

    def apply_affinities(self, model) -> None:
        """Set rt_info["affinity"] on every node of a hetero_cli.Model read from ``self.model``."""
        affinities = self.affinity_map(model)
        for node in model.get_ops():
            node.get_rt_info()["affinity"] = affinities[node.get_friendly_name()]

    def __repr__(self) -> str:
        """The whole graph, one node a line, so a failing example can be rebuilt from the report."""
        g = self.model.graph
        inits = {t.name: tuple(t.dims) for t in g.initializer}
        lines = [f"Case(graph {g.name!r}, opset {OPSET}, IR {IR_VERSION}:"]
        lines += [f"  input {n}: shape {v.shape}" for n, v in self.feeds.items()]
        lines += [f"  initializer {n}: dims {d}" for n, d in inits.items()]
        for node, device in zip(g.node, self.affinities, strict=True):
            attrs = ", ".join(
                f"{a.name}={helper.get_attribute_value(a)}" for a in node.attribute if a.name != "value"
            )
            lines.append(
                f"  [{device}] {node.op_type}({', '.join(node.input)}) -> {', '.join(node.output)}"
                f"  name={node.name!r}{'  ' + attrs if attrs else ''}"
            )
        lines.append(f"  outputs: {', '.join(o.name for o in g.output)})")
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # what hypothesis prints for a failing example
        printer.text(repr(self))

    def tolerance(self, output: str) -> dict[str, float]:
        """assert_allclose tolerances for one output, scaled by the bound its value can reach."""
        return {"rtol": 1e-4, "atol": 1e-4 * max(1.0, self.bounds.get(output, 1.0))}


class _Builder:
    def __init__(self, draw, rng: np.random.Generator):
        self.draw = draw
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.pool: list[Tensor] = []
        self.shared: dict[object, str] = {}  # shared constant initializers (scalars, split sizes, shapes)
        self.counter = 0
        self.refused: set[str] = set()
        self.consumed: set[str] = set()

    def fresh(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def node(self, op: str, inputs: Sequence[str], n_out: int = 1, **attrs) -> list[str]:
        outs = [self.fresh() for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, **attrs))
        self.consumed.update(inputs)
        return outs

    def initializer(self, array: np.ndarray, key: object = None) -> str:
        if key is not None and key in self.shared:
            return self.shared[key]
        name = self.fresh("c")
        self.initializers.append(numpy_helper.from_array(array, name))
        if key is not None:
            self.shared[key] = name
        return name

    def values(self, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
        return (self.rng.uniform(-scale, scale, size=shape)).astype(np.float32)

    def add(self, name: str, shape, bound: float, kind: str, exact: bool) -> Tensor:
        t = Tensor(name, tuple(shape), float(bound), kind, exact)
        self.pool.append(t)
        return t

    @staticmethod
    def kind_of(*operands: Tensor) -> str:
        return "constant" if all(t.kind == "constant" for t in operands) else "value"

    def pick(self, pred=lambda t: True) -> Tensor | None:
        candidates = [t for t in self.pool if pred(t)]
        if not candidates:
            return None
        return self.draw(st.sampled_from(candidates))

    def tame(self, t: Tensor) -> Tensor:
        """``t`` itself, or Tanh(t) when its bound is too large for well-conditioned arithmetic."""
        if t.bound <= LIMIT:
            return t
        (out,) = self.node("Tanh", [t.name])
        return self.add(out, t.shape, 1.0, t.kind, False)

    def scalar(self, value: float) -> str:
        return self.initializer(np.array(value, dtype=np.float32), key=("scalar", value))


# --- op steps: each adds one or a few nodes ---------------------------------------------------------------

UNARY = {  # op -> (bound(x) -> bound(y), exact)
    "Relu": (lambda b: b, True),
    "Neg": (lambda b: b, True),
    "Abs": (lambda b: b, True),
    "Identity": (lambda b: b, True),
    "Sigmoid": (lambda b: 1.0, False),
    "Tanh": (lambda b: 1.0, False),
    "Softsign": (lambda b: 1.0, False),
}


def _unary(b: _Builder) -> None:
    x = b.pick()
    op = b.draw(st.sampled_from(sorted(UNARY)))
    bound, exact = UNARY[op]
    (out,) = b.node(op, [x.name])
    b.add(out, x.shape, bound(x.bound), x.kind, exact and x.exact)


def _exp(b: _Builder) -> None:
    x = b.pick()
    lo, hi = b.scalar(-2.0), b.scalar(2.0)  # shared by every Clip
    (clipped,) = b.node("Clip", [x.name, lo, hi])
    (out,) = b.node("Exp", [clipped])
    b.add(clipped, x.shape, min(x.bound, 2.0), x.kind, x.exact)
    b.add(out, x.shape, float(np.exp(2.0)), x.kind, False)


def _broadcastable(a: Tensor, t: Tensor) -> bool:
    return t.shape == a.shape or (t.shape[-1] == a.shape[-1] and 1 in (t.shape[0], a.shape[0]))


def _binary(b: _Builder) -> None:
    op = b.draw(st.sampled_from(["Add", "Mul", "Sub", "Max"]))
    a = b.tame(b.pick())
    source = b.draw(st.sampled_from(["pool", "pool", "scalar", "row", "same"]))
    if source == "pool":
        other = b.pick(lambda t: _broadcastable(a, t))
        other = b.tame(other)
    else:
        if source == "scalar":
            name = b.scalar(b.draw(st.sampled_from([0.5, 2.0, -1.0])))
            shape: tuple[int, ...] = ()
        else:
            shape = (1, a.shape[1]) if source == "row" else a.shape
            name = b.initializer(b.values(shape))
            b.add(name, shape, 1.0, "constant", True)  # later ops may read it again: shared
        other = Tensor(name, shape, 2.0 if source == "scalar" else 1.0, "constant", True)
    lhs, rhs = (a, other) if b.draw(st.booleans()) else (other, a)
    (out,) = b.node(op, [lhs.name, rhs.name])
    shape = tuple(np.broadcast_shapes(a.shape, other.shape))
    bound = a.bound * other.bound if op == "Mul" else (max if op == "Max" else sum)((a.bound, other.bound))
    b.add(out, shape, bound, b.kind_of(a, other), False if op != "Max" else a.exact and other.exact)


def _concat(b: _Builder) -> None:
    a = b.pick()
    axis = b.draw(st.sampled_from([0, 1]))
    parts = [a]
    limit = MAX_ROWS if axis == 0 else MAX_COLS
    for _ in range(b.draw(st.integers(1, 2))):
        room = limit - sum(p.shape[axis] for p in parts)
        t = b.pick(lambda t, room=room: t.shape[1 - axis] == a.shape[1 - axis] and t.shape[axis] <= room)
        if t is None:
            break
        parts.append(t)
    if len(parts) == 1:
        return _unary(b)
    (out,) = b.node("Concat", [p.name for p in parts], axis=axis)
    shape = list(a.shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    b.add(out, shape, max(p.bound for p in parts), b.kind_of(*parts), all(p.exact for p in parts))


def _split(b: _Builder) -> None:
    x = b.pick(lambda t: max(t.shape) >= 2)
    if x is None:
        return _unary(b)
    axis = b.draw(st.sampled_from([i for i in (0, 1) if x.shape[i] >= 2]))
    n = x.shape[axis]
    k = b.draw(st.integers(2, min(3, n)))
    cuts = sorted(b.draw(st.lists(st.integers(1, n - 1), min_size=k - 1, max_size=k - 1, unique=True)))
    sizes = [hi - lo for lo, hi in zip([0, *cuts], [*cuts, n], strict=True)]
    split = b.initializer(np.array(sizes, dtype=np.int64), key=("split", tuple(sizes)))
    outs = b.node("Split", [x.name, split], n_out=len(sizes), axis=axis)
    for out, size in zip(outs, sizes, strict=True):
        shape = list(x.shape)
        shape[axis] = size
        b.add(out, shape, x.bound, x.kind, x.exact)


def _matmul(b: _Builder) -> None:
    a = b.tame(b.pick())
    k = b.draw(st.integers(2, 4))
    key = ("weight", a.shape[1], k)
    if key not in b.shared or b.draw(st.booleans()):
        w = b.initializer(b.values((a.shape[1], k), 0.5))
        b.shared[key] = w
    (out,) = b.node("MatMul", [a.name, b.shared[key]])
    b.add(out, (a.shape[0], k), a.bound * a.shape[1] * 0.5, b.kind_of(a), False)


def _constant_source(b: _Builder) -> None:
    shape = (b.draw(st.integers(1, 4)), b.draw(st.integers(2, 4)))
    how = b.draw(st.sampled_from(["initializer", "Constant", "Reshape", "Transpose"]))
    if how == "initializer":
        name = b.initializer(b.values(shape))
    elif how == "Constant":
        (name,) = b.node("Constant", [], value=numpy_helper.from_array(b.values(shape)))
    elif how == "Reshape":
        flat = b.initializer(b.values((shape[0] * shape[1],)))
        target = b.initializer(np.array(shape, dtype=np.int64), key=("shape", shape))
        (name,) = b.node("Reshape", [flat, target])
    else:
        src = b.initializer(b.values(shape[::-1]))
        (name,) = b.node("Transpose", [src], perm=[1, 0])
    b.add(name, shape, 1.0, "constant", True)


def _refused(b: _Builder) -> None:
    """Ops the OpenVINO EP does not take."""
    how = b.draw(st.sampled_from(["IsInf-Cast", "IsInf-Where", "IsNaN-Where", "Hardmax"]))
    if how == "Hardmax":
        # only over exact values: a near-tie computed slightly differently elsewhere would flip the argmax
        x = b.pick(lambda t: t.exact)
        (out,) = b.node("Hardmax", [x.name], axis=-1)
        b.add(out, x.shape, 1.0, x.kind, True)
    else:
        x = b.pick()
        test = how.split("-")[0]
        (mask,) = b.node(test, [x.name])
        if how.endswith("Cast"):
            (out,) = b.node("Cast", [mask], to=TensorProto.FLOAT)
            b.add(out, x.shape, 1.0, x.kind, True)
        else:
            (out,) = b.node("Where", [mask, b.scalar(0.0), x.name])
            b.add(out, x.shape, x.bound, x.kind, x.exact)
    b.refused.add(how.split("-")[0])


STEPS = {
    "unary": _unary,
    "exp": _exp,
    "binary": _binary,
    "concat": _concat,
    "split": _split,
    "matmul": _matmul,
    "constant": _constant_source,
}
WEIGHTS = {"unary": 3, "exp": 1, "binary": 4, "concat": 1, "split": 1, "matmul": 1, "constant": 1}


@st.composite
def cases(
    draw,
    devices: Sequence[str] = ("CPU", "OPENVINO"),
    *,
    max_steps: int = 10,
    refused: bool = False,
) -> Case:
    """A random model, its feeds and per-node affinities drawn from ``devices``."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    b = _Builder(draw, rng)

    feeds: dict[str, np.ndarray] = {}
    for i in range(draw(st.integers(1, 3))):
        shape = (draw(st.integers(1, 4)), draw(st.integers(2, 4)))
        name = f"in{i}"
        dims: list[int | str | None] = list(shape)
        style = draw(st.sampled_from(["static", "static", "symbolic", "unknown"]))
        if style == "symbolic":
            dims[0] = f"rows{i}"  # one symbol per input: the inputs' sizes differ
        elif style == "unknown":
            dims = [None, shape[1]]
        b.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
        b.add(name, shape, 1.0, "input", True)
        feeds[name] = b.values(shape)

    steps = dict(STEPS)
    weights = dict(WEIGHTS)
    if refused:
        steps["refused"] = _refused
        weights["refused"] = 3
    menu = [k for k, w in weights.items() for _ in range(w)]
    for _ in range(draw(st.integers(1, max_steps))):
        steps[draw(st.sampled_from(menu))](b)
    if refused and not b.refused:
        _refused(b)

    outputs = _outputs(draw, b)
    nodes = b.nodes
    _name_nodes(draw, b)
    graph = helper.make_graph(
        nodes,
        draw(st.sampled_from(["g", "random graph", "graph/with:odd.chars"])),
        b.inputs,
        [_output_info(draw, t) for t in outputs],
        initializer=b.initializers,
    )
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", OPSET)])
    affinities = [draw(st.sampled_from(list(devices))) for _ in nodes]
    return Case(
        model=model,
        feeds=feeds,
        affinities=affinities,
        bounds={t.name: t.bound for t in outputs},
        refused_ops=frozenset(b.refused),
    )


def _outputs(draw, b: _Builder) -> list[Tensor]:
    values = [t for t in b.pool if t.kind == "value"]
    chosen: dict[str, Tensor] = {}
    if values:
        for t in draw(st.lists(st.sampled_from(values), max_size=4)):
            chosen[t.name] = t
        if draw(st.booleans()):  # every dangling value, so nothing is dead code
            for t in values:
                if t.name not in b.consumed:
                    chosen[t.name] = t
    if draw(st.integers(0, 4)) == 0:
        t = draw(st.sampled_from([t for t in b.pool if t.kind == "input"]))
        chosen[t.name] = t
    constants = [t for t in b.pool if t.kind == "constant"]
    if constants and draw(st.integers(0, 3)) == 0:
        t = draw(st.sampled_from(constants))
        chosen[t.name] = t
    if not chosen:
        t = b.pool[-1]
        chosen[t.name] = t
    order = list(chosen.values())
    return draw(st.permutations(order)) if len(order) > 1 else order


def _output_info(draw, t: Tensor) -> onnx.ValueInfoProto:
    style = draw(st.sampled_from(["static", "rank"]))
    dims = list(t.shape) if style == "static" else [None] * len(t.shape)
    return helper.make_tensor_value_info(t.name, TensorProto.FLOAT, dims)


def _name_nodes(draw, b: _Builder) -> None:
    """Unique names mostly; sometimes none, a duplicate, or one that looks like a tensor's name."""
    for i, node in enumerate(b.nodes):
        style = draw(st.sampled_from(["unique", "unique", "none", "duplicate", "tensor"]))
        if style == "unique":
            node.name = f"{node.op_type.lower()}_{i}"
        elif style == "duplicate":
            node.name = "dup"
        elif style == "tensor":  # e.g. the name another node's friendly name would be derived from
            node.name = draw(st.sampled_from([o for n in b.nodes for o in n.output]))
        else:
            node.name = ""


# --- plan invariants ----------------------------------------------------------------------------------------


class _UF:
    def __init__(self, items):
        self.parent = {i: i for i in items}

    def find(self, x):
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        self.parent[self.find(a)] = self.find(b)


def _is_acyclic(nodes, edges: Mapping) -> bool:
    indegree = Counter(v for u in nodes for v in edges.get(u, ()))
    ready = [u for u in nodes if indegree[u] == 0]
    seen = 0
    while ready:
        u = ready.pop()
        seen += 1
        for v in edges.get(u, ()):
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    return seen == len(nodes)


def constant_nodes(model) -> set[str]:
    """Friendly names of the nodes computable from initializers alone (computed here, not by the engine)."""
    graph = model.proto.graph
    constant = {t.name for t in graph.initializer}
    out = set()
    for n in model.get_ops():
        ins = [i for i in n.proto.input if i]
        if n.proto.op_type == "Constant" or (ins and all(i in constant for i in ins)):
            out.add(n.get_friendly_name())
            constant.update(o for o in n.proto.output if o)
    return out


def expected_components(
    model, affinities: Mapping[str, str], folded: Collection[str] = ()
) -> tuple[list[frozenset[str]], bool]:
    """Connected same-affinity groups of the non-constant nodes that run (not ``folded``: edges, or a
    shared model input) and whether the graph between those groups is acyclic (if so, they must be
    exactly the plan's subgraphs)."""
    consts = constant_nodes(model)
    active = [n for n in model.get_ops() if n.get_friendly_name() not in {*consts, *folded}]
    names = [n.get_friendly_name() for n in active]
    producer = {o: n.get_friendly_name() for n in active for o in n.proto.output if o}
    model_inputs = set(model.input_names)
    uf = _UF(names)
    first_reader: dict[tuple[str, str], str] = {}
    for n in active:
        me = n.get_friendly_name()
        for t in n.proto.input:
            p = producer.get(t)
            if p is not None and affinities[p] == affinities[me]:
                uf.union(p, me)
            if t in model_inputs:
                uf.union(first_reader.setdefault((t, affinities[me]), me), me)
    groups: dict[str, set[str]] = {}
    for name in names:
        groups.setdefault(uf.find(name), set()).add(name)
    edges: dict[str, set[str]] = {}
    for n in active:
        me = uf.find(n.get_friendly_name())
        for t in n.proto.input:
            if t in producer and uf.find(producer[t]) != me:
                edges.setdefault(uf.find(producer[t]), set()).add(me)
    return [frozenset(g) for g in groups.values()], _is_acyclic(list(groups), edges)


def check_friendly_names(model) -> None:
    ops = model.get_ops()
    names = [n.get_friendly_name() for n in ops]
    assert all(names), names
    assert len(set(names)) == len(names), f"duplicate friendly names: {names}"
    counts = Counter(n.proto.name for n in ops)
    for n in ops:
        if n.proto.name and counts[n.proto.name] == 1:
            assert n.get_friendly_name() == n.proto.name
        assert model.node(n.get_friendly_name()) is n


def check_plan(model, plan, affinities: Mapping[str, str]) -> None:
    """Every structural promise of a partition plan, checked against an independent analysis."""
    from hetero_cli.placement.partition import CONSTANT, INPUT

    check_friendly_names(model)
    graph = model.proto.graph
    initializers = {t.name for t in graph.initializer}
    model_inputs = set(model.input_names)
    consts = constant_nodes(model)
    ops = {n.get_friendly_name(): n for n in model.get_ops()}
    active = [name for name in ops if name not in consts]
    constant_tensors = set(initializers) | {o for c in consts for o in ops[c].proto.output}
    node_of = {o: name for name, n in ops.items() for o in n.proto.output if o}

    # every non-constant node in exactly one subgraph or folded; constants only ever copied
    owned = Counter(name for s in plan.subgraphs for name in s.nodes)
    assert owned + Counter(plan.folded) == Counter(active), (
        f"owned {sorted(owned)} + folded {list(plan.folded)} != non-constant {sorted(active)}"
    )
    assert not any(s.device is None for s in plan.subgraphs)
    _check_folded(model, plan, ops, node_of)

    readers_outside: dict[str, set[int]] = {}
    owner = {name: s.index for s in plan.subgraphs for name in s.nodes}
    held = {t for s in plan.subgraphs for t in s.fixed}  # static shape values: never handed on
    for name in owner:
        for t in ops[name].proto.input:
            if t in node_of and node_of[t] in owner and owner[node_of[t]] != owner[name]:
                readers_outside.setdefault(t, set()).add(owner[name])

    available = set(model_inputs)
    for position, s in enumerate(plan.subgraphs):
        assert s.index == position
        assert s.nodes, f"{s.name} has no nodes"
        assert s.outputs, f"{s.name} hands nothing on: no session can run it"
        for name in s.nodes:
            assert affinities[name] == s.device, f"{name} ({affinities[name]}) in {s.name} on {s.device}"
        assert set(s.constant_nodes) <= consts, (
            f"{s.name} copies non-constant {set(s.constant_nodes) - consts}"
        )
        assert len(set(s.inputs)) == len(s.inputs) and len(set(s.outputs)) == len(s.outputs)
        inside = [*s.constant_nodes, *s.nodes]
        produced = {o for name in inside for o in ops[name].proto.output if o}
        for name in inside:
            for t in ops[name].proto.input:
                if t:
                    assert t in produced or t in initializers or t in s.inputs or t in s.fixed, (
                        f"{s.name}: {name} reads {t!r}, which is neither produced inside, an initializer, "
                        f"nor a subgraph input"
                    )
        for t in s.inputs:
            assert t not in constant_tensors, f"{s.name} takes constant {t!r} across a boundary"
            assert t in available, f"{s.name} reads {t!r} before any earlier subgraph produced it"
        for t in s.outputs:
            assert node_of.get(t) in s.nodes, f"{s.name} outputs {t!r}, which it does not compute"
        own_produced = {o for name in s.nodes for o in ops[name].proto.output if o}
        for t in own_produced:
            if (t in readers_outside and t not in held) or t in model.output_names:
                assert t in s.outputs, f"{s.name} does not output {t!r}, which others need"
        # one connected piece: edges inside, or a shared model input
        uf = _UF(s.nodes)
        first: dict[str, str] = {}
        for name in s.nodes:
            for t in ops[name].proto.input:
                if node_of.get(t) in uf.parent:
                    uf.union(node_of[t], name)
                if t in model_inputs:
                    uf.union(first.setdefault(t, name), name)
        single_device = len({affinities[a] for a in active}) == 1
        if not single_device:
            roots = {uf.find(name) for name in s.nodes}
            assert len(roots) == 1, f"{s.name} is not connected: {s.nodes}"
        available.update(s.outputs)

    for link in plan.links():
        if link.producer is not None:
            assert all(c > link.producer for c in link.consumers)

    # every model output has a source
    assert set(plan.output_sources) == set(model.output_names)
    for name, source in plan.output_sources.items():
        if isinstance(source, int):
            assert name in plan.subgraphs[source].outputs
        elif source == INPUT:
            assert name in model_inputs
        else:
            assert source == CONSTANT and name in constant_tensors, (name, source)

    # the split is exactly the connected same-affinity groups (of the nodes that run) where those form an
    # acyclic graph
    running = [name for name in active if name not in set(plan.folded)]
    if not running:
        assert not plan.subgraphs
    elif len({affinities[a] for a in running}) == 1:
        assert len(plan.subgraphs) == 1, "one device must give one subgraph"
    else:
        groups, acyclic = expected_components(model, affinities, plan.folded)
        got = {frozenset(s.nodes) for s in plan.subgraphs}
        if acyclic:
            assert got == set(groups), "over- or under-split: the same-affinity groups were acyclic"
        else:
            assert len(got) > len(groups)
            for piece in got:
                assert any(piece <= g for g in groups), f"{sorted(piece)} mixes same-affinity groups"


def _check_folded(model, plan, ops: Mapping, node_of: Mapping[str, str]) -> None:
    """Folded nodes only feed static shape values the subgraphs hold; every tensor a subgraph hands on
    is a model output, read by a later subgraph, or read by no node at all (a dead end of the model)."""
    folded = set(plan.folded)
    values = model.shape_values()
    readers: dict[str, set[str]] = {}
    for name, n in ops.items():
        for t in n.proto.input:
            readers.setdefault(t, set()).add(name)
    outputs = set(model.output_names)
    for name in folded:
        for t in ops[name].proto.output:
            assert t not in outputs, f"folded {name} makes model output {t!r}"
            outside = {r for r in readers.get(t, ()) if r not in folded}
            assert not outside or t in values, f"folded {name} makes {t!r}, which {sorted(outside)} need"
    read_later = {t for s in plan.subgraphs for t in s.inputs}
    for s in plan.subgraphs:
        for t in s.outputs:
            assert t not in values or t in outputs or not readers.get(t), (
                f"{s.name} hands on static shape value {t!r}"
            )
            assert t in outputs or t in read_later or not readers.get(t), (
                f"{s.name} hands {t!r} on to no subgraph (only folded nodes read it)"
            )


def assert_close(
    got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], *, rtol: float = 5e-4, atol: float = 1e-6
) -> None:
    """Same output names in order, each within ``rtol`` and an absolute slack of ``atol`` times its scale
    (its largest magnitude, at least 1)."""
    assert list(got) == list(ref)
    for name, want in ref.items():
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got[name], want, rtol=rtol, atol=atol * max(1.0, scale), err_msg=name)


def split_and_run(
    proto, feeds, ref, device: str, affinity_of, *, rtol: float = 5e-4, atol: float = 1e-6, config=None
):
    """Set every node's affinity with ``affinity_of(index among non-constant nodes, node)``, compile for
    ``device`` (with ``config``), run, compare with ``ref``, and check the plan and every exported subgraph."""
    import hetero_cli
    from hetero_cli.placement.export import subgraph_model

    core = hetero_cli.Core()
    model = core.read_model(proto)
    consts = constant_nodes(model)
    active = 0
    affinities = {}
    for node in model.get_ops():
        affinity = affinity_of(active, node)
        if node.get_friendly_name() not in consts:
            active += 1
        node.get_rt_info()["affinity"] = affinity
        affinities[node.get_friendly_name()] = affinity
    compiled = core.compile_model(model, device, config)
    check_plan(model, compiled.plan, affinities)
    for sub in compiled.plan.subgraphs:
        onnx.checker.check_model(subgraph_model(model, sub))
    assert_close(compiled.create_infer_request().infer(feeds), ref, rtol=rtol, atol=atol)
    return compiled
