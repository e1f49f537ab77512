"""Weights left in their file: a model read from a file holds its large initializers without their data
until something needs them in memory (an export of a split, save). Sessions of the whole model load the
file, probes and shape inference run without weights, exports point ONNX Runtime at the bytes in the file
(wire.py finds them), so compiling one subgraph never holds a second copy of the weights.
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

import numpy as np
import onnx

from ..errors import ModelError
from .external import all_tensors, elements, external_info, is_external, tensor_nbytes
from .shared import copy_fields, short_reason
from .wire import raw_data_spans

# Initializers of at most this many elements are shapes, axes, scales: weightless copies keep them.
SMALL_INITIALIZER = 1024
_TENSOR_DATA = frozenset(
    {"raw_data", "float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data"}
)


class Weights:
    """The initializers of one model, and where their data is: in memory, only in the model's file (large
    embedded ones of a model read from a file), or in external data files beside it.

    ``proto``: the model as parsed; ``path``: its file, or None for a model given in memory (whose weights
    then all stay in memory). ``skeleton`` is the model as held, which ``proto`` fills in place with the
    weights read back from the file the first time they are needed. ``own_file``: False for a model made
    from another one read from ``path`` (an extract whose weights are references into that file, or
    embedded where none could be made): its embedded weights are not that file's, in its order, and stay
    in memory; its references are resolved against the file's folder.
    """

    def __init__(self, proto: onnx.ModelProto, path: Path | None, *, own_file: bool = True):
        self.path = path
        self._in_file: tuple[int, ...] = ()
        if path is not None and own_file:
            proto, self._in_file = weights_left_in_file(proto)
        self.skeleton = proto
        self._lock = threading.Lock()
        self._arrays: dict[str, np.ndarray] = {}
        # where the weights left in the file lie in it: exports and probes point ORT at those bytes
        self._stripped: dict[str, onnx.TensorProto] = {}
        self._spans: dict[str, tuple[int, int]] = {}
        self._stamp: tuple[int, int] | None = None
        if self._in_file and path is not None:
            inits = proto.graph.initializer
            self._stripped = {inits[i].name: inits[i] for i in self._in_file}
            self._spans = {
                name: span
                for name, span in raw_data_spans(path).items()
                if name in self._stripped and span[1] == tensor_nbytes(self._stripped[name])
            }
            stat = path.stat()
            self._stamp = (stat.st_size, stat.st_mtime_ns)
        self.external = any(is_external(t) for t in all_tensors(proto))  # in data files of their own
        # where sessions find the weights kept in external files (read_model checked them): the model's
        # folder; or, for weights only in the model file itself, the folder the file really is in (ORT
        # refuses a reference through a symlink that leads out of the folder it is given)
        self._real_file = path.resolve() if path is not None else None
        self.external_dir: Path | None = None
        if self.external and path is not None:
            self.external_dir = path.parent.resolve()
            if not own_file and self._only_references_into(self._real_file):
                self.external_dir = self._real_file.parent  # made from a model behind a symlink
        elif self._spans and self._real_file is not None:
            self.external_dir = self._real_file.parent
        # a model made from another one's file reads its weights there through references made before it (an
        # export's source model): the file as it was then, or check_references refuses it
        self._referenced: tuple[int, int, int] | None = None
        real = self._real_file
        # whether the external tensors are byte ranges of that file rather than data files of their own: a
        # saved copy holds them itself (the file may be written again: a re-export)
        self.borrowed = bool(
            not own_file and self.external and real is not None and self._only_references_into(real)
        )
        if self.borrowed:
            assert real is not None
            try:
                self._referenced = file_stamp(real)
            except OSError:  # gone already: read_model's check of its references said so first
                self._referenced = None

    def _only_references_into(self, real: Path) -> bool:
        """Whether every external tensor of the model held is a reference into the file ``real`` (as
        ``reference`` makes them: the source's embedded weights), none in an external data file."""
        locations = {
            entry.value
            for tensor in all_tensors(self.skeleton)
            if is_external(tensor)
            for entry in tensor.external_data
            if entry.key == "location"
        }
        return locations == {real.name}

    @property
    def proto(self) -> onnx.ModelProto:
        """The model, weights included (read back from the model's file the first time needed)."""
        if self._in_file:
            with self._lock:
                if self._in_file:
                    self._read_back()
        return self.skeleton

    @property
    def in_memory(self) -> bool:
        """False while the large weights of a model read from a file are still only in that file."""
        return not self._in_file

    @functools.cached_property
    def held(self) -> dict[str, onnx.TensorProto]:
        """{name: TensorProto} of the held dense initializers (large ones empty while their weights are
        only in the file; reading them back fills these same messages)."""
        return {t.name: t for t in self.skeleton.graph.initializer}

    @property
    def initializers(self) -> dict[str, onnx.TensorProto]:
        """{name: TensorProto} of the dense initializers, weights read back first if need be."""
        _ = self.proto  # reads the weights back into these very messages
        return self.held

    def reference(self, name: str) -> onnx.TensorProto | None:
        """Initializer ``name`` as external data pointing at its bytes in the model's file, while its
        weights are still only there (ORT reads them from the file); None otherwise.

        ModelError if the file changed since it was read. None where ORT could not follow the reference (the
        model's weights are then read into memory instead): a file whose name has a ':' in it (ONNX
        Runtime's OpenVINO EP cannot read such a location), or a symlink to a file outside the folder of
        the model's own external data files.
        """
        if not self._in_file or name not in self._spans:
            return None
        real = self._real_file
        if real is None or not referable(real) or real.parent != self.external_dir:
            return None
        self._check_unchanged()
        offset, length = self._spans[name]
        tensor = onnx.TensorProto()
        tensor.CopyFrom(self._stripped[name])
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", real.name), ("offset", str(offset)), ("length", str(length))):
            tensor.external_data.add(key=key, value=value)
        return tensor

    def export_initializer(self, name: str) -> onnx.TensorProto:
        """Initializer ``name`` for a model ORT loads: a reference into the model's file where possible,
        else the tensor with its data (read back from the file only for a large weight that cannot be
        referenced: small ones and external ones are in the skeleton as they are)."""
        reference = self.reference(name)
        if reference is not None:
            return reference
        return self.initializers[name] if name in self._stripped else self.held[name]

    def for_session(self, tensor: onnx.TensorProto) -> onnx.TensorProto:
        """An initializer of the skeleton as a session's copy of the whole model holds it: a weight left
        in the file as export_initializer gives it, any other as it is."""
        return self.export_initializer(tensor.name) if tensor.name in self._stripped else tensor

    def array(self, name: str) -> np.ndarray:
        """Initializer ``name``'s value, read from the model's file if it is only there (the other weights
        stay there); kept for the next call. ModelError if it cannot be read."""
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
        tensor = self.initializers[name] if name in self._stripped else self.held[name]
        try:
            if is_external(tensor) and self.external_dir is not None:
                info = external_info(tensor)
                offset = int(info.get("offset", "0") or 0)
                length = int(info["length"]) if info.get("length") else tensor_nbytes(tensor)
                return _decoded(tensor, _read_bytes(self.external_dir / info["location"], offset, length))
            return onnx.numpy_helper.to_array(tensor)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"cannot read initializer {name!r} of the model ({short_reason(exc)})") from None

    def check_references(self) -> None:
        """ModelError where this model's weights are references into another model's file (own_file=False)
        and that file changed since (resized, rewritten, or another file renamed over it): its sessions
        would read other bytes."""
        real = self._real_file
        if self._referenced is not None and real is not None and not still(real, self._referenced):
            raise ModelError(
                f"{self._real_file}, which this model's weights are read from, changed or is gone since the "
                "model was read: read it again"
            )

    def _check_unchanged(self) -> None:
        """ModelError if the model's file changed since it was read (its weights are read from it later)."""
        assert self.path is not None and self._stamp is not None
        try:
            stat = self.path.stat()
        except OSError:
            stat = None
        if stat is None or (stat.st_size, stat.st_mtime_ns) != self._stamp:
            raise ModelError(f"{self.path} changed on disk since it was read: read the model again")

    def _read_back(self) -> None:
        """Fill the skeleton's stripped initializers from the model's file; ModelError if it is gone or
        changed."""
        assert self.path is not None
        try:
            fresh = onnx.load(str(self.path), load_external_data=False)
        except Exception as exc:  # the file is gone, unreadable or no model now: one ModelError says why
            raise ModelError(
                f"cannot read the weights of {self.path} again ({short_reason(exc)}): keep the file in place "
                "while the model is in use, or read it again"
            ) from None
        ours, theirs = self.skeleton.graph.initializer, fresh.graph.initializer
        for i in self._in_file:
            if (
                i >= len(theirs)
                or theirs[i].name != ours[i].name
                or list(theirs[i].dims) != list(ours[i].dims)
            ):
                raise ModelError(f"{self.path} changed on disk since it was read: read the model again")
            ours[i].CopyFrom(theirs[i])
        self._in_file = ()


