"""Model wrapper: an ONNX model seen the way OpenVINO's API sees one (ops, friendly names, rt_info).

model = hetero_cli.Core().read_model("model.onnx")
for node in model.get_ops():
    node.get_rt_info()["affinity"] = "CPU"
model.save("with_affinities.onnx")   # affinities kept in NodeProto.metadata_props
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..errors import HeteroError, ModelError
from .wire import raw_data_spans, skeleton_bytes

AFFINITY = "affinity"
# Initializers of at most this many elements are shapes, axes, scales: weightless copies keep them.
SMALL_INITIALIZER = 1024
# read_model skips the weights' bytes of files from this size on (smaller ones are parsed whole)
SKELETON_MIN_BYTES = 1 << 20
# attribute types that hold subgraphs (If, Loop, Scan bodies)
_GRAPH, _GRAPHS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS
NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)


def _random(node: onnx.NodeProto) -> bool:
    """Whether a node may give another value each run: a random op, or a Dropout given a training_mode
    input (a mask drawn each run, unless its seed or training_mode=False says otherwise: not looked into)."""
    if node.op_type in NONDETERMINISTIC:
        return True
    return node.op_type == "Dropout" and len(node.input) > 2 and bool(node.input[2])


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
        self.outputs: tuple[str, ...] = tuple(filter(None, proto.output))
        direct = filter(None, proto.input)
        self.inputs: tuple[str, ...] = tuple(
            dict.fromkeys([*direct, *implicit_inputs] if implicit_inputs else direct)
        )
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
        return any(a.type in (_GRAPH, _GRAPHS) for a in self.proto.attribute)

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
        kind = attr.type
        if kind in (_GRAPH, _GRAPHS):
            for g in [attr.g] if kind == _GRAPH else attr.graphs:
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


# the size types_at_one_size gives every dynamic input dimension
SAMPLE_SIZE = 32


class Model:
    """An ONNX model with ops in topological order, friendly names, rt_info and inferred tensor types."""

    def __init__(self, proto: onnx.ModelProto, path: str | os.PathLike[str] | None = None):
        self.path = Path(path).absolute() if path is not None else None
        # Read from a file, the large weights stay there until something needs them in memory (an export
        # of a split, save): sessions of the whole model load the file, probes and shape inference run
        # without weights, so compiling one subgraph never holds a second copy of the weights.
        self._in_file: tuple[int, ...] = ()
        if self.path is not None:
            proto, self._in_file = _weights_left_in_file(proto)
        self._lock = threading.Lock()
        self._proto = proto
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
        self._declared: dict[str, onnx.TypeProto] | None = None
        self._corrected: dict[str, onnx.TypeProto] = {}
        self._arrays: dict[str, np.ndarray] = {}
        self.query_cache: dict[Any, frozenset[str]] = {}
        # where the weights left in the file lie in it: exports and probes point ORT at those bytes
        self._stripped: dict[str, onnx.TensorProto] = {}
        self._spans: dict[str, tuple[int, int]] = {}
        self._stamp: tuple[int, int] | None = None
        if self._in_file and self.path is not None:
            self._stripped = {graph.initializer[i].name: graph.initializer[i] for i in self._in_file}
            spans = raw_data_spans(self.path)
            self._spans = {
                name: span
                for name, span in spans.items()
                if name in self._stripped and span[1] == tensor_nbytes(self._stripped[name])
            }
            stat = self.path.stat()
            self._stamp = (stat.st_size, stat.st_mtime_ns)
        external = any(_is_external(t) for t in all_tensors(proto))
        self._external_data = external  # weights in files of their own beside the model
        # where sessions find the weights kept in external files (read_model checked them): the model's
        # folder; or, for weights only in the model file itself, the folder the file really is in (ORT
        # refuses a reference through a symlink that leads out of the folder it is given)
        real = self.path.resolve() if self.path is not None else None
        self._real_file = real
        if external and self.path is not None:
            self.external_dir: Path | None = self.path.parent.resolve()
        elif self._spans and real is not None:
            self.external_dir = real.parent
        else:
            self.external_dir = None

    @property
    def proto(self) -> onnx.ModelProto:
        """The ONNX model, weights included (read back from the model's file the first time needed)."""
        if self._in_file:
            with self._lock:
                if self._in_file:
                    self._read_weights()
        return self._proto

    @property
    def skeleton(self) -> onnx.ModelProto:
        """The ModelProto as held: everything but the data of large weights still only in the model's
        file. For what needs the graph, not the weights (use export_initializer for initializers)."""
        return self._proto

    @property
    def weights_in_memory(self) -> bool:
        """False while the large weights of a model read from a file are still only in that file."""
        return not self._in_file

    @property
    def metadata_props(self) -> dict[str, str]:
        """The model's metadata_props as {key: value} (reading them needs no weights)."""
        return {p.key: p.value for p in self._proto.metadata_props}

    def _read_weights(self) -> None:
        assert self.path is not None
        try:
            fresh = onnx.load(str(self.path), load_external_data=False)
        except Exception as exc:
            raise ModelError(
                f"cannot read the weights of {self.path} again ({_short(exc)}): keep the file in place "
                "while the model is in use, or read it again"
            ) from None
        ours, theirs = self._proto.graph.initializer, fresh.graph.initializer
        for i in self._in_file:
            if (
                i >= len(theirs)
                or theirs[i].name != ours[i].name
                or list(theirs[i].dims) != list(ours[i].dims)
            ):
                raise ModelError(f"{self.path} changed on disk since it was read: read the model again")
            ours[i].CopyFrom(theirs[i])
        self._in_file = ()

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
        if self._proto.graph.name:
            return self._proto.graph.name
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
        from ..errors import AffinityError

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
        """Write the model, keeping each node's affinity in NodeProto.metadata_props (key "affinity").

        Weights in external files stay there: saved into the model's own folder, the new file points at
        the same data files; saved elsewhere, the data files are linked (or, across file systems, copied)
        beside it. Nothing is left behind if writing fails.
        """
        for node in self._ops:
            props = node.proto.metadata_props
            kept = [(p.key, p.value) for p in props if p.key != AFFINITY]
            del props[:]
            for key, value in kept:
                props.add(key=key, value=value)
            if node.affinity is not None:
                props.add(key=AFFINITY, value=node.affinity)
        # through a symbolic link to the file it names, except with external data: the data files go
        # beside the path given, where the saved model will be read from
        path = _target(path, follow=not self._external_data)
        tmp: Path | None = None
        written: list[Path] = []
        try:
            if self.external_dir is not None:
                written = _place_external_files(self.proto, self.external_dir, path.parent)
            tmp = _new_file_beside(path)
            onnx.save(self.proto, str(tmp))
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            tmp.replace(path)
        except Exception as exc:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
            for file in written:
                file.unlink(missing_ok=True)
            if isinstance(exc, HeteroError):
                raise
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else _short(exc)
            raise ModelError(f"cannot write {path}: {reason}") from None

    # --- tensors and types ---------------------------------------------------------------------------

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

    @property
    def initializers(self) -> dict[str, onnx.TensorProto]:
        """{name: TensorProto} of the graph's dense initializers, weights read back first if need be."""
        _ = self.proto  # reads the weights back into these very messages
        return self._initializer_index

    @functools.cached_property
    def has_half_floats(self) -> bool:
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

        return in_graph(self._proto.graph) or any(any(in_nodes(f.node)) for f in self._proto.functions)

    @functools.cached_property
    def sparse_initializers(self) -> dict[str, onnx.SparseTensorProto]:
        """{name: SparseTensorProto} of the graph's sparse initializers (never left in the file)."""
        return {t.values.name: t for t in self._proto.graph.sparse_initializer}

    @functools.cached_property
    def dense_initializer_names(self) -> frozenset[str]:
        """Names of the graph's dense initializers (reading them needs no weights)."""
        return frozenset(self._initializer_index)

    @functools.cached_property
    def _initializer_index(self) -> dict[str, onnx.TensorProto]:
        """{name: TensorProto} of the held initializers (large ones empty while their weights are only in
        the file; _read_weights fills these same messages)."""
        return {t.name: t for t in self._proto.graph.initializer}

    def reference(self, name: str) -> onnx.TensorProto | None:
        """Initializer ``name`` as external data pointing at its bytes in the model's file, while its
        weights are still only there (ORT reads them from the file); None otherwise.

        ModelError if the file changed since it was read. None where ORT could not follow the reference (the
        model's weights are then read into memory instead): a file whose name has a ':' in it (ONNX
        Runtime's OpenVINO EP cannot read such a location: quirk openvino-colon-external-data), or a symlink
        to a file outside the folder of the model's own external data files.
        """
        if not self._in_file or name not in self._spans:
            return None
        real = self._real_file
        if real is None or ":" in real.name or real.parent != self.external_dir:
            return None
        self._check_unchanged()
        offset, length = self._spans[name]
        tensor = onnx.TensorProto()
        tensor.CopyFrom(self._stripped[name])
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", real.name), ("offset", str(offset)), ("length", str(length))):
            tensor.external_data.add(key=key, value=value)
        return tensor

    def _check_unchanged(self) -> None:
        """ModelError if the model's file changed since it was read (its weights are read from it later)."""
        assert self.path is not None and self._stamp is not None
        try:
            stat = self.path.stat()
        except OSError:
            stat = None
        if stat is None or (stat.st_size, stat.st_mtime_ns) != self._stamp:
            raise ModelError(f"{self.path} changed on disk since it was read: read the model again")

    def export_initializer(self, name: str) -> onnx.TensorProto:
        """Initializer ``name`` for a model ORT loads: a reference into the model's file where possible,
        else the tensor with its data (read back from the file only for a large weight that cannot be
        referenced: small ones and external ones are in the skeleton as they are)."""
        reference = self.reference(name)
        if reference is not None:
            return reference
        return self.initializers[name] if name in self._stripped else self._initializer_index[name]

    def initializer_array(self, name: str) -> np.ndarray:
        """Initializer ``name``'s value, read from the model's file if it is only there (the other weights
        stay there); kept for the next call."""
        if name not in self._arrays:
            self._arrays[name] = self._read_array(name)
        return self._arrays[name]

    def _read_array(self, name: str) -> np.ndarray:
        """Its bytes read here, where they are in a file (the model's or an external data file), and
        decoded by onnx from a copy of the tensor holding them: onnx's own external data loader refuses a
        file with several hard links, which ORT reads fine."""
        if self._in_file and name in self._spans:
            self._check_unchanged()
            assert self.path is not None
            offset, length = self._spans[name]
            return _decoded(self._stripped[name], _read_bytes(self.path, offset, length))
        tensor = self.initializers[name] if name in self._stripped else self._initializer_index[name]
        try:
            if _is_external(tensor) and self.external_dir is not None:
                info = _external_info(tensor)
                offset = int(info.get("offset", "0") or 0)
                length = int(info["length"]) if info.get("length") else tensor_nbytes(tensor)
                return _decoded(tensor, _read_bytes(self.external_dir / info["location"], offset, length))
            return onnx.numpy_helper.to_array(tensor)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"cannot read initializer {name!r} of the model ({_short(exc)})") from None

    @functools.cached_property
    def declared_inputs(self) -> dict[str, onnx.ValueInfoProto]:
        """{name: ValueInfoProto} of graph.input as written, initializers listed there included."""
        return {i.name: i for i in self._proto.graph.input}

    def consumers(self) -> dict[str, list[Node]]:
        """{tensor name: nodes reading it (directly or inside a body)}."""
        out: dict[str, list[Node]] = {}
        for node in self._ops:
            for name in node.inputs:
                out.setdefault(name, []).append(node)
        return out

    def value_type(self, name: str) -> onnx.TypeProto | None:
        """The tensor's type (element type and, where known, shape), from the model or shape inference."""
        corrected = self._corrected.get(name)
        if corrected is not None:
            return corrected
        if self._types is None:
            if self._declared is None:
                self._declared = self._collect_types(inferred=False)
            declared = self._declared.get(name)
            if declared is not None and _has_elem(declared) and _has_shape(declared):
                return declared  # onnx's shape inference (and its memory) is paid only where needed
            self._types = self._collect_types(inferred=True)
        return self._types.get(name)

    @functools.cached_property
    def types_without_value_info(self) -> dict[str, onnx.TypeProto]:
        """What onnx's shape inference gives each tensor from the graph's inputs and weights alone, the
        model's value_info left out: where that value_info is wrong, what it wrongly led inference to
        (a consumer's output) shows here as it is. Empty where inference fails. Computed once: the
        corrections made from it leave the model's graph as it is."""
        return self._inferred_alone(None)

    @functools.cached_property
    def types_at_one_size(self) -> dict[str, onnx.TypeProto]:
        """What onnx's shape inference (with data propagation) gives each tensor, the model's value_info
        left out, once every dynamic dimension of the inputs is set to one size (SAMPLE_SIZE): a fixed
        dimension the value_info declares and this contradicts is one a run can contradict too. Empty
        where inference fails."""
        return self._inferred_alone(SAMPLE_SIZE)

    def _inferred_alone(self, size: int | None) -> dict[str, onnx.TypeProto]:
        """{tensor: type} from onnx's shape inference without the model's value_info; with ``size``, every
        dynamic input dimension set to it first (and data propagated)."""
        copy = _negative_dims_unknown(self.weightless_copy())
        del copy.graph.value_info[:]
        if size is not None:
            for vi in copy.graph.input:
                for d in vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else ():
                    if not d.HasField("dim_value"):
                        d.dim_value = size
        try:
            result = onnx.shape_inference.infer_shapes(
                copy, check_type=False, strict_mode=False, data_prop=size is not None
            )
        except Exception:
            return {}
        return {vi.name: vi.type for vi in result.graph.value_info}

    @functools.cached_property
    def declares_fixed_dims(self) -> bool:
        """Whether the model's own value_info or graph outputs give some tensor a fixed dimension (a quick
        test before types_at_one_size: without one, no declared shape can be contradicted)."""
        graph = self._proto.graph
        for vi in (*graph.output, *graph.value_info):
            if not vi.type.HasField("tensor_type"):
                continue
            if any(d.HasField("dim_value") and d.dim_value >= 0 for d in vi.type.tensor_type.shape.dim):
                return True
        return False

    def correct_type(self, name: str, value_type: onnx.TypeProto | None) -> None:
        """Use ``value_type`` for tensor ``name`` from now on: where ONNX Runtime found that the model's
        value_info contradicts what the tensor really is (ORT itself goes by what it infers). None takes
        a correction back."""
        if value_type is None:
            self._corrected.pop(name, None)
        else:
            self._corrected[name] = value_type

    def correction(self, name: str) -> onnx.TypeProto | None:
        """The type correct_type gave ``name``, or None."""
        return self._corrected.get(name)

    def is_corrected(self, name: str) -> bool:
        """Whether ``name``'s type was replaced by correct_type."""
        return name in self._corrected

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
        return TensorInfo(name, dtype, type_shape(t))

    # --- construction helpers ------------------------------------------------------------------------

    def _sorted_ops(self) -> list[Node]:
        protos = list(self._proto.graph.node)
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

    def _mark_constants(self) -> frozenset[str]:
        # An overridable initializer is copied into each subgraph like a constant (with the caller's value
        # fed where given), but what is computed from it is not constant: a caller may change it.
        foldable = set(self.initializer_names - self.overridable_initializers)
        for node in self._ops:
            p = node.proto
            if p.domain not in ("", "ai.onnx") or _random(p) or node.has_subgraphs:
                continue
            if p.op_type == "Constant" or (node.inputs and all(i in foldable for i in node.inputs)):
                node.is_constant = True
                foldable.update(node.outputs)
        return frozenset(foldable | self.initializer_names)

    @functools.cached_property
    def session_file(self) -> Path | None:
        """The file ORT can load in place of this model (read from it, every node named as here), or None.

        Loading the file spares a serialized copy of the weights in memory.
        """
        if self.path is None or not all(n.proto.name == n.friendly_name for n in self._ops):
            return None
        return self.path

    def weightless_copy(self, *, rename: bool = False) -> onnx.ModelProto:
        """The model with each large initializer turned into a graph input of its type and shape.

        For what reads types, never weights (shape inference, a CPU kernel probe): no copy of the weights
        is made. Small initializers (shapes, axes, scales) stay, since inference reads their values.
        ``rename``: nodes in topological order, named by their friendly names.
        """
        return self._copy(rename=rename, weights=False)

    def session_copy(self) -> onnx.ModelProto:
        """The whole model for a session, nodes in topological order and named by their friendly names;
        weights still only in the model's file are referenced there, not copied (``reference``)."""
        return self._copy(rename=True, weights=True)

    def _copy(self, *, rename: bool, weights: bool) -> onnx.ModelProto:
        src, graph = self._proto, self._proto.graph
        out = onnx.ModelProto(
            ir_version=src.ir_version,
            producer_name=src.producer_name,
            producer_version=src.producer_version,
            domain=src.domain,
            model_version=src.model_version,
        )
        out.opset_import.extend(src.opset_import)
        out.functions.extend(src.functions)
        out.metadata_props.extend(src.metadata_props)
        new = out.graph
        new.name = graph.name
        if rename:
            for node in self._ops:
                copy = new.node.add()
                copy.CopyFrom(node.proto)
                copy.name = node.friendly_name
        else:
            new.node.extend(graph.node)
        new.input.extend(graph.input)
        new.output.extend(graph.output)
        new.value_info.extend(graph.value_info)
        new.sparse_initializer.extend(graph.sparse_initializer)
        declared = {i.name for i in graph.input}
        for t in graph.initializer:
            if weights:
                new.initializer.append(self.export_initializer(t.name) if t.name in self._stripped else t)
            elif not _is_external(t) and _elements(t) <= SMALL_INITIALIZER:
                new.initializer.append(t)
            elif t.name not in declared:
                new.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        return out

    def _collect_types(self, *, inferred: bool) -> dict[str, onnx.TypeProto]:
        """Types the model declares, and with ``inferred`` what onnx's shape inference adds to them."""
        graph = self._proto.graph
        types: dict[str, onnx.TypeProto] = {}
        infos: Iterable[onnx.ValueInfoProto] = []
        if inferred:
            try:
                # onnx copies the model it infers: a weightless copy keeps that from doubling the weights
                result = onnx.shape_inference.infer_shapes(
                    _negative_dims_unknown(self.weightless_copy()), check_type=False, strict_mode=False
                )
                infos = [*result.graph.value_info, *result.graph.input, *result.graph.output]
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


