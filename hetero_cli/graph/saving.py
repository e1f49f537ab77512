"""Writing a model to a file whole or not at all: through a temporary file beside it, with its external
data files made reachable from the new file's folder."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import onnx
from onnx.external_data_helper import load_external_data_for_model

from ..errors import HeteroError, ModelError
from .external import place_external_files
from .shared import short_reason
from .weights import Weights

#: protobuf's limit on one message: a model holding its weights in itself stays under it
PROTOBUF_LIMIT = 2**31


def write_model(weights: Weights, path: str | os.PathLike[str]) -> None:
    """Write the model ``weights`` holds to ``path``, weights included, replacing what is there (its
    permissions kept), leaving nothing behind if writing fails (ModelError saying why).

    Weights in external files stay there: written into the model's own folder, the new file points at
    the same data files; written elsewhere, the data files are copied beside it. Weights that are byte
    ranges of an export (a model read from one) go into the new file itself. ``path`` is written through
    a symbolic link to the file it names, except with external data: the data files go beside the path
    given, where the saved model will be read from.
    """
    target = _target(path, follow=not weights.external or weights.borrowed)
    tmp: Path | None = None
    written: list[Path] = []
    try:
        proto = weights.proto
        if weights.borrowed:  # byte ranges of another file (an export's), which may be written again
            proto = _with_weights_inline(proto, weights)
        elif weights.external_dir is not None:
            written = place_external_files(proto, weights.external_dir, target.parent)
        tmp = new_file_beside(target)
        onnx.save(proto, str(tmp))
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        tmp.replace(target)
    except Exception as exc:  # whatever stopped the save: nothing half-written stays, one ModelError says why
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        for file in written:
            file.unlink(missing_ok=True)
        if isinstance(exc, HeteroError):
            raise
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else short_reason(exc)
        raise ModelError(f"cannot write {target}: {reason}") from None


def _with_weights_inline(proto: onnx.ModelProto, weights: Weights) -> onnx.ModelProto:
    """A copy of ``proto`` holding the data of its external tensors (references into the file ``weights``
    were read from); ModelError where that file changed since, or they would pass protobuf's 2 GB."""
    weights.check_references()
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    assert weights.external_dir is not None
    load_external_data_for_model(copy, str(weights.external_dir))
    if copy.ByteSize() >= PROTOBUF_LIMIT:
        raise ModelError(
            "the weights of a model read from an export take 2 GB or more, more than a saved .onnx file holds "
            "in itself: save the original .onnx model instead"
        )
    return copy


def _target(path: str | os.PathLike[str], *, follow: bool) -> Path:
    """Where ``write_model`` writes ``path`` (through symbolic links if ``follow``); ModelError for what
    is not a file to write."""
    if not isinstance(path, str | os.PathLike):
        raise ModelError(f"a model is saved to a file path, not {type(path).__name__}")
    if not str(path):
        raise ModelError("the output path is empty: give a file name such as model.affinities.onnx")
    target = Path(os.path.realpath(path)) if follow else Path(path).absolute()
    if target.is_dir():
        raise ModelError(f"cannot write {path}: it is a directory; give a file name inside it")
    if target.exists() and not target.is_file() and not target.is_symlink():
        raise ModelError(f"cannot write {path}: it is not a regular file; give the path of an .onnx file")
    return target


def new_file_beside(path: Path) -> Path:
    """A new empty file of a name of its own in ``path``'s folder, made with the umask's permissions: what a
    writer (``write_model``, validate's Polygraphy files) fills and then moves into place whole (nothing of
    the user's is overwritten on the way)."""
    while True:
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return candidate
