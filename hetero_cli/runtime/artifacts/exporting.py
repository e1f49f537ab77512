"""Export a compiled model as one self-contained artifact (artifact.py's format; importing.py reads it).
What is exported is what runs: the compiled model's plan and devices as they are now (after any
HETERO_FALLBACK move), the source model and each subgraph's ONNX model, their large weights in one pool,
each distinct one once (weight_pool.py).
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import importlib.metadata
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx

from ...errors import ModelError
from ...graph import Model
from ...graph.external import all_tensors, is_external
from ...graph.shared import short_reason
from ...ort.session import ort
from ...placement import config as cfg
from ...placement.export import fed_initializers, subgraph_model
from . import artifact, weight_pool

#: config keys an export leaves out and an import refuses to take from one: paths on the machine that
#: compiled it (an untrusted file must not make an import read or write there), and .dot dumps
LOCAL_KEYS = frozenset({*cfg.PATH_OPTIONS, *cfg.JSON_OPTIONS, cfg.DOT_DIR, cfg.DUMP_GRAPH_DOT, cfg.CACHE_DIR})

if TYPE_CHECKING:
    from ..compiled import Compiled

log = logging.getLogger("hetero_cli")


@functools.cache
def hetero_cli_version() -> str:
    """The installed hetero-cli's version (package metadata, read once: every compile with CACHE_DIR and
    every import asks)."""
    return importlib.metadata.version("hetero-cli")


def versions() -> dict[str, str]:
    """The versions an artifact records and a cache key holds: hetero-cli, onnx, onnxruntime."""
    return {"hetero_cli": hetero_cli_version(), "onnx": onnx.__version__, "onnxruntime": ort.__version__}


def export_compiled(compiled: Compiled) -> bytes:
    """The artifact of ``compiled`` as it runs now: the source model and each subgraph's ONNX model, their
    large weights pooled (each distinct one once), with the plan (devices as the sessions run them), the
    config and the versions.

    Raises ModelError where the model's weights cannot be read back from its file, or where protobuf
    cannot serialize a model without its pooled weights (over 2 GB of what is not pooled: weights in
    nested graphs or in typed fields).
    """
    # one frozen revision: a fallback meanwhile swaps in the next one, never edits this one
    revision = compiled.current()
    model = revision.model
    subgraphs = [dataclasses.replace(c.subgraph, device=c.device) for c in revision.subgraphs]
    plan = dataclasses.replace(revision.plan, subgraphs=tuple(subgraphs))
    header = {
        **versions(),
        "model": model.name,
        "device_name": compiled.device_name,
        "config": jsonable(_portable(compiled.config)),
        "one_session": revision.one_session,
        "manual": compiled.fallback.manual,
        "plan": {**plan.to_dict(), "affinities": dict(plan.affinities)},
    }
    devices = {c.device: c.target for c in revision.subgraphs}

    def models() -> Iterator[onnx.ModelProto]:
        """The source model, then each subgraph's, made one at a time: the pool keeps the weights' bytes,
        so each model with its weights inline is dropped once pooled (all of them at once held the
        weights once per model that has them, on top of the pool and the artifact)."""
        yield _inline(model.proto, model)
        for s in subgraphs:
            fed = fed_initializers(model, s, devices[s.device].kind.folds_initializers)
            # inline what embed leaves as references: the weights of a model made from another one's file
            yield _inline(subgraph_model(model, s, embed=True, fed=fed), model)

    try:
        pooled = weight_pool.pool(models())
    except ValueError as exc:  # protobuf's size limit: "exceeds maximum protobuf size of 2GB"
        raise ModelError(
            f"the model {model.name} cannot be exported: {exc}; an export keeps large top-level weights "
            "apart, but each model's other tensors (weights in nested graphs or in typed fields) stay in one "
            "protobuf message, which protobuf limits to 2 GB"
        ) from None
    header[weight_pool.TABLES] = list(pooled.tables)
    return artifact.pack(header, [*pooled.skeletons, pooled.pool])


def write_artifact(data: bytes, path: str | os.PathLike[str], replace: bool = True) -> bool:
    """Write ``data`` to ``path`` through a temporary file beside it and a rename: a reader (another
    process's cache lookup) sees the old file or the new one, never part of one. With ``replace`` False
    an existing ``path`` is kept (a hard link, which fails where the name is taken): a cache entry another
    process wrote meanwhile may be in use by a reader whose sessions read weights from it. Returns whether
    ``data`` was written. ModelError where the folder cannot be written, or where the name is taken by
    something that is no file (a folder); nothing is left behind then. Where ``path`` is a symbolic link
    (and ``replace``), the file it leads to is written: the link stays."""
    target = Path(os.path.realpath(path)) if replace else Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~_umask())
        if replace or not _linked(tmp, target):
            os.replace(tmp, target)
        return True
    except FileExistsError:
        if target.is_file():
            return False
        raise ModelError(f"cannot write {path}: something that is no file has that name: remove it") from None
    except OSError as exc:
        raise ModelError(f"cannot write {path}: {exc.strerror or exc}: check the folder") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _linked(tmp: str, target: Path) -> bool:
    """Whether ``tmp`` got the name ``target`` as a hard link; False where the file system has no hard
    links (the caller renames instead). FileExistsError where ``target`` exists."""
    try:
        os.link(tmp, target)
    except OSError as exc:  # EEXIST is not among these: FileExistsError goes on to the caller
        if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            return False
        raise
    return True


def _portable(config: cfg.SplitConfig) -> dict[str, Any]:
    """``config`` as an export keeps it: {"hetero": {...}, "devices": {device: {...}}}, LOCAL_KEYS left out."""
    return {
        "hetero": {k: v for k, v in config.hetero.items() if k not in LOCAL_KEYS},
        "devices": {
            d: {k: v for k, v in values.items() if k not in LOCAL_KEYS}
            for d, values in config.devices.items()
        },
    }


def _umask() -> int:
    """The process's umask (read by setting it, and back): what a new file's permissions leave out."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def jsonable(value: Any) -> Any:
    """``value`` with what JSON has no type for (enums such as properties.Type) as its text."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _inline(proto: onnx.ModelProto, model: Model) -> onnx.ModelProto:
    """``proto`` with the data of weights kept in external files copied in (a copy; ``proto`` as it is
    where none is external). ModelError where a file they are in is gone or changed (the model's data
    files, or the export an imported model reads its weights from)."""
    if not any(external(t) for t in all_tensors(proto)):
        return proto
    from onnx.external_data_helper import load_external_data_for_model

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    folder = model.external_dir or Path(".")
    try:
        load_external_data_for_model(copy, str(folder))
    except Exception as exc:  # OSError, or onnx's ValidationError for a file that is gone: one line, why
        raise ModelError(
            f"the weights of {model.name} cannot be read from {folder} ({short_reason(exc)}): keep the files "
            "the model was read from in place while it is in use, or read it again"
        ) from None
    return copy


def external(tensor: onnx.TensorProto) -> bool:
    """Whether ``tensor`` says its data lies outside the model (a location, or EXTERNAL alone)."""
    return is_external(tensor) or len(tensor.external_data) > 0
