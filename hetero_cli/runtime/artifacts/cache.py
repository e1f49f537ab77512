"""CACHE_DIR: a compile keeps its export in a folder, keyed by SHA-256 of what decides the compile (the
model's bytes with its weight files, the device string, the config, the versions); a later compile of the
same loads it (importing.import_compiled) instead of querying, partitioning and compiling.

An entry is untrusted input: a damaged one is ignored with a warning, removed and written again. Writes
go through a temporary file and a link (exporting.write_artifact), so processes sharing a cache never
see part of an entry, and an entry is never replaced under a process importing it (its sessions read
weights from the file): where two processes compile the same model, the first to finish keeps its entry.
A cache folder that cannot be used is a warning, never a failed compile.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from ...errors import HeteroError, ModelError
from ...graph import Model
from ...graph.external import all_tensors, external_info, is_external
from ...graph.weights import file_stamp, still
from ...placement import config as cfg
from ...placement.devices import Device
from ..compiled import Compiled
from . import exporting, importing
from .file_digest import file_digest

log = logging.getLogger("hetero_cli")

SUFFIX = ".hetero"


def key(model: Model, device_name: str, config: cfg.SplitConfig, folder: Path | None = None) -> str:
    """The hex SHA-256 of a compile: the model as held (graph, affinities set since reading), the SHA-256
    of its file and of each external data file it names (remembered in the cache ``folder``:
    file_digest.py), ``device_name``, the config (CACHE_DIR itself left out) and the versions
    (exporting.versions). ModelError where a file of the model cannot be read."""
    digest = hashlib.sha256()
    digest.update(model.skeleton.SerializeToString(deterministic=True))
    for file in _files(model):
        try:
            digest.update(str(file.name).encode() + b"\0" + file_digest(file, folder))
        except OSError as exc:
            raise ModelError(
                f"{file} cannot be read ({exc.strerror or exc}): it was there when {model.name} was read; "
                "put it back, or read the model again"
            ) from None
    hetero = {k: v for k, v in config.hetero.items() if k != cfg.CACHE_DIR}
    settings = {"hetero": hetero, "devices": config.devices}
    described = [device_name, exporting.versions(), exporting.jsonable(settings)]
    digest.update(json.dumps(described, sort_keys=True).encode())
    return digest.hexdigest()


def _files(model: Model) -> list[Path]:
    """The model's own file and its external data files (resolved in its folder), each once."""
    files = [model.path] if model.path is not None else []
    folder = model.external_dir
    if folder is not None:
        names = sorted(
            {external_info(t).get("location", "") for t in all_tensors(model.skeleton) if is_external(t)}
        )
        files += [Path(folder) / name for name in names if name]
    return files


def usable(folder: str) -> Path | None:
    """The cache folder, made where missing; None, with a warning, where it is a file or cannot be made."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning(
            "CACHE_DIR %s cannot be used (%s): compiling without the cache; give a folder you can write",
            path,
            exc.strerror or exc,
        )
        return None
    return path


def load(
    folder: Path,
    entry: str,
    model: Model,
    devices: Sequence[Device],
    config: cfg.SplitConfig,
    device_name: str,
    hetero: bool,
    draw: bool = False,
    dot_dir: str | None = None,
) -> Compiled | None:
    """The compiled model of ``model`` from cache entry ``entry`` (its key) in ``folder``,
    LOADED_FROM_CACHE (its .dot files drawn in ``dot_dir`` with ``draw``); None where there is no such entry, or (with a warning) where it is damaged or
    stale: the caller compiles and stores again. The entry's own copy of the model is checksummed, not
    parsed: the key says it is ``model``."""
    path = folder / (entry + SUFFIX)
    try:
        stamp = file_stamp(path)
    except OSError:
        return None
    if not path.is_file():
        return None
    try:
        source = dataclasses.replace(importing.read_source(path), where="the entry")
        unpacked, _ = importing.read_artifact(source)
        return importing.import_compiled(
            unpacked, "the entry", devices, config, device_name, hetero, model, draw=draw, dot_dir=dot_dir
        )
    except HeteroError as exc:  # an entry is never trusted: any failure to load it means compiling again
        log.warning("the cache entry %s cannot be loaded (%s): compiling the model again", path, exc)
        _remove(path, stamp)
        return None


def _remove(path: Path, stamp: tuple[int, int, int]) -> None:
    """Remove the damaged entry ``path`` where it is still the file load read (another process may have
    written a sound one meanwhile), so that store can write it again; where it cannot be removed, the
    entry stays and store's write keeps it (the next compile warns again)."""
    try:
        if still(path, stamp):
            path.unlink()
    except OSError as exc:  # the compile goes on without the cache entry: a warning says why
        log.warning("the damaged cache entry %s cannot be removed (%s)", path, exc.strerror or exc)


def store(folder: Path, entry: str, compiled: Compiled) -> None:
    """Write ``compiled``'s export as cache entry ``entry`` (whole or not at all) unless another process
    kept one meanwhile (the same key: the same compile); a warning where the folder cannot be written
    (the compile itself stands)."""
    try:
        data = exporting.export_compiled(compiled)
        exporting.write_artifact(data, folder / (entry + SUFFIX), replace=False)
    except HeteroError as exc:
        log.warning(
            "the compiled model could not be kept in CACHE_DIR (%s): the next compile starts again", exc
        )