def _has_shape(t: onnx.TypeProto) -> bool:
    return t.WhichOneof("value") != "tensor_type" or t.tensor_type.HasField("shape")


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


def _target(path: str | os.PathLike[str], *, follow: bool) -> Path:
    """Where ``save`` writes ``path`` (through symbolic links if ``follow``); ModelError for what is not a
    file to write."""
    if not str(path):
        raise ModelError("the output path is empty: give a file name such as model.affinities.onnx")
    target = Path(os.path.realpath(path)) if follow else Path(path).absolute()
    if target.is_dir():
        raise ModelError(f"cannot write {path}: it is a directory; give a file name inside it")
    if target.exists() and not target.is_file() and not target.is_symlink():
        raise ModelError(f"cannot write {path}: it is not a regular file; give the path of an .onnx file")
    return target


def _new_file_beside(path: Path) -> Path:
    """A new empty file of a name of its own in ``path``'s folder, made with the umask's permissions: what
    ``save`` writes and then moves into place whole (nothing of the user's is overwritten on the way)."""
    while True:
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return candidate


# A check of a parsed model before it becomes a Model (the runtime's: can this ONNX Runtime load it?):
# (proto, where it came from) -> None, or ModelError saying what is wrong.
ModelCheck = Callable[[onnx.ModelProto, str], None]


