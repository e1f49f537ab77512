"""Model wrapper: an ONNX model seen the way OpenVINO's API sees one (ops, friendly names, rt_info).

model = hetero_cli.Core().read_model("model.onnx")
for node in model.get_ops():
    node.get_rt_info()["affinity"] = "CPU"
model.save("with_affinities.onnx")   # affinities kept in NodeProto.metadata_props
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .errors import ModelError

AFFINITY = "affinity"
NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: name, numpy dtype (None if unknown) and shape (ints, names or None)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int | str | None, ...] | None

    def get_any_name(self) -> str:
        """The tensor's name (OpenVINO's port API)."""
        return self.name


class Node:
    """One top-level ONNX node with its friendly name and a mutable rt_info mapping (key "affinity")."""

    def __init__(self, index: int, proto: onnx.NodeProto, friendly_name: str, implicit_inputs: list[str]):
        self.index = index
        self.proto = proto
        self.friendly_name = friendly_name
        self.outputs: tuple[str, ...] = tuple(o for o in proto.output if o)
        direct = [i for i in proto.input if i]
        self.inputs: tuple[str, ...] = tuple(dict.fromkeys(direct + implicit_inputs))
        self.implicit_inputs: tuple[str, ...] = tuple(implicit_inputs)
        self.is_constant = False
        self._rt_info: dict[str, Any] = {}
        for prop in proto.metadata_props:
            if prop.key == AFFINITY and prop.value:
                self._rt_info[AFFINITY] = prop.value

    def get_friendly_name(self) -> str:
        """The node's name when non-empty and unique in the graph, else one derived from its first output."""
        return self.friendly_name

    def get_type_name(self) -> str:
        """The op type, qualified with its domain when that is not the default ONNX one."""
        domain = self.proto.domain
        return self.proto.op_type if domain in ("", "ai.onnx") else f"{domain}.{self.proto.op_type}"

    def get_rt_info(self) -> dict[str, Any]:
        """Runtime info; set ``["affinity"] = "CPU"`` to pin the node to a device (manual mode)."""
        return self._rt_info

    @property
    def affinity(self) -> str | None:
        """The affinity set on this node, as a string, or None."""
        value = self._rt_info.get(AFFINITY)
        return None if value is None or str(value) == "" else str(value)

    @property
    def has_subgraphs(self) -> bool:
        """True for If, Loop, Scan and other nodes with graph attributes."""
        return any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in self.proto.attribute
        )

    def __repr__(self) -> str:
        return f"<Node {self.friendly_name!r} {self.get_type_name()}>"


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
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for g in graphs:
            refs.update(dict.fromkeys(graph_outer_refs(g)))
    return list(refs)


def _friendly_names(nodes: list[onnx.NodeProto]) -> list[str]:
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