def referable(path: Path) -> bool:
    """Whether sessions can read weights as external data in the file ``path`` (quirk
    openvino-colon-external-data: the OpenVINO EP misreads a location with a ':' in it; graph imports no
    quirks, it cites the id). Where not, callers keep those weights in memory."""
    return ":" not in path.name


def weights_left_in_file(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """``proto`` rebuilt without the data of its large embedded initializers, and their indices.

    A new message, so the weights' memory goes with the old one (clearing fields would keep it).
    """
    inits = proto.graph.initializer
    large = tuple(i for i, t in enumerate(inits) if not is_external(t) and elements(t) > SMALL_INITIALIZER)
    if not large:
        return proto, ()
    if not any(holds_data(inits[i]) for i in large):
        return proto, large  # read without them (reading.py's _load_skeleton)
    out = onnx.ModelProto()
    copy_fields(out, proto, skip={"graph"})
    copy_fields(out.graph, proto.graph, skip={"initializer"})
    chosen = set(large)
    for i, t in enumerate(inits):
        if i in chosen:
            copy_fields(out.graph.initializer.add(), t, skip=_TENSOR_DATA)
        else:
            out.graph.initializer.append(t)
    return out, large


def is_small(tensor: onnx.TensorProto) -> bool:
    """Whether an initializer is one a weightless copy keeps (in the model, of at most SMALL_INITIALIZER
    elements: shapes, axes, scales that shape inference reads the values of)."""
    return not is_external(tensor) and elements(tensor) <= SMALL_INITIALIZER


def holds_data(tensor: onnx.TensorProto) -> bool:
    """Whether the tensor carries its data (checked without copying it out)."""
    return tensor.HasField("raw_data") or any(
        len(getattr(tensor, field)) for field in _TENSOR_DATA if field != "raw_data"
    )


def file_stamp(path: Path) -> tuple[int, int, int]:
    """What says a file is still the one read: its size, mtime in ns and inode (another file renamed over
    it differs). OSError as stat."""
    return stamp_of(path.stat())


def stamp_of(stat: os.stat_result) -> tuple[int, int, int]:
    """file_stamp of a stat result (``os.fstat`` of a file open already: the stamp of what it reads)."""
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


def still(path: Path, stamp: tuple[int, int, int]) -> bool:
    """Whether ``path`` is still the file whose file_stamp was ``stamp`` (False where it is gone)."""
    try:
        return file_stamp(path) == stamp
    except OSError:
        return False


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