def read_model(
    source: str | os.PathLike[str] | bytes | memoryview | onnx.ModelProto, check: ModelCheck | None = None
) -> Model:
    """Load an ONNX model from a path, serialized bytes or a ModelProto, with one clear error if it cannot.

    ``check`` runs on the parsed model after the structural checks (Core passes ONNX Runtime's
    IR-version and opset check, so a model it cannot load is refused when it is read).

    Weights stored in external data files are checked (inside the model's folder, present, long enough)
    but not loaded: sessions read them from the files. Only small external tensors (shapes, axes) are
    read in, so shape inference sees them.
    """
    if isinstance(source, onnx.ModelProto):
        return _checked(source, None, "the ModelProto given", check)
    if isinstance(source, bytes | bytearray):
        try:
            proto = onnx.load_from_string(bytes(source))
        except Exception as exc:
            raise ModelError(f"these bytes are not an ONNX model ({_short(exc)})") from None
        return _checked(proto, None, "these bytes", check)
    if isinstance(source, memoryview):
        return read_model(source.tobytes(), check)
    if not isinstance(source, str | os.PathLike):
        raise ModelError(
            f"cannot read a model from {type(source).__name__}: give a file path, the model's bytes or an "
            "onnx.ModelProto"
        )
    path = Path(source)
    if not path.exists():
        raise ModelError(f"model file not found: {path}: check the path")
    if path.is_dir():
        raise ModelError(f"{path} is a directory: give the path of an .onnx file")
    if not path.is_file():
        # a pipe (<(cat m.onnx)) can be read once, but a model's weights stay in its file and sessions read
        # them again; a device such as /dev/zero never ends
        raise ModelError(
            f"{path} is not a regular file (a pipe or a device): save the model to a file and give its path"
        )
    try:
        proto = _load_skeleton(path) or onnx.load(str(path), load_external_data=False)
    except PermissionError:
        raise ModelError(f"cannot read {path}: permission denied") from None
    except Exception as exc:
        raise ModelError(
            f"{path} is not a readable ONNX model ({_short(exc)}): is the file truncated or of another format?"
        ) from None
    return _checked(proto, path, str(path), check)