class Model:
    """An ONNX model with ops in topological order, friendly names, rt_info and inferred tensor types."""

    def __init__(self, proto: onnx.ModelProto, path: str | os.PathLike[str] | None = None):
        self.proto = proto
        self.path = Path(path) if path is not None else None
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
        self._ops = self._sorted_ops()
        self._by_name = {n.friendly_name: n for n in self._ops}
        self.constant_tensors = self._mark_constants()
        self.producer = {out: n for n in self._ops for out in n.outputs}
        self._types: dict[str, onnx.TypeProto] | None = None
        self.query_cache: dict[Any, frozenset[str]] = {}

    # --- OpenVINO-shaped API -------------------------------------------------------------------------

    def get_ops(self) -> list[Node]:
        """Top-level nodes in topological order."""
        return list(self._ops)

    def get_friendly_name(self) -> str:
        """The model's name: the ONNX graph's name, else the file's stem."""
        return self.name

    @property
    def name(self) -> str:
        """The ONNX graph's name, falling back to the file's stem, then "model"."""
        if self.proto.graph.name:
            return self.proto.graph.name
        return self.path.stem if self.path is not None else "model"

    @property
    def inputs(self) -> list[TensorInfo]:
        """Graph inputs a caller feeds (initializers listed as inputs are left out: they have defaults)."""
        return [self.tensor_info(n) for n in self.input_names]

    @property
    def outputs(self) -> list[TensorInfo]:
        """Graph outputs."""
        return [self.tensor_info(n) for n in self.output_names]

    def node(self, friendly_name: str) -> Node:
        """The node with this friendly name; KeyError if none."""
        return self._by_name[friendly_name]

    def has_node(self, friendly_name: str) -> bool:
        """Whether a node has this friendly name."""
        return friendly_name in self._by_name

    def __iter__(self) -> Iterator[Node]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def affinities(self) -> dict[str, str]:
        """{friendly name: affinity} for nodes whose rt_info has one."""
        return {n.friendly_name: n.affinity for n in self._ops if n.affinity is not None}

    def set_affinities(self, affinities: dict[str, str]) -> None:
        """Set rt_info["affinity"] from a {friendly name: device} map (unknown names are refused)."""
        from .errors import AffinityError

        unknown = [name for name in affinities if name not in self._by_name]
        if unknown:
            raise AffinityError(
                f"affinity names unknown node(s) {', '.join(map(repr, unknown[:10]))}"
                f"{' and more' if len(unknown) > 10 else ''}: use friendly names from model.get_ops() "
                f"(e.g. {', '.join(n.friendly_name for n in self._ops[:3])})"
            )
        for name, device in affinities.items():
            self._by_name[name].get_rt_info()[AFFINITY] = device

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model, keeping each node's affinity in NodeProto.metadata_props (key "affinity")."""
        for node in self._ops:
            props = node.proto.metadata_props
            kept = [(p.key, p.value) for p in props if p.key != AFFINITY]
            del props[:]
            for key, value in kept:
                props.add(key=key, value=value)
            if node.affinity is not None:
                props.add(key=AFFINITY, value=node.affinity)
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        try:
            onnx.save(self.proto, str(tmp))
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ModelError(f"cannot write {path}: {exc.strerror or exc}") from None

    # --- tensors and types ---------------------------------------------------------------------------

    def is_constant(self, tensor: str) -> bool:
        """True for initializers and values computable from constants alone."""
        return tensor in self.constant_tensors

    def consumers(self) -> dict[str, list[Node]]:
        """{tensor name: nodes reading it (directly or inside a body)}."""
        out: dict[str, list[Node]] = {}
        for node in self._ops:
            for name in node.inputs:
                out.setdefault(name, []).append(node)
        return out

    def value_type(self, name: str) -> onnx.TypeProto | None:
        """The tensor's type (element type and, where known, shape), from the model or shape inference."""
        if self._types is None:
            self._types = self._infer_types()
        return self._types.get(name)

    def tensor_info(self, name: str) -> TensorInfo:
        """Name, dtype and shape of a tensor, as far as they are known."""
        t = self.value_type(name)
        if t is None or not t.HasField("tensor_type"):
            return TensorInfo(name, None, None)
        tt = t.tensor_type
        dtype = None
        if tt.elem_type:
            try:
                dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
            except (KeyError, TypeError):
                dtype = None
        shape = None
        if tt.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim
            )
        return TensorInfo(name, dtype, shape)

    # --- construction helpers ------------------------------------------------------------------------

    def _sorted_ops(self) -> list[Node]:
        protos = list(self.proto.graph.node)
        implicit = [node_outer_refs(n) for n in protos]
        names = _friendly_names(protos)
        producer = {out: i for i, n in enumerate(protos) for out in n.output if out}
        deps = [
            sorted({producer[t] for t in [*n.input, *imp] if t in producer and producer[t] != i})
            for i, (n, imp) in enumerate(zip(protos, implicit, strict=True))
        ]
        order = _topological(deps)
        if order is None:
            raise ModelError("the model's graph has a cycle: it is not a valid ONNX model")
        return [Node(pos, protos[i], names[i], implicit[i]) for pos, i in enumerate(order)]

    def _mark_constants(self) -> frozenset[str]:
        constant = set(self.initializer_names)
        for node in self._ops:
            p = node.proto
            if p.domain not in ("", "ai.onnx") or p.op_type in NONDETERMINISTIC or node.has_subgraphs:
                continue
            if p.op_type == "Constant" or (node.inputs and all(i in constant for i in node.inputs)):
                node.is_constant = True
                constant.update(node.outputs)
        return frozenset(constant)

    def _infer_types(self) -> dict[str, onnx.TypeProto]:
        graph = self.proto.graph
        types: dict[str, onnx.TypeProto] = {}
        try:
            inferred = onnx.shape_inference.infer_shapes(self.proto, check_type=False, strict_mode=False)
            infos: Iterable[onnx.ValueInfoProto] = [
                *inferred.graph.value_info,
                *inferred.graph.input,
                *inferred.graph.output,
            ]
        except Exception:
            infos = []
        for vi in [*graph.input, *graph.output, *graph.value_info, *infos]:
            known = types.get(vi.name)
            if vi.type.WhichOneof("value") and (
                known is None or (_has_elem(vi.type) and not _has_elem(known))
            ):
                types[vi.name] = vi.type
        for t in graph.initializer:
            types[t.name] = helper.make_tensor_type_proto(t.data_type, list(t.dims))
        for node in self._ops:
            if node.has_subgraphs:
                _fill_control_flow_ranks(node.proto, types)
        return types


