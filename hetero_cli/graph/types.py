"""The types of a model's tensors: as the model declares them, as onnx's shape inference gives them (with
and without the model's value_info, and at one size of every dynamic input dimension), and as corrected
where ONNX Runtime showed a declared type wrong. Also how a shape prints and whether a model holds 16-bit
floats. Pure onnx: ONNX Runtime's own inference is hetero_cli.ort.types.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from .index import node_outer_refs

log = logging.getLogger("hetero_cli")

#: what onnx's shape inference raises for a model it cannot infer (its own error classes, and RuntimeError
#: for a C++ exception its bindings pass on): the model's declared types then stand alone
INFERENCE_ERRORS: tuple[type[Exception], ...] = (
    onnx.shape_inference.InferenceError,
    onnx.checker.ValidationError,
    onnx.defs.SchemaError,
    RuntimeError,
)

# the size types_at_one_size gives every dynamic input dimension
SAMPLE_SIZE = 32


class TypeTable:
    """{tensor: onnx.TypeProto} of one model, from four tables: the types it declares, onnx's inference
    with its value_info (only computed when a tensor's declared type lacks an element type or shape),
    onnx's inference without its value_info (whole, and at one size), and the corrections.

    ``graph``: the model's graph as held (weights may be left out: only types are read); ``control_flow``:
    its If/Loop/Scan nodes, whose outputs get the rank their bodies declare where onnx infers none;
    ``weightless_copy``: a fresh copy of the model without its large weights (large initializers and
    Constant nodes made inputs of their type and shape), for onnx's inference.

    Corrections, the contract: a correction is a fact learned about the model's own value_info. The
    compiler writes one (``correct_type``) when ONNX Runtime shows a declared type wrong: a session refused
    the declared shape at a subgraph boundary, or a run gave another shape (relax); it takes it back
    (``correct_type(name, None)`` or the type it had) only when compiling with it failed too.
    ``value_type`` reads a correction before anything else, so everything typed from then on (the
    boundaries of exported subgraphs, tensor_info) goes by it. Corrections belong to a compile, never to
    the user's Model: a compile corrects its own copy (``Model.typed_copy``), and each revision of a
    compiled model that corrects more has a copy of its own.
    """

    def __init__(
        self,
        graph: onnx.GraphProto,
        control_flow: Sequence[onnx.NodeProto],
        weightless_copy: Callable[[], onnx.ModelProto],
    ):
        self._graph = graph
        self._control_flow = tuple(control_flow)
        self._weightless_copy = weightless_copy
        self._declared: dict[str, onnx.TypeProto] | None = None
        self._inferred: dict[str, onnx.TypeProto] | None = None
        self._corrected: dict[str, onnx.TypeProto] = {}
        self._at_shapes: tuple[tuple, dict[str, onnx.TypeProto]] | None = None  # (shapes, types)

    def copy(self) -> TypeTable:
        """A table of the same graph with corrections of its own (a copy of these): what is inferred is
        shared, being the graph's alone."""
        table = object.__new__(TypeTable)
        table.__dict__.update(self.__dict__)  # the inferred tables, cached properties included
        table._corrected = dict(self._corrected)
        return table

    def value_type(self, name: str) -> onnx.TypeProto | None:
        """The tensor's type (element type and, where known, shape): its correction, else as the model
        declares it where that is complete, else with onnx's shape inference; None if unknown."""
        corrected = self._corrected.get(name)
        if corrected is not None:
            return corrected
        if self._inferred is None:
            if self._declared is None:
                self._declared = self._collect(inferred=False)
            declared = self._declared.get(name)
            if declared is not None and _has_elem(declared) and _has_shape(declared):
                return declared  # onnx's shape inference (and its memory) is paid only where needed
            self._inferred = self._collect(inferred=True)
        return self._inferred.get(name)

    def correct_type(self, name: str, value_type: onnx.TypeProto | None) -> None:
        """Use ``value_type`` for tensor ``name`` from now on, in this compile and the next ones of the
        model: where ONNX Runtime found that the model's value_info contradicts what the tensor really is
        (ORT itself goes by what it infers). None takes a correction back."""
        if value_type is None:
            self._corrected.pop(name, None)
        else:
            self._corrected[name] = value_type

    def correction(self, name: str) -> onnx.TypeProto | None:
        """The type correct_type gave ``name``, or None."""
        return self._corrected.get(name)

    @functools.cached_property
    def without_value_info(self) -> dict[str, onnx.TypeProto]:
        """What onnx's shape inference gives each tensor from the graph's inputs and weights alone, the
        model's value_info (and the shapes its outputs declare) left out: where that value_info is wrong,
        what it wrongly led inference to (a consumer's output) shows here as it is. Empty where inference
        fails. Computed once: the corrections made from it leave the model's graph as it is."""
        return self._inferred_alone(None)

    @functools.cached_property
    def at_one_size(self) -> dict[str, onnx.TypeProto]:
        """What onnx's shape inference (with data propagation) gives each tensor, the model's value_info
        left out, once every dynamic dimension of the inputs is set to one size (SAMPLE_SIZE): a fixed
        dimension the value_info declares and this contradicts is one a run can contradict too. Empty
        where inference fails."""
        return self._inferred_alone(SAMPLE_SIZE)

    @functools.cached_property
    def declares_fixed_dims(self) -> bool:
        """Whether the model's own value_info or graph outputs give some tensor a fixed dimension (a quick
        test before at_one_size: without one, no declared shape can be contradicted)."""
        for vi in (*self._graph.output, *self._graph.value_info):
            if not vi.type.HasField("tensor_type"):
                continue
            if any(d.HasField("dim_value") and d.dim_value >= 0 for d in vi.type.tensor_type.shape.dim):
                return True
        return False

    def at_shapes(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, onnx.TypeProto]:
        """What onnx's shape inference (with data propagation) gives each tensor, the model's value_info
        left out, once the inputs named in ``shapes`` have those concrete shapes (the data a run feeds).
        Empty where inference fails. The last answer is kept for the same shapes."""
        key = tuple(sorted((name, tuple(int(d) for d in dims)) for name, dims in shapes.items()))
        if self._at_shapes is None or self._at_shapes[0] != key:
            self._at_shapes = (key, self._inferred_alone(None, dict(key)))
        return self._at_shapes[1]

    def _inferred_alone(
        self, size: int | None, shapes: Mapping[str, Sequence[int]] | None = None
    ) -> dict[str, onnx.TypeProto]:
        """{tensor: type} from onnx's shape inference without the model's value_info and the shapes its
        outputs declare (the outputs' types are inferred too); with ``size``, every dynamic input dimension
        set to it first; with ``shapes``, the inputs it names given those shapes (data propagated in both
        cases)."""
        copy = self._copy_at(size, shapes)
        try:
            result = onnx.shape_inference.infer_shapes(
                copy, check_type=False, strict_mode=False, data_prop=size is not None or shapes is not None
            )
        except INFERENCE_ERRORS as exc:  # onnx cannot infer this model: its declared types stand alone
            log.debug("onnx's shape inference failed on %s (%s): no inferred types", self._graph.name, exc)
            return {}
        # the weightless copy holds large Constant nodes as inputs of their type and shape
        constants = {n.output[0] for n in self._graph.node if n.op_type == "Constant" and n.output}
        moved = [vi for vi in result.graph.input if vi.name in constants]
        return {vi.name: vi.type for vi in (*moved, *result.graph.value_info, *result.graph.output)}

    def conflicts_at(self, shapes: Mapping[str, Sequence[int]]) -> bool:
        """Whether onnx's strict shape inference (data propagated), the inputs named in ``shapes`` at those
        concrete shapes and the model's value_info left out, fails: some node cannot take what they make
        (a Mul of [2,3,8] by [2,4,1]), or onnx cannot infer the model at all (compare with shapes known to
        agree to tell the two apart)."""
        try:
            onnx.shape_inference.infer_shapes(
                self._copy_at(None, shapes), check_type=False, strict_mode=True, data_prop=True
            )
        except INFERENCE_ERRORS:  # the answer asked for, not an error: what onnx said is not needed
            return True
        return False

    def _copy_at(self, size: int | None, shapes: Mapping[str, Sequence[int]] | None) -> onnx.ModelProto:
        """The weightless copy for onnx's inference, without the model's value_info and the shapes its
        outputs declare; with ``size``, every dynamic input dimension set to it; with ``shapes``, the
        inputs it names given those shapes."""
        copy = _negative_dims_unknown(self._weightless_copy())
        del copy.graph.value_info[:]
        for vi in copy.graph.output:
            if vi.type.HasField("tensor_type"):
                vi.type.tensor_type.ClearField("shape")
        for vi in copy.graph.input:
            if not vi.type.HasField("tensor_type"):
                continue
            if shapes is not None and vi.name in shapes:
                vi.type.tensor_type.shape.Clear()
                for d in shapes[vi.name]:
                    vi.type.tensor_type.shape.dim.add().dim_value = int(d)
            for d in vi.type.tensor_type.shape.dim if size is not None else ():
                if not d.HasField("dim_value"):
                    d.dim_value = size
        return copy

    def _inference_ignores_declarations(self) -> bool:
        """Whether onnx's inference with the model's declarations gives every tensor the type it gives
        without them (without_value_info), but for the graph's outputs, whose declared types _collect
        takes first: no value_info, every output declares its element type, and no node (nor a body of
        one) reads an output, so the shapes outputs declare reach no other tensor's inference."""
        graph = self._graph
        if graph.value_info or not all(_has_elem(vi.type) for vi in graph.output):
            return False
        outputs = {vi.name for vi in graph.output}
        read = (t for node in graph.node for t in node.input)
        bodies = (t for node in self._control_flow for t in node_outer_refs(node))
        return not any(t in outputs for t in (*read, *bodies))

    def _collect(self, *, inferred: bool) -> dict[str, onnx.TypeProto]:
        """Types the model declares, and with ``inferred`` what onnx's shape inference adds to them."""
        graph = self._graph
        types: dict[str, onnx.TypeProto] = {}
        infos: Iterable[tuple[str, onnx.TypeProto]] = []
        if inferred and self._inference_ignores_declarations():
            infos = self.without_value_info.items()  # the same inference: computed once for both
        elif inferred:
            try:
                # onnx copies the model it infers: a weightless copy keeps that from doubling the weights
                result = onnx.shape_inference.infer_shapes(
                    _negative_dims_unknown(self._weightless_copy()), check_type=False, strict_mode=False
                )
                found = (*result.graph.value_info, *result.graph.input, *result.graph.output)
                infos = [(vi.name, vi.type) for vi in found]
            except INFERENCE_ERRORS as exc:  # onnx cannot infer this model: its declared types stand alone
                log.debug(
                    "onnx's shape inference failed on %s (%s): declared types only", self._graph.name, exc
                )
                infos = []
        declared = ((vi.name, vi.type) for vi in (*graph.input, *graph.output, *graph.value_info))
        for name, value_type in (*declared, *infos):
            known = types.get(name)
            if value_type.WhichOneof("value") and (
                known is None or (_has_elem(value_type) and not _has_elem(known))
            ):
                types[name] = value_type
        for t in graph.initializer:
            types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
        for node in self._control_flow:
            _fill_control_flow_ranks(node, types)
        return types


def has_half_floats(proto: onnx.ModelProto) -> bool:
    """Whether float16 or bfloat16 tensors appear where they show without shape inference (inputs,
    outputs, value_info, initializers, type attributes such as Cast's ``to``, tensor attributes, in
    nested graphs and functions too). ORT runs a node the CPU EP has no 16-bit kernel for through
    Casts it inserts, and leaves that node out of its record of placements."""
    half = {onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    type_attributes = ("to", "dtype", "output_dtype")  # Cast, EyeLike/Random*, QuantizeLinear...

    def in_graph(graph: onnx.GraphProto) -> bool:
        infos = (*graph.input, *graph.output, *graph.value_info)
        if any(i.type.tensor_type.elem_type in half for i in infos):
            return True
        tensors = (*graph.initializer, *(t.values for t in graph.sparse_initializer))
        return any(t.data_type in half for t in tensors) or any(in_nodes(graph.node))

    def in_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[bool]:
        for node in nodes:
            for attr in node.attribute:
                yield (attr.name in type_attributes and attr.i in half) or (
                    attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type in half
                )
                yield any(in_graph(g) for g in (attr.g, *attr.graphs) if g.ByteSize())

    return in_graph(proto.graph) or any(any(in_nodes(f.node)) for f in proto.functions)


def type_shape(t: onnx.TypeProto | None) -> tuple[int | str | None, ...] | None:
    """A tensor type's shape as TensorInfo holds it: ints, dimension names, None where unknown; None without rank."""
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim
    )


def shape_text(shape: Sequence[int | str | None] | None) -> str:
    """A shape as messages print it, like OpenVINO's PartialShape: [1,3,224,224], [batch,3,?,?], [...] (rank unknown)."""
    if shape is None:
        return "[...]"
    return "[" + ",".join(_dim_text(d) for d in shape) + "]"


def _dim_text(dim: int | str | None) -> str:
    if isinstance(dim, str) and dim:
        return dim
    if isinstance(dim, (int, np.integer)) and dim >= 0:
        return str(int(dim))
    return "?"


def _fill_control_flow_ranks(node: onnx.NodeProto, types: dict[str, onnx.TypeProto]) -> None:
    """Give If/Loop/Scan outputs whose rank onnx could not infer the rank their body declares (for an If,
    both branches, where they agree: a rank one branch alone gives would refuse the other's tensors).

    A subgraph boundary needs a rank (onnx.checker, and EPs that cannot compile dynamic ranks); the
    dimensions stay symbolic.
    """
    attrs = {a.name: a for a in node.attribute}
    bodies: list[onnx.GraphProto] = []
    offset, carried = 0, len(node.output)
    if node.op_type == "If" and "then_branch" in attrs and "else_branch" in attrs:
        bodies = [attrs["then_branch"].g, attrs["else_branch"].g]
    elif node.op_type == "Loop" and "body" in attrs:
        bodies, offset, carried = [attrs["body"].g], 1, len(node.input) - 2
    elif node.op_type == "Scan" and "body" in attrs:
        scans = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
        bodies, carried = [attrs["body"].g], len(node.input) - scans
    for k, name in enumerate(node.output):
        known = types.get(name)
        if not bodies or not name or (known is not None and known.tensor_type.HasField("shape")):
            continue
        declared = [_declared_tensor(body, k + offset) for body in bodies]
        ranks = {len(d.shape.dim) if d is not None else None for d in declared}
        if len(ranks) != 1 or None in ranks:
            continue
        rank = ranks.pop() + (0 if k < carried else 1)
        elem = known.tensor_type.elem_type if known is not None else declared[0].elem_type
        types[name] = helper.make_tensor_type_proto(elem, [f"{name}_dim{i}" for i in range(rank)])


def _declared_tensor(body: onnx.GraphProto, k: int) -> onnx.TypeProto.Tensor | None:
    """The tensor type with a shape that ``body`` declares for its output ``k``, else None."""
    if k >= len(body.output):
        return None
    declared = body.output[k].type
    if not declared.HasField("tensor_type") or not declared.tensor_type.HasField("shape"):
        return None
    return declared.tensor_type


def _negative_dims_unknown(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` (a copy) with each negative dim_value of its inputs, outputs and value_info made unknown:
    paddle2onnx writes -1 for a dynamic dimension, which onnx's shape inference computes with, giving
    sizes of 0 downstream (a Reshape then refuses its target shape)."""
    graph = proto.graph
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if vi.type.HasField("tensor_type"):
            for d in vi.type.tensor_type.shape.dim:
                if d.HasField("dim_value") and d.dim_value < 0:
                    d.Clear()
    return proto


def _has_shape(t: onnx.TypeProto) -> bool:
    return t.WhichOneof("value") != "tensor_type" or t.tensor_type.HasField("shape")


def _has_elem(t: onnx.TypeProto) -> bool:
    return t.HasField("tensor_type") and bool(t.tensor_type.elem_type)