def _load_skeleton(path: Path) -> onnx.ModelProto | None:
    """The model in a binary .onnx file parsed without the data of its large weights (Model leaves those
    in the file anyway: this spares reading them at all); None where onnx.load must read the file."""
    ext = os.path.splitext(path)[1]
    if onnx.serialization.registry.get_format_from_file_extension(ext) not in (None, "protobuf"):
        return None
    try:
        if path.stat().st_size < SKELETON_MIN_BYTES:
            return None  # the walk, in Python, costs more than reading a small file's weights
    except OSError:
        return None
    data = skeleton_bytes(path, SMALL_INITIALIZER)
    if data is None:
        return None
    try:
        return onnx.load_from_string(data)
    except Exception:
        return None  # onnx.load tells what is wrong with the file


def _checked(proto: onnx.ModelProto, path: Path | None, where: str, check: ModelCheck | None) -> Model:
    """``proto`` as a Model once it passed the structural checks and ``check``; ModelError saying what is
    wrong if not."""
    if not proto.graph.node and not proto.graph.output:
        raise ModelError(f"{where} holds no ONNX graph: is it an ONNX model file?")
    check_structure(proto, where)
    if check is not None:
        check(proto, where)
    external = [t for t in all_tensors(proto) if _is_external(t)]
    if external:
        if path is None:
            raise ModelError(
                f"{where} keeps tensor {external[0].name!r} in an external data file, and a model given in "
                "memory has no folder to find it in: give read_model the .onnx file's path"
            )
        folder = path.absolute().parent.resolve()
        for tensor in external:
            check_external(tensor, folder, path)
        for tensor in external:
            _inline_if_small(tensor, folder)
    try:
        return Model(proto, path)
    except HeteroError:
        raise
    except Exception as exc:  # a structure onnx parsed but that makes no sense as a graph
        raise ModelError(f"{where} is not a valid ONNX model ({_short(exc)})") from None