def _fill_control_flow_ranks(node: onnx.NodeProto, types: dict[str, onnx.TypeProto]) -> None:
    """Give If/Loop/Scan outputs whose rank onnx could not infer the rank their body declares.

    A subgraph boundary needs a rank (onnx.checker, and EPs that cannot compile dynamic ranks); the
    dimensions stay symbolic.
    """
    attrs = {a.name: a for a in node.attribute}
    body: onnx.GraphProto | None = None
    offset, carried = 0, len(node.output)
    if node.op_type == "If" and "then_branch" in attrs:
        body = attrs["then_branch"].g
    elif node.op_type == "Loop" and "body" in attrs:
        body, offset, carried = attrs["body"].g, 1, len(node.input) - 2
    elif node.op_type == "Scan" and "body" in attrs:
        scans = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
        body, carried = attrs["body"].g, len(node.input) - scans
    if body is None:
        return
    for k, name in enumerate(node.output):
        known = types.get(name)
        if not name or (known is not None and known.tensor_type.HasField("shape")):
            continue
        if k + offset >= len(body.output):
            continue
        declared = body.output[k + offset].type
        if not declared.HasField("tensor_type") or not declared.tensor_type.HasField("shape"):
            continue
        rank = len(declared.tensor_type.shape.dim) + (0 if k < carried else 1)
        elem = known.tensor_type.elem_type if known is not None else declared.tensor_type.elem_type
        types[name] = helper.make_tensor_type_proto(elem, [f"{name}_dim{i}" for i in range(rank)])


def _has_elem(t: onnx.TypeProto) -> bool:
    return t.HasField("tensor_type") and bool(t.tensor_type.elem_type)


def _topological(deps: list[list[int]]) -> list[int] | None:
    """Kahn's order that keeps the file's order wherever it is already valid; None on a cycle."""
    import heapq

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


def read_model(source: str | os.PathLike[str] | bytes | onnx.ModelProto) -> Model:
    """Load an ONNX model from a path, serialized bytes or a ModelProto, with one clear error if it cannot."""
    if isinstance(source, onnx.ModelProto):
        return Model(source)
    if isinstance(source, bytes | bytearray):
        try:
            return Model(onnx.load_from_string(bytes(source)))
        except Exception as exc:
            raise ModelError(f"these bytes are not an ONNX model ({_short(exc)})") from None
    path = Path(source)
    if not path.exists():
        raise ModelError(f"model file not found: {path}: check the path")
    if path.is_dir():
        raise ModelError(f"{path} is a directory: give the path of an .onnx file")
    try:
        proto = onnx.load(str(path))
    except PermissionError:
        raise ModelError(f"cannot read {path}: permission denied") from None
    except Exception as exc:
        raise ModelError(
            f"{path} is not a readable ONNX model ({_short(exc)}): is the file truncated or of another format?"
        ) from None
    if not proto.graph.node and not proto.graph.output:
        raise ModelError(f"{path} holds no ONNX graph: is it an ONNX model file?")
    return Model(proto, path)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
