"""Reading a model: read_model parses a path, bytes or a ModelProto into a Model, with one clear error
(ModelError) for anything that is not a model hetero-cli can use, and the structural checks it makes first.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import onnx

from ..errors import HeteroError, ModelError
from .external import all_tensors, check_external, inline_if_small, is_external
from .index import graph_outer_refs
from .model import Model
from .operators import check_operators
from .shared import SCALAR_ATTRIBUTES, field_kind, short_reason
from .tensor_sizes import check_tensor_sizes
from .weights import SMALL_INITIALIZER
from .wire import skeleton

log = logging.getLogger("hetero_cli")

# read_model skips the weights' bytes of files from this size on (smaller ones are parsed whole)
SKELETON_MIN_BYTES = 1 << 20

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
        except Exception as exc:  # protobuf's DecodeError or onnx's own: bad input, one ModelError says why
            raise ModelError(f"these bytes are not an ONNX model ({short_reason(exc)})") from None
        return _checked(proto, None, "the model given as bytes", check)
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
        proto, left_out = _load_skeleton(path) or (onnx.load(str(path), load_external_data=False), {})
    except PermissionError:
        raise ModelError(f"cannot read {path}: permission denied") from None
    except Exception as exc:  # protobuf's DecodeError, onnx's or the OS's: bad input, one ModelError says why
        raise ModelError(
            f"{path} is not a readable ONNX model ({short_reason(exc)}): is the file truncated or of another format?"
        ) from None
    return _checked(proto, path, str(path), check, left_out)


def read_referencing(proto: onnx.ModelProto, path: Path, check: ModelCheck | None = None) -> Model:
    """``proto`` (parsed elsewhere: an export's source model) as read_model reads a model, its external
    data resolved in the folder of ``path``, the file its weights are references into: checked as
    read_model checks a file's, and never loaded as a model itself (the file holds more than this graph:
    Model's ``own_file=False``). Raises ModelError as read_model."""
    return _checked(proto, path, str(path), check, own_file=False)


def _load_skeleton(path: Path) -> tuple[onnx.ModelProto, dict[int, int]] | None:
    """The model in a binary .onnx file parsed without the data of its large weights (Model leaves those
    in the file anyway: this spares reading them at all), and {initializer index: bytes of raw_data left
    out} (wire.skeleton); None where onnx.load must read the file."""
    ext = os.path.splitext(path)[1]
    if onnx.serialization.registry.get_format_from_file_extension(ext) not in (None, "protobuf"):
        return None
    try:
        if path.stat().st_size < SKELETON_MIN_BYTES:
            return None  # the walk, in Python, costs more than reading a small file's weights
    except OSError:
        return None
    found = skeleton(path, SMALL_INITIALIZER)
    if found is None:
        return None
    try:
        return onnx.load_from_string(found[0]), found[1]
    except Exception as exc:  # the whole file's load then tells what is wrong with it, in its own words
        log.debug("the skeleton of %s does not parse (%s): the file is loaded whole", path, exc)
        return None


def _checked(
    proto: onnx.ModelProto,
    path: Path | None,
    where: str,
    check: ModelCheck | None,
    left_out: Mapping[int, int] | None = None,
    *,
    own_file: bool = True,
) -> Model:
    """``proto`` as a Model once it passed the structural checks and ``check``; ModelError saying what is
    wrong if not. ``left_out``: the raw_data lengths of the initializers read without their data."""
    if not proto.graph.node and not proto.graph.output:
        raise ModelError(f"{where} holds no ONNX graph: is it an ONNX model file?")
    check_structure(proto, where)
    check_tensor_sizes(proto, where, left_out or {})
    if check is not None:
        check(proto, where)
    external = [t for t in all_tensors(proto) if is_external(t)]
    data_files: set[Path] = set()
    if external:
        if path is None:
            raise ModelError(
                f"{where} keeps tensor {external[0].name!r} in an external data file, and a model given in "
                "memory has no folder to find it in: give read_model the .onnx file's path"
            )
        folder = path.absolute().parent.resolve()
        for tensor in external:
            data_files.add(check_external(tensor, folder, path).resolve())
        for tensor in external:
            inline_if_small(tensor, folder)
    try:
        return Model(proto, path, own_file=own_file, data_files=frozenset(data_files))
    except HeteroError:
        raise
    except Exception as exc:  # a structure onnx parsed but that makes no sense as a graph
        raise ModelError(f"{where} is not a valid ONNX model ({short_reason(exc)})") from None


def check_structure(proto: onnx.ModelProto, where: str) -> None:
    """Refuse what protobuf parses but no ONNX writer produces: a file cut after its graph, text that is
    not UTF-8, nodes reading tensors nothing defines, outputs nothing produces, ops ONNX does not define
    in the model's opset (operators.check_operators)."""
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
    check_operators(proto, where)


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
            message_field, string_field, repeated = field_kind(field)
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


_NODE_ATTRIBUTE = onnx.NodeProto.DESCRIPTOR.fields_by_name["attribute"]
_ATTRIBUTE_TEXT = ("name", "ref_attr_name", "doc_string")


def _invalid_attribute_text(attributes: Any, stack: list[Any]) -> str | None:
    """_invalid_text's check of a node's attributes, the bulk of a model's messages: the text fields by
    name, and only values that may hold text (tensors, graphs, type protos) onto ``stack``."""
    for attr in attributes:
        for name in _ATTRIBUTE_TEXT:
            if type(getattr(attr, name)) is bytes:
                return f"AttributeProto.{name}"
        if attr.type not in SCALAR_ATTRIBUTES:
            stack.append(attr)
    return None