def check_structure(proto: onnx.ModelProto, where: str) -> None:
    """Refuse what protobuf parses but no ONNX writer produces: a file cut after its graph, text that is
    not UTF-8, nodes reading tensors nothing defines, outputs nothing produces."""
    if proto.ir_version <= 0:
        raise ModelError(f"{where} has no IR version: it is not an ONNX model, or the file is damaged")
    if not proto.opset_import:
        raise ModelError(
            f"{where} declares no opset (opset_import is missing): the file is truncated, or it was not "
            "written by an ONNX exporter"
        )
    field = _invalid_text(proto)
    if field is not None:
        raise ModelError(f"{where} has a {field} that is not valid UTF-8 text: the file is corrupt")
    graph = proto.graph
    nameless = [n for n in graph.node if not n.op_type]
    if nameless:
        raise ModelError(
            f"{where} has a node without an op type ({nameless[0].name or 'unnamed'}): it is corrupt"
        )
    undefined = graph_outer_refs(graph)
    if undefined:
        raise ModelError(
            f"{where} reads tensor(s) {', '.join(map(repr, undefined[:5]))} that no node, input or "
            "initializer defines: the model is incomplete or corrupt"
        )
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    defined |= {o for n in graph.node for o in n.output}
    missing = [o.name for o in graph.output if o.name not in defined]
    if missing:
        raise ModelError(
            f"{where} has output(s) {', '.join(map(repr, missing[:5]))} that no node, input or initializer "
            "produces: the model is incomplete or corrupt"
        )


