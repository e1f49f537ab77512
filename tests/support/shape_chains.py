"""Models whose data path reads a static shape value: the issue-29 model (``zero_out_model``) and a
hypothesis strategy of such chains (``shape_chains``), with the cuts to try on them (``cuts``).

A shape chain is x -> data ops -> t, then Shape of a fixed-shape tensor made from t (or of t itself where
x's shape is fixed), integer arithmetic on that shape, a Cast to float, and Mul(t, that) -> y: every
value of the chain from Shape on is a static shape value, and the nodes before it that only feed it
(ReduceSum -> Unsqueeze -> Concat) feed nothing a run needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto
from onnx import helper as h

from .helpers import const, make_model, vi


def zero_out_model() -> onnx.ModelProto:
    """Issue 29's model: y = x * len(Concat(u, u, u, u)) with u = Unsqueeze(ReduceSum(x)), x [n, 3].

    Nodes sum, unsq, concat, shape, gather, cast, mul; with concat and shape on a device of their own
    that subgraph makes nothing but ``c`` (read by shape alone) and the static shape value ``shp``."""
    nodes = [
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        h.make_node("Unsqueeze", ["s", "ax"], ["u"], name="unsq"),
        h.make_node("Concat", ["u", "u", "u", "u"], ["c"], name="concat", axis=0),
        h.make_node("Shape", ["c"], ["shp"], name="shape"),
        h.make_node("Gather", ["shp", "zero"], ["g"], name="gather", axis=0),
        h.make_node("Cast", ["g"], ["gf"], name="cast", to=TensorProto.FLOAT),
        h.make_node("Mul", ["x", "gf"], ["y"], name="mul"),
    ]
    inits = [const("ax", [0], np.int64), const("zero", 0, np.int64)]
    return make_model(nodes, [vi("x", ["n", 3])], [vi("y", ["n", 3])], inits, name="zero_out", ir_version=8)


@dataclass(repr=False)
class Chain:
    """One generated shape chain: the model, its feeds and its nodes' names in model order."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    names: list[str]

    def __repr__(self) -> str:
        """The graph one node a line, so that a failing example can be rebuilt from the report."""
        g = self.model.graph
        dims = [d.dim_param or d.dim_value for d in g.input[0].type.tensor_type.shape.dim]
        lines = [f"Chain(input x {dims}, feeds {self.feeds['x'].shape}:"]
        lines += [f"  {n.name}: {n.op_type}({', '.join(n.input)}) -> {', '.join(n.output)}" for n in g.node]
        lines.append(f"  outputs: {', '.join(o.name for o in g.output)})")
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # what hypothesis prints for a failing example
        printer.text(repr(self))


DATA_OPS = ("Relu", "Neg", "Abs", "Sigmoid")
#: the integer steps on the shape value: (op, constant operand or None); Cast32 is a Cast to int32 and back
ARITHMETIC = (
    ("Add", "two"),
    ("Mul", "three"),
    ("Max", "one"),
    ("Identity", None),
    ("Neg", None),
    ("Cast32", None),
)


@st.composite
def shape_chains(draw) -> Chain:
    """A random shape chain (module docstring): 0-2 data ops, x's rows fixed or dynamic (then the shape is
    taken of Concat(Unsqueeze(ReduceSum(t))) copies, of fixed length), a Gather from the shape, 0-3
    integer steps (some through int32 and back), Cast, Mul; sometimes t or the Concat an output too."""
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    dynamic = draw(st.booleans())
    nodes: list[onnx.NodeProto] = []

    def node(op: str, inputs: list[str], **attrs) -> str:
        out = f"t{len(nodes)}"
        nodes.append(h.make_node(op, inputs, [out], name=f"{op.lower()}{len(nodes)}", **attrs))
        return out

    data = "x"
    for op in draw(st.lists(st.sampled_from(DATA_OPS), max_size=2)):
        data = node(op, [data])
    measured = data
    if dynamic or draw(st.booleans()):  # a tensor of fixed shape made from the data (the model)
        total = node("ReduceSum", [data], keepdims=0)
        one = node("Unsqueeze", [total, "axis0"])
        measured = node("Concat", [one] * draw(st.integers(1, 4)), axis=0)
    shape = node("Shape", [measured])
    value = node("Gather", [shape, draw(st.sampled_from(["first", "last"]))], axis=0)
    for op, operand in draw(st.lists(st.sampled_from(ARITHMETIC), max_size=3)):
        if op == "Cast32":
            value = node("Cast", [node("Cast", [value], to=TensorProto.INT32)], to=TensorProto.INT64)
        else:
            value = node(op, [value] if operand is None else [value, operand])
    scale = node("Cast", [value], to=TensorProto.FLOAT)
    y = node("Mul", [data, scale])
    outputs = [vi(y, ["n" if dynamic else rows, cols])]
    extra = draw(st.sampled_from(["none", "none", "data", "measured"]))
    if extra == "data" and data != "x":
        outputs.append(vi(data, None))
    elif extra == "measured" and measured != data:
        outputs.append(vi(measured, None))
    inits = [
        const("axis0", [0], np.int64),
        const("first", 0, np.int64),
        const("last", -1, np.int64),
        const("one", 1, np.int64),
        const("two", 2, np.int64),
        const("three", 3, np.int64),
    ]
    model = make_model(nodes, [vi("x", ["n" if dynamic else rows, cols])], outputs, inits, name="chain")
    feeds = {"x": np.random.default_rng(rows * 10 + cols).standard_normal((rows, cols)).astype(np.float32)}
    return Chain(model, feeds, [n.name for n in nodes])


def cuts(count: int) -> Iterator[list[str]]:
    """Every way to cut a chain of ``count`` nodes once (A... then B...) or twice (A... B... A...): the
    nodes' devices, in model order."""
    for k in range(1, count):
        yield ["A"] * k + ["B"] * (count - k)
    for i in range(1, count):
        for j in range(i + 1, count):
            yield ["A"] * i + ["B"] * (j - i) + ["A"] * (count - j)
