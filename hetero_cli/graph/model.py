"""Model wrapper: an ONNX model seen the way OpenVINO's API sees one (ops, friendly names, rt_info).

model = hetero_cli.Core().read_model("model.onnx")
for node in model.get_ops():
    node.get_rt_info()["affinity"] = "CPU"
model.save("with_affinities.onnx")   # affinities kept in NodeProto.metadata_props

Model serves the node API; the graph index (index.py), the weights (weights.py) and the tensor types
(types.py) are objects it holds and delegates to.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import onnx
from onnx import helper

from ..errors import AffinityError, ModelError
from .copies import model_copy
from .index import GraphIndex
from .node import AFFINITY, Node
from .saving import write_model
from .shape_values import shape_values
from .types import TypeTable, has_half_floats, shape_text, type_shape
from .weights import Weights

V = TypeVar("V")


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: name, numpy dtype (None if unknown) and shape (ints, names or None)."""

    name: str
    dtype: np.dtype | None
    shape: tuple[int | str | None, ...] | None

    def get_any_name(self) -> str:
        """The tensor's name (OpenVINO's port API)."""
        return self.name

    @property
    def any_name(self) -> str:
        """The tensor's name (OpenVINO's port API)."""
        return self.name

    def get_names(self) -> set[str]:
        """The tensor's names: its one name (OpenVINO's port API)."""
        return {self.name}

    def get_element_type(self) -> np.dtype | None:
        """The tensor's numpy dtype, None where the model leaves it unknown (OpenVINO's port API gives an
        openvino.Type; numpy's dtype is what hetero-cli's arrays carry)."""
        return self.dtype

    def get_partial_shape(self) -> tuple[int | str | None, ...] | None:
        """The shape as the model declares it: ints, dimension names, None for an unknown dimension, or
        None for an unknown rank (OpenVINO's port API)."""
        return self.shape

    def get_shape(self) -> tuple[int, ...]:
        """The static shape (OpenVINO's port API); ModelError for a shape with a dimension that is not fixed
        (get_partial_shape gives it as declared)."""
        if self.shape is None or not all(isinstance(d, int) and d >= 0 for d in self.shape):
            raise ModelError(
                f"{self.name!r} has a dynamic shape {shape_text(self.shape)}: get_partial_shape() gives it as "
                "the model declares it"
            )
        return tuple(int(d) for d in self.shape)