def _invalid_text(message: Any) -> str | None:
    """The first string field holding bytes that are not UTF-8 (protobuf hands those back as bytes)."""
    stack = [message]
    while stack:
        current = stack.pop()
        if type(current) is onnx.TensorProto:
            # its payload (raw_data, float_data, ...) holds no text: listing its fields would copy weights
            if isinstance(current.name, bytes) or isinstance(current.doc_string, bytes):
                return "TensorProto.name"
            stack.extend(current.external_data)
            continue
        for field, value in current.ListFields():
            kind = _FIELD_KINDS.get(field)
            if kind is None:
                kind = _FIELD_KINDS[field] = _field_kind(field)
            message_field, string_field, repeated = kind
            if field is _NODE_ATTRIBUTE:
                found = _invalid_attribute_text(value, stack)
                if found is not None:
                    return found
            elif message_field:
                if repeated:
                    stack.extend(value)
                else:
                    stack.append(value)
            elif string_field and (bytes in map(type, value) if repeated else type(value) is bytes):
                return f"{current.DESCRIPTOR.name}.{field.name}"
    return None


_FIELD_KINDS: dict[Any, tuple[bool, bool, bool]] = {}
_NODE_ATTRIBUTE = onnx.NodeProto.DESCRIPTOR.fields_by_name["attribute"]
_ATTRIBUTE_TEXT = ("name", "ref_attr_name", "doc_string")
# attribute types whose value holds no text (a STRING attribute's value is bytes in ONNX)
_TEXTLESS = frozenset(
    getattr(onnx.AttributeProto, t) for t in ("FLOAT", "INT", "STRING", "FLOATS", "INTS", "STRINGS")
)


