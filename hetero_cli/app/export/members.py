"""A compiled split as what an exporter writes: one standalone ONNX model per subgraph (its weights
inside, the static shape values it holds as constants of its own), each boundary tensor's type, the
links between the subgraphs and where each model output comes from.

    split = split_of(compiled, name="digits", shapes={"x": (None, 1, 32, 32)})
    for member in split.members: member.model(), member.inputs, member.outputs
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import ExportError
from ...graph import Model
from ...placement.devices import Device
from ...placement.export import subgraph_model
from ...placement.partition import Link, Subgraph
from ...runtime import CompiledModel

#: a dimension as exported: a size, a dimension's name (dynamic) or None (dynamic, unnamed)
Dim = int | str | None
#: a served model's name (Triton's folder, a URL's path segment)
_SERVED = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class TensorSpec:
    """One tensor at a boundary: ``name``; ``elem_type`` (onnx.TensorProto's enum) and ``dims`` for a
    tensor, ``elem_type`` 0 and ``dims`` None for a value that is no tensor (a sequence, a map), which
    ``kind`` names in onnx's words."""

    name: str
    elem_type: int
    dims: tuple[Dim, ...] | None
    kind: str = "tensor"

    @property
    def dtype(self) -> str:
        """The element type as numpy names it (``float32``), "" for no tensor."""
        if not self.elem_type:
            return ""
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(self.elem_type)).name


@dataclass(frozen=True)
class Member:
    """One subgraph of the split as a standalone model: ``index`` (from 0, execution order), ``label``
    (``subgraph<N>``), its ``device`` (the registry's Device), ``build`` (makes its model, weights
    embedded: ``model()``, one member's weights in memory at a time), and the boundary tensors it reads
    (``inputs``) and hands on (``outputs``), as that model declares them."""

    index: int
    label: str
    device: Device
    build: Callable[[], onnx.ModelProto]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def model(self) -> onnx.ModelProto:
        """The member's standalone model, its weights inside (made anew at each call)."""
        return self.build()


@dataclass(frozen=True)
class Split:
    """What an exporter writes: ``name`` (the model's, as served), ``device`` (the device string it was
    compiled for), the ``members`` in execution order, the model's ``inputs`` and ``outputs``,
    ``sources`` ({model output: member index, or "input" / "constant"}), ``constants`` (the values of
    the outputs served without a session) and ``links`` (the plan's)."""

    name: str
    device: str
    members: tuple[Member, ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    sources: Mapping[str, int | str]
    constants: Mapping[str, np.ndarray]
    links: tuple[Link, ...]


def split_of(
    compiled: CompiledModel, *, name: str, shapes: Mapping[str, Sequence[Dim]] | None = None
) -> Split:
    """The Split of ``compiled`` (its plan as compiled: after HETERO_FALLBACK's moves), served as ``name``.

    ``shapes``: {model input: dims} that replace the dims declared for the model's inputs wherever they
    appear (-shape's dynamic dimensions set), in the members' specs too. Raises ModelError where a
    boundary tensor's type cannot be told (placement.export).
    """
    model, plan = compiled.model, compiled.plan
    given = dict(shapes or {})
    members = []
    for compiled_subgraph in compiled.subgraphs:
        s = compiled_subgraph.subgraph
        proto = subgraph_model(model, s)  # its weights referenced, not copied: the boundary is the same
        members.append(
            Member(
                index=s.index,
                label=s.name,
                device=compiled_subgraph.target,
                build=functools.partial(_standalone, model, s),
                inputs=tuple(_with_shape(t, given) for t in _specs(proto.graph.input, _initialized(proto))),
                outputs=tuple(_with_shape(t, given) for t in _specs(proto.graph.output)),
            )
        )
    return Split(
        name=name,
        device=compiled.device_name,
        members=tuple(members),
        inputs=tuple(_model_specs(plan.inputs, members, given, model.value_type)),
        outputs=tuple(_model_specs(plan.outputs, members, given, model.value_type)),
        sources=dict(plan.output_sources),
        constants={k: np.asarray(v) for k, v in compiled.constants.items()},
        links=tuple(plan.links()),
    )


def _standalone(model: Model, subgraph: Subgraph) -> onnx.ModelProto:
    """``subgraph``'s model with every weight inside: those the source keeps in its model file copied in
    (embed), and those it keeps in external data files read from there, so the model loads anywhere."""
    proto = subgraph_model(model, subgraph, embed=True)
    for tensor in proto.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            tensor.CopyFrom(numpy_helper.from_array(model.initializer_array(tensor.name), tensor.name))
    return proto


def served_name(text: str, *, given: bool = False) -> str:
    """``text`` as a model name a serving engine takes as a folder and in a URL: letters, digits, ``_``,
    ``-`` and ``.`` (not first). A file's stem is made one (anything else becomes ``_``); a name
    ``given`` (--name) that is none is an ExportError, as is a stem left with nothing to name."""
    name = text.strip()
    if given and not _SERVED.fullmatch(name):
        raise ExportError(
            f"--name {text!r} cannot name a served model: use letters, digits, _, - and . (not first)"
        )
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
    if not cleaned:
        raise ExportError(f"{text!r} cannot name a served model: give --name with letters or digits")
    return cleaned


def spec_of(name: str, t: onnx.TypeProto | None) -> TensorSpec:
    """The TensorSpec of tensor ``name`` of type ``t`` (None: unknown, a float tensor of unknown rank is
    never assumed: dims None)."""
    if t is None:
        return TensorSpec(name, 0, None, "unknown")
    kind = t.WhichOneof("value") or "unknown"
    if kind != "tensor_type":
        return TensorSpec(name, 0, None, kind.removesuffix("_type"))
    tt = t.tensor_type
    dims = None if not tt.HasField("shape") else tuple(_dim(d) for d in tt.shape.dim)
    return TensorSpec(name, tt.elem_type, dims)


def _dim(d: onnx.TensorShapeProto.Dimension) -> Dim:
    if d.HasField("dim_value"):
        return int(d.dim_value)
    return d.dim_param or None


def _initialized(proto: onnx.ModelProto) -> frozenset[str]:
    """Inputs that have an initializer: overridable ones the model keeps, not boundary tensors."""
    return frozenset(i.name for i in proto.graph.initializer)


def _specs(values: Sequence[onnx.ValueInfoProto], skip: frozenset[str] = frozenset()) -> list[TensorSpec]:
    return [spec_of(v.name, v.type) for v in values if v.name not in skip]


def _with_shape(spec: TensorSpec, given: Mapping[str, Sequence[Dim]]) -> TensorSpec:
    if spec.name not in given:
        return spec
    return TensorSpec(spec.name, spec.elem_type, tuple(given[spec.name]), spec.kind)


def _model_specs(
    names: Sequence[str],
    members: Sequence[Member],
    given: Mapping[str, Sequence[Dim]],
    declared: Callable[[str], onnx.TypeProto | None],
) -> list[TensorSpec]:
    """The model's inputs or outputs ``names`` as the members read or make them (the model's own
    declaration for one no member touches: an input no subgraph reads, an output served without one)."""
    seen = {t.name: t for m in members for t in (*m.inputs, *m.outputs)}
    return [_with_shape(seen.get(n) or spec_of(n, declared(n)), given) for n in names]