class Model:
    """An ONNX model with ops in topological order, friendly names, rt_info and inferred tensor types, made
    by ``Core().read_model(...)``. ``path``: the file ``proto`` was read from, whose large weights stay there
    until needed (None: given in memory); ``own_file=False``: ``proto`` was made from the model in that file
    (its weights are references into it, or its own); ``data_files``: the external data files read (never
    to be written over). ModelError for a graph with a cycle. It holds ``index`` (GraphIndex), ``weights``
    (Weights: where the data lies), ``types`` (TypeTable: tensor types)."""

    def __init__(
        self,
        proto: onnx.ModelProto,
        path: str | os.PathLike[str] | None = None,
        *,
        own_file: bool = True,
        data_files: frozenset[Path] = frozenset(),
    ) -> None:
        self.path = Path(path).absolute() if path is not None else None
        self.own_file = own_file
        self.data_files = data_files
        self.weights = Weights(proto, self.path, own_file=own_file)
        self._proto = self.weights.skeleton
        self.index = GraphIndex(self._proto)
        self._ops = self.index.ops
        self._by_name = self.index.by_name
        self.initializer_names = self.index.initializer_names
        self.overridable_initializers = self.index.overridable_initializers
        self.input_names = self.index.input_names
        self.output_names = self.index.output_names
        self.constant_tensors = self.index.constant_tensors
        self.producer = self.index.producer
        control_flow = [n.proto for n in self._ops if n.has_subgraphs]
        # the weightless copy onnx's inference reads (no reference back to self: no cycle to collect)
        weightless = functools.partial(model_copy, self._proto, None, None, constants_as_inputs=True)
        self.types = TypeTable(self._proto.graph, control_flow, weightless)
        self._shape_values: dict[str, np.ndarray] | None = None
        # what each device's query claimed of this model's nodes (placement.query's, kept with the model)
        self.query_cache: dict[Any, frozenset[str]] = {}
        # ORT's inferred types of tensors onnx's cannot type (placement.export's; the graph's alone, never a fix)
        self.ort_type_cache: dict[str, onnx.TypeProto] = {}

    @property
    def proto(self) -> onnx.ModelProto:
        """The ONNX model, weights included (read back from the model's file the first time needed);
        ModelError if that file is gone or changed since it was read."""
        return self.weights.proto

    @property
    def external_dir(self) -> Path | None:
        """The folder sessions find the weights kept in files in (external data, or the model's own file);
        ModelError where the model was made from another one's file and that file changed since."""
        self.weights.check_references()
        return self.weights.external_dir

    @property
    def skeleton(self) -> onnx.ModelProto:
        """The ModelProto as held: everything but the data of large weights still only in the model's
        file. For what needs the graph, not the weights (use export_initializer for initializers)."""
        return self._proto

    @property
    def metadata_props(self) -> dict[str, str]:
        """The model's metadata_props as {key: value} (reading them needs no weights)."""
        return {p.key: p.value for p in self._proto.metadata_props}

    def set_metadata(self, key: str, value: str | None) -> None:
        """Set one of the model's metadata_props (None removes it); save() keeps them."""
        props = self._proto.metadata_props
        kept = [p for p in props if p.key != key]
        del props[:]
        props.extend(kept)
        if value is not None:
            props.add(key=key, value=value)

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
        return self._proto.graph.name or (self.path.stem if self.path is not None else "model")

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

    def by_friendly_name(self, values: Mapping[str, V]) -> dict[str, V]:
        """``values`` ({node name: value}) keyed by friendly names: a name the file gives several nodes
        (each known by a friendly name of its own: GraphIndex.renamed) stands for all of them, as a
        {friendly name: device} map applies to every node of that name in OpenVINO; a friendly name
        given too wins. Names of no node stay as they are."""
        out = {n: v for name, v in values.items() if name not in self._by_name for n in self.renamed(name)}
        out.update((name, v) for name, v in values.items() if name in self._by_name or not self.renamed(name))
        return out

    def renamed(self, name: str) -> tuple[str, ...]:
        """The friendly names of the nodes the file names ``name`` where several share it, else ()."""
        return self.index.renamed.get(name, ())

    def set_affinities(self, affinities: dict[str, str]) -> None:
        """Set rt_info["affinity"] from a {node name: device} map, by friendly name or by a name several
        nodes share in the file (by_friendly_name); unknown names: AffinityError."""
        affinities = self.by_friendly_name(affinities)
        unknown = [name for name in affinities if not self.has_node(name)]
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
        the same data files; saved elsewhere, the data files are copied beside it. Nothing is left behind
        if writing fails (ModelError; for a path that is no str or os.PathLike too).
        """
        for node in self._ops:
            node.write_affinity()
        write_model(self.weights, path)

    # --- the graph index -----------------------------------------------------------------------------

    def is_constant(self, tensor: str) -> bool:
        """True for initializers and values computable from constants alone."""
        return self.index.is_constant(tensor)

    def constant_nodes_for(self, tensors: Iterable[str]) -> list[Node]:
        """The constant-only nodes that compute ``tensors``, transitively, in topological order."""
        return self.index.constant_nodes_for(tensors)

    def consumers(self) -> dict[str, list[Node]]:
        """{tensor name: nodes reading it (directly or inside a body)}."""
        return self.index.consumers()

    # --- initializers --------------------------------------------------------------------------------

    @property
    def initializers(self) -> dict[str, onnx.TensorProto]:
        """{name: TensorProto} of the graph's dense initializers, weights read back first if need be
        (ModelError as for ``proto``)."""
        return self.weights.initializers

    @functools.cached_property
    def sparse_initializers(self) -> dict[str, onnx.SparseTensorProto]:
        """{name: SparseTensorProto} of the graph's sparse initializers (never left in the file)."""
        return {t.values.name: t for t in self._proto.graph.sparse_initializer}

    @functools.cached_property
    def dense_initializer_names(self) -> frozenset[str]:
        """Names of the graph's dense initializers (reading them needs no weights)."""
        return frozenset(self.weights.held)

    @functools.cached_property
    def declared_inputs(self) -> dict[str, onnx.ValueInfoProto]:
        """{name: ValueInfoProto} of graph.input as written, initializers listed there included."""
        return {i.name: i for i in self._proto.graph.input}

    def reference(self, name: str) -> onnx.TensorProto | None:
        """Initializer ``name`` as external data pointing at its bytes in the model's file, while they are
        only there; None otherwise (Weights.reference). ModelError if the file changed since it was read."""
        return self.weights.reference(name)

    def export_initializer(self, name: str) -> onnx.TensorProto:
        """Initializer ``name`` for a model ORT loads: a reference into the model's file where possible,
        else the tensor with its data (Weights.export_initializer). ModelError as for ``reference``."""
        return self.weights.export_initializer(name)

    def initializer_array(self, name: str) -> np.ndarray:
        """Initializer ``name``'s value, read from the model's file if it is only there (the other weights
        stay there); kept for the next call. ModelError if it cannot be read."""
        return self.weights.array(name)

    # --- tensor types --------------------------------------------------------------------------------

    def value_type(self, name: str) -> onnx.TypeProto | None:
        """The tensor's type (element type and, where known, shape), from the model or shape inference,
        or as corrected (TypeTable.value_type); None where nothing gives one."""
        return self.types.value_type(name)

    @property
    def types_without_value_info(self) -> dict[str, onnx.TypeProto]:
        """{tensor: type} from onnx's shape inference without the model's value_info (TypeTable)."""
        return self.types.without_value_info

    @property
    def types_at_one_size(self) -> dict[str, onnx.TypeProto]:
        """{tensor: type} from onnx's shape inference without the model's value_info, every dynamic input
        dimension set to one size (TypeTable)."""
        return self.types.at_one_size

    def typed_copy(self) -> Model:
        """This model with type corrections of its own (a copy of these, TypeTable.copy): the graph,
        weights and indexes are shared, never copied. What a compile corrects (correct_type) it corrects in
        such a copy, so the caller's Model is never changed by a compile or an inference."""
        copy = object.__new__(Model)
        copy.__dict__.update(self.__dict__)
        copy.types = self.types.copy()
        copy._shape_values = None
        return copy

    def correct_type(self, name: str, value_type: onnx.TypeProto | None) -> None:
        """Use ``value_type`` for tensor ``name`` from now on in this Model (the contract: TypeTable; a
        compile corrects its own typed_copy); None takes a correction back."""
        self.types.correct_type(name, value_type)
        self._shape_values = None  # a shape they follow from may be the one corrected

    def shape_values(self) -> dict[str, np.ndarray]:
        """{tensor: value} of the tensors whose values follow from the model's fixed shapes and constants
        (graph.shape_values: Shape of a tensor of fixed shape, and the arithmetic on it), worked out once
        (again after a type correction). A cut between subgraphs never carries one."""
        if self._shape_values is None:
            self._shape_values = shape_values(self)
        return self._shape_values

    def correction(self, name: str) -> onnx.TypeProto | None:
        """The type correct_type gave ``name``, or None."""
        return self.types.correction(name)

    def tensor_info(self, name: str) -> TensorInfo:
        """Name, dtype and shape of a tensor, as far as they are known: ``TensorInfo(name, None, None)``
        for a tensor of unknown type (or a sequence, map or optional)."""
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

    @functools.cached_property
    def has_half_floats(self) -> bool:
        """Whether float16 or bfloat16 tensors show without shape inference (types.has_half_floats)."""
        return has_half_floats(self._proto)

    # --- copies for sessions -------------------------------------------------------------------------

    @functools.cached_property
    def session_file(self) -> Path | None:
        """The file ORT can load in place of this model (read from it, every node named as here; never for
        ``own_file=False``), or None. Loading the file spares a serialized copy of the weights in memory."""
        if (
            not self.own_file
            or self.path is None
            or not all(n.proto.name == n.friendly_name for n in self._ops)
        ):
            return None
        return self.path

    def weightless_copy(self, *, rename: bool = False) -> onnx.ModelProto:
        """The model with each large initializer turned into a graph input of its type and shape.

        For what reads types, never weights (shape inference, a CPU kernel probe): no copy of the weights
        is made. Small initializers (shapes, axes, scales) stay, since inference reads their values.
        ``rename``: nodes in topological order, named by their friendly names.
        """
        return model_copy(self._proto, self._ops if rename else None, None)

    def session_copy(self) -> onnx.ModelProto:
        """The whole model for a session, nodes in topological order and named by their friendly names;
        weights still only in the model's file are referenced there, not copied (``reference``: ModelError
        if the file changed since it was read)."""
        return model_copy(self._proto, self._ops, self.weights)