def _invalid_attribute_text(attributes: Any, stack: list[Any]) -> str | None:
    """_invalid_text's check of a node's attributes, the bulk of a model's messages: the text fields by
    name, and only values that may hold text (tensors, graphs, type protos) onto ``stack``."""
    for attr in attributes:
        for name in _ATTRIBUTE_TEXT:
            if type(getattr(attr, name)) is bytes:
                return f"AttributeProto.{name}"
        if attr.type not in _TEXTLESS:
            stack.append(attr)
    return None


def _field_kind(field: Any) -> tuple[bool, bool, bool]:
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:  # protobuf before 5.x
        repeated = field.label == field.LABEL_REPEATED
    return field.type == field.TYPE_MESSAGE, field.type == field.TYPE_STRING, bool(repeated)


# --- external data ---------------------------------------------------------------------------------------

INLINE_BYTES = 4096  # external tensors up to this size (shapes, axes, scales) are read in at read time
_PACKED = {  # element types stored several to a byte
    onnx.TensorProto.INT4: 2,
    onnx.TensorProto.UINT4: 2,
    **{getattr(onnx.TensorProto, n): 2 for n in ("FLOAT4E2M1",) if hasattr(onnx.TensorProto, n)},
    **{getattr(onnx.TensorProto, n): 4 for n in ("INT2", "UINT2") if hasattr(onnx.TensorProto, n)},
}


def all_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every TensorProto of the model: initializers, sparse ones' parts, Constant values, in every body."""
    yield from _graph_tensors(proto.graph)
    for function in proto.functions:
        for node in function.node:
            yield from _node_tensors(node)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _node_tensors(node)


# attribute types whose value holds no tensor (an attribute's value is the field its type names)
_TENSORLESS = _TEXTLESS | {onnx.AttributeProto.TYPE_PROTO, onnx.AttributeProto.TYPE_PROTOS}


