"""External data: tensors whose bytes ONNX keeps in files of their own beside the model.

Finding every tensor of a model, checking an external tensor's file when the model is read (inside the
model's folder, present, long enough), reading the small ones in, and placing the files beside a copy of
the model when it is saved elsewhere.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path, PureWindowsPath

import numpy as np
import onnx
from onnx import helper

from ..errors import ModelError
from .shared import SCALAR_ATTRIBUTES

INLINE_BYTES = 4096  # external tensors up to this size (shapes, axes, scales) are read in at read time
PACKED = {  # element types stored several to a byte
    onnx.TensorProto.INT4: 2,
    onnx.TensorProto.UINT4: 2,
    **{getattr(onnx.TensorProto, n): 2 for n in ("FLOAT4E2M1",) if hasattr(onnx.TensorProto, n)},
    **{getattr(onnx.TensorProto, n): 4 for n in ("INT2", "UINT2") if hasattr(onnx.TensorProto, n)},
}
# attribute types whose value holds no tensor (an attribute's value is the field its type names)
_TENSORLESS = SCALAR_ATTRIBUTES | {onnx.AttributeProto.TYPE_PROTO, onnx.AttributeProto.TYPE_PROTOS}


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


def is_external(tensor: onnx.TensorProto) -> bool:
    """Whether the tensor's data is in an external data file."""
    return tensor.data_location == onnx.TensorProto.EXTERNAL


def external_info(tensor: onnx.TensorProto) -> dict[str, str]:
    """The tensor's external_data entries (location, offset, length...) as a dict."""
    return {entry.key: entry.value for entry in tensor.external_data}


def elements(tensor: onnx.TensorProto) -> int:
    """How many elements the tensor's dims hold."""
    count = 1
    for d in tensor.dims:
        count *= int(d)
    return count


def tensor_nbytes(tensor: onnx.TensorProto) -> int | None:
    """Bytes of the tensor's data as stored (None for strings and unknown element types)."""
    count = elements(tensor)
    per_byte = PACKED.get(tensor.data_type)
    if per_byte is not None:
        return -(-count // per_byte)
    if tensor.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    try:
        return count * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except (KeyError, TypeError, ValueError):  # a data type numpy has no dtype for: its size is unknown
        return None


def check_external(tensor: onnx.TensorProto, folder: Path, model_path: Path) -> Path:
    """The file holding an external tensor's data, once checked: a regular file inside the model's folder
    (no absolute path, no way out through ``..`` or a symlink), holding every byte the tensor needs."""
    name = tensor.name or "(unnamed)"
    info = external_info(tensor)
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
    if offset < 0 or (length is not None and length < 0):
        what = f"offset ({offset})" if offset < 0 else f"length ({length})"
        raise ModelError(
            f"{where} has a negative {what} into {location!r}, which is invalid: the model is corrupt"
        )
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
    if need > size:
        raise ModelError(
            f"{where} needs bytes {offset}..{need} of {location!r}, which has only {size} bytes: the data "
            "file is truncated or belongs to another model"
        )
    return target


def inline_if_small(tensor: onnx.TensorProto, folder: Path) -> None:
    """Read a small external tensor into the model, so shape inference and constant folding see it."""
    nbytes = tensor_nbytes(tensor)
    if nbytes is None or nbytes > INLINE_BYTES:
        return
    info = external_info(tensor)
    with open(folder / info["location"], "rb") as f:
        f.seek(int(info.get("offset", "0") or 0))
        data = f.read(nbytes)
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = data


def place_external_files(proto: onnx.ModelProto, source: Path, target: Path) -> list[Path]:
    """Make the external data files of ``proto`` reachable from ``target`` (the folder a copy of the model
    is saved into): nothing to do in the source folder, else copies (not hard links: ONNX Runtime refuses
    an external data file with several, "a potential hardlink attack", and so both models).
    Returns the files created here, for the caller to remove if saving fails; ModelError where a file of
    that name with other content is already there."""
    target = target.resolve()
    if target == source:
        return []
    created: list[Path] = []
    try:
        for location in dict.fromkeys(
            external_info(t)["location"] for t in all_tensors(proto) if is_external(t)
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
            created.append(dst)
            shutil.copyfile(src, dst)
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