def _node_tensors(node: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
    for attr in node.attribute:
        if attr.type in _TENSORLESS:
            continue
        if attr.HasField("t"):
            yield attr.t
        yield from attr.tensors
        sparse = [*attr.sparse_tensors, *([attr.sparse_tensor] if attr.HasField("sparse_tensor") else [])]
        for sp in sparse:
            yield sp.values
            yield sp.indices
        if attr.HasField("g"):
            yield from _graph_tensors(attr.g)
        for g in attr.graphs:
            yield from _graph_tensors(g)


def _read_bytes(path: Path, offset: int, length: int | None) -> bytes:
    """``length`` bytes of ``path`` from ``offset`` (to its end where None); OSError if short."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read() if length is None else f.read(length)
    if length is not None and len(data) != length:
        raise OSError(f"{path} ends before the tensor's {length} bytes at offset {offset}")
    return data


def _decoded(tensor: onnx.TensorProto, data: bytes) -> np.ndarray:
    """The array of ``tensor`` (its type and shape) whose raw bytes are ``data``: onnx decodes them, int4
    packing, float8 and byte order included."""
    copy = onnx.TensorProto()
    copy.CopyFrom(tensor)
    del copy.external_data[:]
    copy.data_location = onnx.TensorProto.DEFAULT
    copy.raw_data = data
    return onnx.numpy_helper.to_array(copy)


def _is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def _external_info(tensor: onnx.TensorProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in tensor.external_data}


_TENSOR_DATA = frozenset(
    {"raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data"}
)


def _weights_left_in_file(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """``proto`` rebuilt without the data of its large embedded initializers, and their indices.

    A new message, so the weights' memory goes with the old one (clearing fields would keep it).
    """
    inits = proto.graph.initializer
    large = tuple(i for i, t in enumerate(inits) if not _is_external(t) and _elements(t) > SMALL_INITIALIZER)
    if not large:
        return proto, ()
    if not any(_holds_data(inits[i]) for i in large):
        return proto, large  # read without them (_load_skeleton)
    out = onnx.ModelProto()
    _copy_fields(out, proto, skip={"graph"})
    _copy_fields(out.graph, proto.graph, skip={"initializer"})
    chosen = set(large)
    for i, t in enumerate(inits):
        if i in chosen:
            _copy_fields(out.graph.initializer.add(), t, skip=_TENSOR_DATA)
        else:
            out.graph.initializer.append(t)
    return out, large


def _holds_data(tensor: onnx.TensorProto) -> bool:
    """Whether the tensor carries its data (checked without copying it out)."""
    return tensor.HasField("raw_data") or any(
        len(getattr(tensor, field)) for field in _TENSOR_DATA if field != "raw_data"
    )


def _copy_fields(dst: Any, src: Any, *, skip: Iterable[str]) -> None:
    skipped = set(skip)
    for field, value in src.ListFields():
        if field.name in skipped:
            continue
        kind = _FIELD_KINDS.get(field) or _field_kind(field)
        if kind[2]:
            getattr(dst, field.name).extend(value)
        elif kind[0]:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)


def _elements(tensor: onnx.TensorProto) -> int:
    count = 1
    for d in tensor.dims:
        count *= int(d)
    return count


def tensor_nbytes(tensor: onnx.TensorProto) -> int | None:
    """Bytes of the tensor's data as stored (None for strings and unknown element types)."""
    count = _elements(tensor)
    per_byte = _PACKED.get(tensor.data_type)
    if per_byte is not None:
        return -(-count // per_byte)
    if tensor.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    try:
        return count * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except Exception:
        return None


def check_external(tensor: onnx.TensorProto, folder: Path, model_path: Path) -> Path:
    """The file holding an external tensor's data, once checked: a regular file inside the model's folder
    (no absolute path, no way out through ``..`` or a symlink), holding every byte the tensor needs."""
    name = tensor.name or "(unnamed)"
    info = _external_info(tensor)
    location = info.get("location", "")
    where = f"tensor {name!r} of {model_path}"
    if not location:
        raise ModelError(f"{where} keeps its data in an external file but names none (no location)")
    if "\x00" in location:
        raise ModelError(f"{where} names external data file {location!r}, which is not a valid file name")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or PureWindowsPath(location).drive:
        raise ModelError(
            f"{where} keeps its data in {location!r}, an absolute path outside the model's folder {folder}: "
            "external data must be a file beside the model (a relative location); refused"
        )
    target = (folder / location).resolve()
    if not target.is_relative_to(folder):
        raise ModelError(
            f"{where} keeps its data in {location!r}, which leads outside the model's folder {folder}: "
            "external data must stay beside the model; refused"
        )
    if target.is_dir():
        raise ModelError(
            f"{where} keeps its data in {location!r}, which is a folder in {folder}, not a data file: the "
            "model is corrupt, or the data file was replaced by a folder"
        )
    if not target.is_file():
        raise ModelError(
            f"{where} keeps its data in {location!r}, which is missing from {folder}: copy the data file "
            "beside the model"
        )
    if not os.access(target, os.R_OK):
        raise ModelError(f"{where} keeps its data in {target}, which cannot be read: permission denied")
    try:
        offset = int(info.get("offset", "0") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise ModelError(
            f"{where} has a bad offset or length for {location!r}: the model is corrupt"
        ) from None
    expected = tensor_nbytes(tensor)
    if expected is None:
        if tensor.data_type == onnx.TensorProto.STRING:
            raise ModelError(f"{where} is a string tensor in external data, which ONNX does not allow")
    elif length is not None and length != expected:
        raise ModelError(
            f"{where} says {length} bytes in {location!r} but its shape and type need {expected}: the "
            "model is corrupt"
        )
    need = offset + (length if length is not None else expected or 0)
    size = target.stat().st_size
    if offset < 0 or need > size:
        raise ModelError(
            f"{where} needs bytes {offset}..{need} of {location!r}, which has only {size} bytes: the data "
            "file is truncated or belongs to another model"
        )
    return target


def _inline_if_small(tensor: onnx.TensorProto, folder: Path) -> None:
    """Read a small external tensor into the model, so shape inference and constant folding see it."""
    nbytes = tensor_nbytes(tensor)
    if nbytes is None or nbytes > INLINE_BYTES:
        return
    info = _external_info(tensor)
    with open(folder / info["location"], "rb") as f:
        f.seek(int(info.get("offset", "0") or 0))
        data = f.read(nbytes)
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = data


def _place_external_files(proto: onnx.ModelProto, source: Path, target: Path) -> list[Path]:
    """Make the external data files of ``proto`` reachable from ``target`` (the folder a copy of the model
    is saved into): nothing to do in the source folder, else hard links, or copies across file systems.
    Returns the files created here, for the caller to remove if saving fails."""
    target = target.resolve()
    if target == source:
        return []
    created: list[Path] = []
    try:
        for location in dict.fromkeys(
            _external_info(t)["location"] for t in all_tensors(proto) if _is_external(t)
        ):
            src, dst = source / location, target / location
            if dst.exists():
                if dst.resolve() == src.resolve() or _same_content(src, dst):
                    continue
                raise ModelError(
                    f"cannot save beside {dst}: the model's weights go into a file of that name, and one with "
                    "other content is already there (save the model into another folder)"
                )
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
            created.append(dst)
    except BaseException:
        for file in created:
            file.unlink(missing_ok=True)
        raise
    return created


def _same_content(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            chunk = fa.read(1 << 20)
            if chunk != fb.read(1 << 20):
                return False
            if not chunk:
                return True


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
